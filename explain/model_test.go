package explain

import (
	"strings"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

func classifierGraph() *ir.Graph {
	n := ir.Dim{Value: -1, Param: "N"}
	return &ir.Graph{
		Inputs: []*ir.Value{{Name: "X", Type: ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{n, {Value: 8}}}}},
		Outputs: []*ir.Value{
			{Name: "label", Type: ir.Type{DType: tensor.Int64, RankKnown: true, Shape: []ir.Dim{n}}},
			{Name: "probabilities", Type: ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{n, {Value: 2}}}},
		},
	}
}

// TestLabels: labels come from what was given, else the bundle, else the
// model's metadata, and name the first output with one class a label.
func TestLabels(t *testing.T) {
	g := classifierGraph()
	meta := map[string]string{"vouch.labels": "good,bad"}
	bundled := &Data{Features: []string{"a"}, Labels: []string{"approve", "decline"}}
	for _, tc := range []struct {
		d           *Data
		given       []string
		givenOutput string
		want        string
		output      string
		err         string
	}{
		{nil, nil, "", "good,bad", "probabilities", ""},
		{bundled, nil, "", "approve,decline", "probabilities", ""},
		{bundled, []string{"no", "yes"}, "", "no,yes", "probabilities", ""},
		{nil, []string{"a", "b", "c"}, "", "a,b,c", "label", ""}, // no output has 3 classes: the first
		{nil, []string{"a", "b", "c"}, "probabilities", "", "", "3 labels for output \"probabilities\" whose last dimension is 2"},
		{nil, []string{"a", "b"}, "scores", "", "", "not an output"},
	} {
		got, output, err := Labels(g, meta, tc.d, tc.given, tc.givenOutput)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v %q: error %v, want %q", tc.given, tc.givenOutput, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(got, ",") != tc.want || output != tc.output {
			t.Errorf("%v: got %v %q %v, want %s %s", tc.given, got, output, err, tc.want, tc.output)
		}
	}
	if l, _, err := Labels(g, nil, nil, nil, ""); l != nil || err != nil {
		t.Errorf("no labels anywhere: %v %v", l, err)
	}
}

// TestDataLabels: labels travel in explain.json, bounded and checked.
func TestDataLabels(t *testing.T) {
	d := &Data{Features: []string{"income", "age"}, Labels: []string{"approve", "decline"}, LabelOutput: "probabilities"}
	b, err := d.Encode()
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeData(b)
	if err != nil || strings.Join(got.Labels, ",") != "approve,decline" || got.LabelOutput != "probabilities" {
		t.Fatalf("round trip: %+v %v", got, err)
	}
	only := &Data{Labels: []string{"cat", "dog"}}
	if b, err := only.Encode(); err != nil {
		t.Fatalf("labels alone: %v", err)
	} else if got, err := DecodeData(b); err != nil || len(got.Features) != 0 || len(got.Labels) != 2 {
		t.Fatalf("labels alone: %+v %v", got, err)
	}
	for _, bad := range []string{
		`{"version":1,"features":["a"],"labels":["ok","two\nlines"]}`,
		`{"version":1,"features":["a"],"labels":[""]}`,
		`{"version":1,"features":["a"],"label_output":"p"}`,
		`{"version":1,"labels":["a"],"background":{"rows":1,"values":[1]}}`,
	} {
		if _, err := DecodeData([]byte(bad)); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}
