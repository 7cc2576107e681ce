package audit

import (
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"math"
	"unicode/utf8"
)

// Bounds of the schema version 2 members, so that a record stays far below
// the log's 64 KiB entry limit whatever the batch: a record lists the
// decisions (and reasons) of its first MaxDecisions rows; every row, listed
// or not, is covered by decisions_digest and by the explanation's digest
// of the full contribution vector, so replay checks all of them.
const (
	MaxDecisions   = 32  // rows whose decision is listed in one record
	MaxReasons     = 5   // reasons listed per row
	MaxFeatureName = 128 // bytes of a feature name in a reason
)

// A Decision is the outcome of one row of a request: the label of its top
// class and that class's confidence, and the principal reasons behind it.
// Its JSON members, in order, are confidence (number), label (string),
// reasons (array of [Reason]) and target (integer: the index of the score
// the reasons explain, omitted when 0).
type Decision struct {
	Label      string
	Confidence *float64 // nil when the model declares no labels
	Target     int
	Reasons    []Reason // at most MaxReasons, largest |contribution| first
}

// A Reason is one feature's part in a decision: its name, the value the
// request gave it, and its contribution to the explained score, positive
// when it raised the score. Its JSON members, in order, are contribution
// (number), direction ("increases" or "decreases"; "none" for a zero
// contribution), feature (string) and value (number; omitted when the
// value was not finite, a missing value).
type Reason struct {
	Feature      string
	Value        float64
	Contribution float64
}

// Direction names the sign of r's contribution.
func (r Reason) Direction() string {
	switch {
	case r.Contribution > 0:
		return "increases"
	case r.Contribution < 0:
		return "decreases"
	}
	return "none"
}

// An Explanation says how a record's reasons were computed. Its JSON
// members, in order, are
//
//	background  string  "sha256:" digest of the background set used (covers or baseline)
//	covers      string  where tree node covers came from: "background" or "model"
//	digest      string  [ContributionsDigest] of every row's full contribution vector
//	estimate    boolean true when the attribution is an estimate (KernelSHAP)
//	features    integer number of features
//	method      string  "tree_shap", "linear" or "kernel_shap"
//	score       string  what the contributions of a row sum to: "margin" (before the
//	                    post transform) or the name of the output explained
type Explanation struct {
	Method     string
	Estimate   bool
	Covers     string
	Background string
	Score      string
	Features   int
	Digest     string
}

// decisionsHeader and contributionsHeader open the digests below (version
// lines of their encodings).
const (
	decisionsHeader     = "vouch-decisions-v1\n"
	contributionsHeader = "vouch-contributions-v1\n"
)

// DecisionsDigest returns the digest of every row's decision, listed in a
// record or not:
//
//	SHA-256("vouch-decisions-v1\n" | u64 rows |
//	        rows × (u32 len(label) | label | u8 has_confidence | f64 confidence))
//
// integers and the IEEE 754 bits of the confidence little-endian (0 when
// there is none). Reasons are not part of it: the explanation's digest
// covers them.
func DecisionsDigest(ds []Decision) string {
	le := binary.LittleEndian
	h := sha256.New()
	h.Write([]byte(decisionsHeader))
	b := le.AppendUint64(nil, uint64(len(ds)))
	for _, d := range ds {
		b = le.AppendUint32(b, uint32(len(d.Label)))
		b = append(b, d.Label...)
		var c uint64
		if d.Confidence != nil {
			b = append(b, 1)
			c = math.Float64bits(*d.Confidence)
		} else {
			b = append(b, 0)
		}
		b = le.AppendUint64(b, c)
		h.Write(b)
		b = b[:0]
	}
	h.Write(b)
	return formatDigest(h)
}

