package compile

import (
	"bytes"

	"github.com/vouchml/vouch/buildlog"
)

// finishReport adds the precision pass's findings to the build report.
func (s *state) finishReport(r *buildlog.Report) {
	if s.prec == nil || s.prec.report == nil {
		return
	}
	r.Precision = s.prec.report
	for _, rec := range s.log.Records {
		if rec.Pass == "precision" && rec.Level == buildlog.Warn {
			if m, ok := rec.Fields["message"].(string); ok {
				r.Warnings = append(r.Warnings, m)
			} else if why, ok := rec.Fields["reason"].(string); ok {
				r.Warnings = append(r.Warnings, rec.Event+": "+why)
			}
		}
	}
}

// calibrationCache returns the calibration cache file of an int8 build.
func (s *state) calibrationCache() []byte {
	if s.prec == nil || s.prec.cache == nil {
		return nil
	}
	var b bytes.Buffer
	if err := s.prec.cache.Format(&b); err != nil {
		return nil
	}
	if s.prec.report != nil {
		s.prec.report.CalibrationCache = "" // set by the caller that writes it
	}
	return b.Bytes()
}
