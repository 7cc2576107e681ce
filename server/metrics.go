package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus collectors, in a registry of its own.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec   // model, protocol, code
	latency   *prometheus.HistogramVec // model, protocol
	queue     *prometheus.HistogramVec // model
	compute   *prometheus.HistogramVec // model
	audit     prometheus.Histogram
	auditErrs prometheus.Counter
	// auditFailures counts failed appends by what became of the request
	// ("refused" or "served"); auditAlarm is 1 while the last append failed.
	auditFailures *prometheus.CounterVec
	auditAlarm    prometheus.Gauge
	captureErrs   prometheus.Counter
	inflight      prometheus.Gauge
	batch         *prometheus.HistogramVec // model
	queueDepth    *prometheus.GaugeVec     // model
	auditDepth    prometheus.Gauge
	connOpen      prometheus.Gauge
	connRefused   prometheus.Counter
	// refusedBelow counts requests refused before any handler saw them
	// (refused.go), by protocol and reason.
	refusedBelow *prometheus.CounterVec
}

func newMetrics() *metrics {
	buckets := prometheus.ExponentialBuckets(50e-6, 2, 18) // 50µs … 6.5s
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vouch_requests_total", Help: "Inference requests by model, protocol and response status: the HTTP status code, or the gRPC code name (InvalidArgument, ...).",
		}, []string{"model", "protocol", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vouch_request_duration_seconds", Help: "Inference request latency, decode to response, excluding the audit append.", Buckets: buckets,
		}, []string{"model", "protocol"}),
		queue: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vouch_queue_duration_seconds", Help: "Time a request waited in its model's queue.", Buckets: buckets,
		}, []string{"model"}),
		compute: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vouch_compute_duration_seconds", Help: "Time of the engine run that served a request.", Buckets: buckets,
		}, []string{"model"}),
		audit: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "vouch_audit_append_duration_seconds", Help: "Time to append one audit record.", Buckets: buckets,
		}),
		auditErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vouch_audit_append_errors_total", Help: "Audit appends that failed (the request was refused).",
		}),
		auditFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vouch_audit_failures_total", Help: "Records the audit log could not take, by outcome: refused (503, fail closed) or served (unaudited, fail open).",
		}, []string{"outcome"}),
		auditAlarm: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vouch_audit_alarm", Help: "1 while the audit log is failing (the last append failed), else 0.",
		}),
		captureErrs: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vouch_capture_failures_total", Help: "Inputs that could not be captured.",
		}),
		inflight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vouch_inflight_requests", Help: "Inference requests being served.",
		}),
		batch: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "vouch_batch_size", Help: "Rows per engine run.", Buckets: prometheus.ExponentialBuckets(1, 2, 10),
		}, []string{"model"}),
		queueDepth: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "vouch_queue_depth", Help: "Requests waiting in a model's queue.",
		}, []string{"model"}),
		auditDepth: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vouch_audit_queue_depth", Help: "Audit appends in progress.",
		}),
		connOpen: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "vouch_connections_open", Help: "Client connections open (HTTP and gRPC listeners).",
		}),
		connRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "vouch_connections_refused_total", Help: "Connections closed on accept because a connection limit was reached.",
		}),
		refusedBelow: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "vouch_refused_below_handler_total", Help: "Requests refused before any handler saw them, so without an audit record, by protocol (conn, http, grpc) and reason.",
		}, []string{"protocol", "reason"}),
	}
	// Present from the start, so that an alert on them has a series to
	// watch before the first failure.
	m.auditFailures.WithLabelValues("refused")
	m.auditFailures.WithLabelValues("served")
	m.refusedBelow.WithLabelValues("conn", refusedConnLimit)
	m.refusedBelow.WithLabelValues("http", refusedHTTP)
	m.reg.MustRegister(m.requests, m.latency, m.queue, m.compute, m.audit, m.auditErrs, m.auditFailures, m.auditAlarm, m.captureErrs,
		m.inflight, m.batch, m.queueDepth, m.auditDepth, m.connOpen, m.connRefused, m.refusedBelow,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}