// ContributionsDigest returns the digest of a batch's full contribution
// vectors: for each row, the target whose score is explained and the
// nfeat+1 contributions to it (one a feature in column order, then the
// bias, the expected score):
//
//	SHA-256("vouch-contributions-v1\n" | u32 nfeat | u64 rows |
//	        rows × (u32 target | (nfeat+1) × f64))
//
// all little-endian, the f64s as their IEEE 754 bits (so -0 and 0 differ).
// contrib holds rows·(nfeat+1) values, row by row.
func ContributionsDigest(nfeat int, targets []int, contrib []float64) (string, error) {
	if nfeat < 0 || len(contrib) != len(targets)*(nfeat+1) {
		return "", fmt.Errorf("audit: %d contributions for %d rows of %d features", len(contrib), len(targets), nfeat)
	}
	le := binary.LittleEndian
	h := sha256.New()
	h.Write([]byte(contributionsHeader))
	b := le.AppendUint32(nil, uint32(nfeat))
	b = le.AppendUint64(b, uint64(len(targets)))
	h.Write(b)
	for i, t := range targets {
		b = le.AppendUint32(b[:0], uint32(t))
		for _, v := range contrib[i*(nfeat+1) : (i+1)*(nfeat+1)] {
			b = le.AppendUint64(b, math.Float64bits(v))
		}
		h.Write(b)
	}
	return formatDigest(h), nil
}

// checkV2 checks the schema version 2 members of r.
func (r *Record) checkV2() error {
	v2 := r.Rows != 0 || len(r.Decisions) > 0 || r.DecisionsDigest != "" || r.Explanation != nil
	if v := r.version(); v != SchemaVersion {
		if v != 1 {
			return fmt.Errorf("%w: trace %s: unsupported schema_version %d", ErrRecord, r.TraceID, v)
		}
		if v2 {
			return fmt.Errorf("%w: trace %s: schema_version 1 has no decisions, rows or explanation", ErrRecord, r.TraceID)
		}
		return nil
	}
	switch {
	case r.Rows < 0:
		return fmt.Errorf("%w: trace %s: rows %d", ErrRecord, r.TraceID, r.Rows)
	case len(r.Decisions) > MaxDecisions:
		return fmt.Errorf("%w: trace %s: %d decisions listed (at most %d)", ErrRecord, r.TraceID, len(r.Decisions), MaxDecisions)
	case len(r.Decisions) > r.Rows:
		return fmt.Errorf("%w: trace %s: %d decisions for %d rows", ErrRecord, r.TraceID, len(r.Decisions), r.Rows)
	case len(r.Decisions) > 0 && r.DecisionsDigest == "":
		return fmt.Errorf("%w: trace %s: decisions without decisions_digest", ErrRecord, r.TraceID)
	}
	for i, d := range r.Decisions {
		if c := d.Confidence; c != nil && (math.IsNaN(*c) || math.IsInf(*c, 0)) {
			return fmt.Errorf("%w: trace %s: row %d: confidence %v is not finite", ErrRecord, r.TraceID, i, *c)
		}
		if d.Target < 0 {
			return fmt.Errorf("%w: trace %s: row %d: target %d", ErrRecord, r.TraceID, i, d.Target)
		}
		if len(d.Reasons) > MaxReasons {
			return fmt.Errorf("%w: trace %s: row %d: %d reasons (at most %d)", ErrRecord, r.TraceID, i, len(d.Reasons), MaxReasons)
		}
		for _, re := range d.Reasons {
			if len(re.Feature) > MaxFeatureName || !utf8.ValidString(re.Feature) {
				return fmt.Errorf("%w: trace %s: row %d: feature name %.40q… is not valid UTF-8 of at most %d bytes", ErrRecord, r.TraceID, i, re.Feature, MaxFeatureName)
			}
			if math.IsNaN(re.Contribution) || math.IsInf(re.Contribution, 0) {
				return fmt.Errorf("%w: trace %s: row %d: feature %q: contribution %v is not finite", ErrRecord, r.TraceID, i, re.Feature, re.Contribution)
			}
		}
	}
	if x := r.Explanation; x != nil {
		switch x.Method {
		case "tree_shap", "linear", "kernel_shap":
		default:
			return fmt.Errorf("%w: trace %s: unknown explanation method %q", ErrRecord, r.TraceID, x.Method)
		}
		if x.Features < 0 || x.Digest == "" {
			return fmt.Errorf("%w: trace %s: explanation without features or digest", ErrRecord, r.TraceID)
		}
	}
	return nil
}

