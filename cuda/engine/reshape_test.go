package engine

import (
	"slices"
	"testing"
)

// The GPU's Reshape is a view under the shape ONNX Reshape computes.
func TestReshaped(t *testing.T) {
	for _, c := range []struct {
		in        []int
		spec      []int64
		allowZero bool
		want      []int // nil: an error
	}{
		{[]int{2, 3, 4}, []int64{0, -1}, false, []int{2, 12}},
		{[]int{2, 3, 4}, []int64{4, 0, 2}, false, []int{4, 3, 2}},
		{[]int{1, 5, 128}, []int64{1, 5, 2, 64}, false, []int{1, 5, 2, 64}},
		{[]int{0, 3}, []int64{0, 3}, true, []int{0, 3}},
		{[]int{2, 3}, []int64{-1, -1}, false, nil},
		{[]int{2, 3}, []int64{4, -1}, false, nil},
		{[]int{2, 3}, []int64{7}, false, nil},
		{[]int{2, 3}, []int64{0, 0, 0}, false, nil},
		{[]int{2, 3}, []int64{-2, 3}, false, nil},
	} {
		got, err := reshaped(c.in, c.spec, c.allowZero)
		if c.want == nil {
			if err == nil {
				t.Errorf("%v to %v: %v, want an error", c.in, c.spec, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%v to %v: %v, %v, want %v", c.in, c.spec, got, err, c.want)
		}
	}
}
