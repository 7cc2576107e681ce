package explain

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/vouchml/vouch/audit"
)

// DataVersion is the format version of Data's encoding.
const DataVersion = 1

// maxDataBytes bounds an encoded Data (a bundle file parsed whole).
const maxDataBytes = 16 << 20

// Data is what a bundle keeps for explanations (the file explain.json):
// the feature names and the background set, given at build time.
//
// Its encoding is one JSON object:
//
//	{"version":1,"features":["income",…],"background":{"rows":R,"values":[…]},
//	 "labels":["approve","decline"],"label_output":"probabilities"}
//
// features one name a column of the explained input (valid UTF-8, at most
// audit.MaxFeatureName bytes each, at most MaxFeatures), values R×len(features)
// float32s row-major (finite or NaN, written as JSON numbers, NaN as null),
// R at most MaxBackground. The background may be absent. labels (at most
// MaxLabels, one line of valid UTF-8 each) name the classes of the output
// label_output, in order, so that every decision is named from the signed
// bundle — by the server and, years later, by a replay; both may be absent.
type Data struct {
	Features    []string
	Background  []float32 // rows × len(Features), row-major
	Labels      []string
	LabelOutput string
}

// MaxLabels bounds the class labels a bundle names.
const MaxLabels = 1 << 16

type wireData struct {
	Version     int             `json:"version"`
	Features    []string        `json:"features"`
	Background  *wireBackground `json:"background,omitempty"`
	Labels      []string        `json:"labels,omitempty"`
	LabelOutput string          `json:"label_output,omitempty"`
}

type wireBackground struct {
	Rows   int        `json:"rows"`
	Values []*float32 `json:"values"`
}

// Encode returns d's encoding.
func (d *Data) Encode() ([]byte, error) {
	if err := d.check(); err != nil {
		return nil, err
	}
	w := wireData{Version: DataVersion, Features: d.Features, Labels: d.Labels, LabelOutput: d.LabelOutput}
	if len(d.Background) > 0 {
		w.Background = &wireBackground{Rows: len(d.Background) / len(d.Features), Values: make([]*float32, len(d.Background))}
		for i := range d.Background {
			if v := d.Background[i]; !math.IsNaN(float64(v)) {
				w.Background.Values[i] = &d.Background[i]
			}
		}
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, fmt.Errorf("explain: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeData decodes and checks an encoded Data.
func DecodeData(b []byte) (*Data, error) {
	if len(b) > maxDataBytes {
		return nil, fmt.Errorf("explain: explanation data of %d bytes (at most %d)", len(b), maxDataBytes)
	}
	var w wireData
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&w); err != nil {
		return nil, fmt.Errorf("explain: explanation data: %w", err)
	}
	if w.Version != DataVersion {
		return nil, fmt.Errorf("explain: explanation data version %d (this vouch reads %d)", w.Version, DataVersion)
	}
	d := &Data{Features: w.Features, Labels: w.Labels, LabelOutput: w.LabelOutput}
	if bg := w.Background; bg != nil {
		if bg.Rows < 0 || bg.Rows > MaxBackground || len(bg.Values) != bg.Rows*len(w.Features) {
			return nil, fmt.Errorf("explain: background of %d values is not %d rows of %d features (at most %d rows)", len(bg.Values), bg.Rows, len(w.Features), MaxBackground)
		}
		d.Background = make([]float32, len(bg.Values))
		for i, v := range bg.Values {
			d.Background[i] = float32(math.NaN())
			if v != nil {
				d.Background[i] = *v
			}
		}
	}
	if err := d.check(); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *Data) check() error {
	if (len(d.Features) == 0 && (len(d.Labels) == 0 || len(d.Background) > 0)) || len(d.Features) > MaxFeatures {
		return fmt.Errorf("explain: %d feature names (want 1 to %d; none only when the data holds labels alone)", len(d.Features), MaxFeatures)
	}
	for i, f := range d.Features {
		if f == "" || len(f) > audit.MaxFeatureName || !utf8.ValidString(f) || strings.ContainsAny(f, "\n\r") {
			return fmt.Errorf("explain: feature %d: name %.40q is not one line of valid UTF-8, 1 to 128 bytes", i, f)
		}
	}
	if len(d.Features) > 0 && (len(d.Background)%len(d.Features) != 0 || len(d.Background)/len(d.Features) > MaxBackground) {
		return fmt.Errorf("explain: background of %d values is not at most %d rows of %d features", len(d.Background), MaxBackground, len(d.Features))
	}
	for i, v := range d.Background {
		if math.IsInf(float64(v), 0) {
			return fmt.Errorf("explain: background value %d is infinite", i)
		}
	}
	if len(d.Labels) > MaxLabels {
		return fmt.Errorf("explain: %d labels (at most %d)", len(d.Labels), MaxLabels)
	}
	for i, l := range d.Labels {
		if l == "" || len(l) > audit.MaxFeatureName || !utf8.ValidString(l) || strings.ContainsAny(l, "\n\r") {
			return fmt.Errorf("explain: label %d: %.40q is not one line of valid UTF-8, 1 to 128 bytes", i, l)
		}
	}
	if d.LabelOutput != "" && (len(d.Labels) == 0 || len(d.LabelOutput) > audit.MaxFeatureName || !utf8.ValidString(d.LabelOutput)) {
		return fmt.Errorf("explain: label_output %.40q without labels, or not valid UTF-8 of at most 128 bytes", d.LabelOutput)
	}
	return nil
}

// ParseFeatures reads feature names, one a line (blank lines and a final
// newline ignored; surrounding spaces trimmed), as `vouch build --features`
// takes them.
func ParseFeatures(b []byte) ([]string, error) { return parseNames(b, "features", MaxFeatures) }

// ParseLabels reads class labels, one a line in output order, as `vouch
// build --labels`, `serve --labels` and `replay --labels` take them.
func ParseLabels(b []byte) ([]string, error) { return parseNames(b, "labels", MaxLabels) }

func parseNames(b []byte, what string, most int) ([]string, error) {
	var out []string
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if len(l) > audit.MaxFeatureName || !utf8.ValidString(l) {
			return nil, fmt.Errorf("explain: %s line %d is not valid UTF-8 of at most 128 bytes", what, i+1)
		}
		out = append(out, l)
		if len(out) > most {
			return nil, fmt.Errorf("explain: more than %d %s", most, what)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("explain: no %s", what)
	}
	return out, nil
}

// FeaturesFromMeta returns the feature names a model declares in its ONNX
// metadata_props: "vouch.features" or "feature_names", comma-separated;
// nil when it declares none.
func FeaturesFromMeta(meta map[string]string) []string {
	for _, k := range []string{"vouch.features", "feature_names"} {
		if v := meta[k]; v != "" {
			var out []string
			for _, f := range strings.Split(v, ",") {
				out = append(out, strings.TrimSpace(f))
			}
			return out
		}
	}
	return nil
}