// decisions writes the decisions member (schema version 2).
func (w *canonWriter) decisions(ds []Decision) {
	if len(ds) == 0 {
		return
	}
	w.key("decisions")
	w.open('[')
	for _, d := range ds {
		w.open('{')
		if d.Confidence != nil {
			w.key("confidence")
			w.float(*d.Confidence)
		}
		w.optString("label", d.Label)
		if len(d.Reasons) > 0 {
			w.key("reasons")
			w.open('[')
			for _, re := range d.Reasons {
				w.open('{')
				w.key("contribution")
				w.float(re.Contribution)
				w.key("direction")
				w.string(re.Direction())
				w.key("feature")
				w.string(re.Feature)
				if !math.IsNaN(re.Value) && !math.IsInf(re.Value, 0) {
					w.key("value")
					w.float(re.Value)
				}
				w.close('}')
			}
			w.close(']')
		}
		if d.Target != 0 {
			w.key("target")
			w.int(int64(d.Target))
		}
		w.close('}')
	}
	w.close(']')
}

// explanation writes the explanation member (schema version 2).
func (w *canonWriter) explanation(x *Explanation) {
	if x == nil {
		return
	}
	w.key("explanation")
	w.open('{')
	w.optString("background", x.Background)
	w.optString("covers", x.Covers)
	w.optString("digest", x.Digest)
	if x.Estimate {
		w.key("estimate")
		w.sep()
		w.buf = append(w.buf, "true"...)
		w.comma = true
	}
	if x.Features != 0 {
		w.key("features")
		w.int(int64(x.Features))
	}
	w.optString("method", x.Method)
	w.optString("score", x.Score)
	w.close('}')
}

// Wire forms of the version 2 members, for Parse.
type wireDecision struct {
	Confidence *float64     `json:"confidence"`
	Label      string       `json:"label"`
	Reasons    []wireReason `json:"reasons"`
	Target     int          `json:"target"`
}

type wireReason struct {
	Contribution float64  `json:"contribution"`
	Direction    string   `json:"direction"`
	Feature      string   `json:"feature"`
	Value        *float64 `json:"value"`
}

type wireExplanation struct {
	Background string `json:"background"`
	Covers     string `json:"covers"`
	Digest     string `json:"digest"`
	Estimate   bool   `json:"estimate"`
	Features   int    `json:"features"`
	Method     string `json:"method"`
	Score      string `json:"score"`
}

// fromWireDecisions converts parsed decisions; a direction that does not
// match its contribution's sign makes the re-encoding differ, so Parse
// rejects it.
func fromWireDecisions(w []wireDecision) []Decision {
	if len(w) == 0 {
		return nil
	}
	out := make([]Decision, len(w))
	for i, d := range w {
		out[i] = Decision{Label: d.Label, Confidence: d.Confidence, Target: d.Target}
		for _, r := range d.Reasons {
			v := math.NaN()
			if r.Value != nil {
				v = *r.Value
			}
			out[i].Reasons = append(out[i].Reasons, Reason{Feature: r.Feature, Value: v, Contribution: r.Contribution})
		}
	}
	return out
}

func fromWireExplanation(w *wireExplanation) *Explanation {
	if w == nil {
		return nil
	}
	return &Explanation{Method: w.Method, Estimate: w.Estimate, Covers: w.Covers, Background: w.Background,
		Score: w.Score, Features: w.Features, Digest: w.Digest}
}
