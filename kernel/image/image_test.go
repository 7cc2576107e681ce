package image

import (
	"fmt"
	"testing"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

func node(op string, version int64, attrs ...*ir.Attr) *ir.Node {
	n := &ir.Node{Name: op, OpType: op, Version: version, Attrs: map[string]*ir.Attr{}}
	for _, a := range attrs {
		n.Attrs[a.Name] = a
	}
	return n
}

func str(name, v string) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrString, S: v} }
func integer(name string, v int64) *ir.Attr {
	return &ir.Attr{Name: name, Kind: ir.AttrInt, I: v}
}
func ints(name string, v ...int64) *ir.Attr { return &ir.Attr{Name: name, Kind: ir.AttrInts, Ints: v} }

func f32(shape []int, v ...float32) *tensor.Tensor { return tensor.From(v, shape...) }

func TestResizeSemantics(t *testing.T) {
	x4 := f32([]int{4}, 0, 1, 2, 3)
	cases := []struct {
		name string
		n    *ir.Node
		in   []*tensor.Tensor
		want string
	}{
		{
			// Antialiased linear downsampling by 2: a 4-tap triangle filter
			// (weights 1/8, 3/8, 3/8, 1/8) with edge clamping.
			"antialias linear", node("Resize", 18, str("mode", "linear"), integer("antialias", 1)),
			[]*tensor.Tensor{x4, nil, f32([]int{1}, 0.5)}, "[2] [0.625 2.375]",
		},
		{
			"nearest round_prefer_ceil asymmetric", node("Resize", 13, str("coordinate_transformation_mode", "asymmetric"), str("nearest_mode", "round_prefer_ceil")),
			[]*tensor.Tensor{x4, nil, f32([]int{1}, 0.4)}, "[1] [0]",
		},
		{
			"keep aspect ratio not_larger", node("Resize", 18, ints("axes", 2, 3), str("keep_aspect_ratio_policy", "not_larger")),
			[]*tensor.Tensor{tensor.New(tensor.Float32, 1, 1, 4, 6), nil, nil, tensor.From([]int64{3, 3}, 2)}, "[1 1 2 3] [0 0 0 0 0 0]",
		},
		{
			"tf_crop_and_resize extrapolation", node("Resize", 13, str("mode", "linear"), str("coordinate_transformation_mode", "tf_crop_and_resize"), &ir.Attr{Name: "extrapolation_value", Kind: ir.AttrFloat, F: 9}),
			[]*tensor.Tensor{x4, f32([]int{2}, 0.5, 1.5), nil, tensor.From([]int64{3}, 1)}, "[3] [1.5 3 9]",
		},
		{
			"uint8 cubic saturates", node("Resize", 13, str("mode", "cubic")),
			[]*tensor.Tensor{tensor.From([]uint8{0, 255, 0, 255}, 4), nil, f32([]int{1}, 2)}, "",
		},
		{
			"upsample-7 attribute", node("Upsample", 7, &ir.Attr{Name: "scales", Kind: ir.AttrFloats, Floats: []float32{2}}),
			[]*tensor.Tensor{f32([]int{2}, 1, 2)}, "[4] [1 1 2 2]",
		},
	}
	for _, c := range cases {
		out, err := runResize(nil, c.n, c.in)
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if c.want == "" {
			continue
		}
		if got := fmt.Sprint(out[0].Shape, out[0].Data); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

func TestResizeBadInput(t *testing.T) {
	x := f32([]int{2, 2}, 1, 2, 3, 4)
	cases := []struct {
		name string
		n    *ir.Node
		in   []*tensor.Tensor
	}{
		{"zero scale", node("Resize", 13), []*tensor.Tensor{x, nil, f32([]int{2}, 1, 0)}},
		{"negative scale", node("Resize", 10), []*tensor.Tensor{x, f32([]int{2}, -1, 1)}},
		{"scales length", node("Resize", 13), []*tensor.Tensor{x, nil, f32([]int{1}, 2)}},
		{"scales and sizes", node("Resize", 13), []*tensor.Tensor{x, nil, f32([]int{2}, 1, 1), tensor.From([]int64{2, 2}, 2)}},
		{"neither", node("Resize", 13), []*tensor.Tensor{x, nil, nil, nil}},
		{"negative size", node("Resize", 13), []*tensor.Tensor{x, nil, nil, tensor.From([]int64{2, -2}, 2)}},
		{"bad axis", node("Resize", 18, ints("axes", 5)), []*tensor.Tensor{x, nil, f32([]int{1}, 2)}},
		{"bad mode", node("Resize", 13, str("mode", "area")), []*tensor.Tensor{x, nil, f32([]int{2}, 1, 1)}},
		{"string linear", node("Resize", 13, str("mode", "linear")), []*tensor.Tensor{tensor.From([]string{"a", "b"}, 2), nil, f32([]int{1}, 2)}},
	}
	for _, c := range cases {
		if _, err := runResize(nil, c.n, c.in); err == nil {
			t.Errorf("%s: expected an error", c.name)
		}
	}
}

func TestResizeInfer(t *testing.T) {
	n := node("Resize", 13)
	x := ir.Type{DType: tensor.Float32, RankKnown: true, Shape: []ir.Dim{{Param: "N"}, ir.Fixed(3), ir.Fixed(10), ir.Unknown}}
	got, err := inferResize(n, []ir.InferInput{{Present: true, Type: x}, {}, {Present: true, Const: f32([]int{4}, 1, 1, 1.5, 2)}})
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(got); s != "[float32[N,3,15,?]]" {
		t.Errorf("scales: inferred %s", s)
	}
	got, err = inferResize(n, []ir.InferInput{{Present: true, Type: x}, {}, {}, {Present: true, Const: tensor.From([]int64{1, 3, 7, 8}, 4)}})
	if err != nil {
		t.Fatal(err)
	}
	if s := fmt.Sprint(got); s != "[float32[1,3,7,8]]" {
		t.Errorf("sizes: inferred %s", s)
	}
}

func TestGridSampleBadInput(t *testing.T) {
	n := node("GridSample", 16)
	x := tensor.New(tensor.Float32, 1, 1, 2, 2)
	for _, g := range []*tensor.Tensor{tensor.New(tensor.Float32, 1, 2, 2, 3), tensor.New(tensor.Float32, 2, 2, 2, 2), tensor.New(tensor.Int64, 1, 2, 2, 2)} {
		if _, err := runGridSample(nil, n, []*tensor.Tensor{x, g}); err == nil {
			t.Errorf("grid %v: expected an error", g.Shape)
		}
	}
	// Reflection far outside the image stays in range.
	g := f32([]int{1, 1, 2, 2}, 37.3, -55.1, -1e6, 1e6)
	for _, pad := range []string{"zeros", "border", "reflection"} {
		for _, mode := range []string{"bilinear", "nearest", "bicubic"} {
			if _, err := runGridSample(nil, node("GridSample", 16, str("padding_mode", pad), str("mode", mode)), []*tensor.Tensor{x, g}); err != nil {
				t.Errorf("%s/%s: %v", pad, mode, err)
			}
		}
	}
}

func TestRoiAlignBadInput(t *testing.T) {
	n := node("RoiAlign", 16)
	x := tensor.New(tensor.Float32, 1, 1, 4, 4)
	roi := f32([]int{1, 4}, 0, 0, 2, 2)
	cases := map[string][]*tensor.Tensor{
		"batch index":  {x, roi, tensor.From([]int64{1}, 1)},
		"roi shape":    {x, f32([]int{1, 3}, 0, 0, 2), tensor.From([]int64{0}, 1)},
		"x rank":       {tensor.New(tensor.Float32, 4, 4), roi, tensor.From([]int64{0}, 1)},
		"indices size": {x, roi, tensor.From([]int64{0, 0}, 2)},
		"huge roi":     {x, f32([]int{1, 4}, 0, 0, 1e9, 1e9), tensor.From([]int64{0}, 1)},
	}
	for name, in := range cases {
		if _, err := runRoiAlign(nil, n, in); err == nil {
			t.Errorf("%s: expected an error", name)
		}
	}
}

func TestNMSOrderAndLimits(t *testing.T) {
	boxes := f32([]int{1, 3, 4}, 0, 0, 1, 1, 0, 0, 1, 1, 5, 5, 6, 6)
	scores := f32([]int{1, 1, 3}, 0.5, 0.5, 0.9)
	n := node("NonMaxSuppression", 11)
	out, err := runNMS(nil, n, []*tensor.Tensor{boxes, scores, tensor.From([]int64{10}, 1), f32([]int{1}, 0.5)})
	if err != nil {
		t.Fatal(err)
	}
	// Box 2 first (highest score); boxes 0 and 1 tie and overlap fully: the
	// lower index wins.
	if got := fmt.Sprint(out[0].Shape, out[0].Data); got != "[2 3] [0 0 2 0 0 0]" {
		t.Errorf("got %s", got)
	}
	out, err = runNMS(nil, n, []*tensor.Tensor{boxes, scores})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(out[0].Shape); got != "[0 3]" {
		t.Errorf("without max_output_boxes_per_class: got shape %s, want [0 3]", got)
	}
	if _, err := runNMS(nil, n, []*tensor.Tensor{boxes, f32([]int{1, 1, 2}, 1, 2)}); err == nil {
		t.Error("mismatched scores: expected an error")
	}
}
