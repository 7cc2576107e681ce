package stream

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Collectors returns the exporter's Prometheus metrics, labelled with its
// name: vouch_export_lag_records (entries in the log not yet acknowledged
// by the sink), vouch_export_lag_seconds (age of the oldest of them, by
// record time), vouch_export_cursor (next index to deliver) and
// vouch_export_failing (1 while sends fail).
func (e *Exporter) Collectors() []prometheus.Collector {
	l := prometheus.Labels{"exporter": e.opts.Name}
	return []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vouch_export_lag_records", ConstLabels: l,
			Help: "Audit log entries an exporter has not delivered yet."}, func() float64 { return float64(e.Lag()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vouch_export_lag_seconds", ConstLabels: l,
			Help: "Age of the oldest audit record an exporter has not delivered yet (0 when caught up)."},
			func() float64 { return e.LagAge(time.Now()).Seconds() }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vouch_export_cursor", ConstLabels: l,
			Help: "Next audit log index an exporter will deliver."}, func() float64 { return float64(e.Cursor()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "vouch_export_failing", ConstLabels: l,
			Help: "1 while an exporter's deliveries fail, else 0."}, func() float64 {
			if e.failing.Load() {
				return 1
			}
			return 0
		}),
	}
}
