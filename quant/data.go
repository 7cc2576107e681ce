package quant

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/vouchml/vouch/npy"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/tensor"
)

// LoadBatches reads calibration or evaluation data: a .pb (ONNX
// TensorProto) or .npy file holding one batch (the leading dimension is
// the batch), or a directory whose .pb and .npy files, in name order, are
// batches. Every batch must have the same trailing dimensions.
func LoadBatches(path string) ([]*tensor.Tensor, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("quant: %w", err)
	}
	var files []string
	if fi.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			return nil, fmt.Errorf("quant: %w", err)
		}
		for _, e := range ents {
			if ext := filepath.Ext(e.Name()); !e.IsDir() && (ext == ".pb" || ext == ".npy") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		sort.Strings(files)
		if len(files) == 0 {
			return nil, fmt.Errorf("quant: directory %s holds no .pb or .npy files", path)
		}
	} else {
		files = []string{path}
	}
	var out []*tensor.Tensor
	for _, f := range files {
		t, err := LoadTensor(f)
		if err != nil {
			return nil, err
		}
		if len(t.Shape) == 0 {
			return nil, fmt.Errorf("quant: %s: a batch needs a leading batch dimension, got a scalar", f)
		}
		if len(out) > 0 && !sameInts(out[0].Shape[1:], t.Shape[1:]) {
			return nil, fmt.Errorf("quant: %s: shape %v does not match the first batch's %v", f, t.Shape, out[0].Shape)
		}
		out = append(out, t)
	}
	return out, nil
}

// LoadTensor reads one .pb or .npy tensor file.
func LoadTensor(path string) (*tensor.Tensor, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("quant: %w", err)
	}
	var t *tensor.Tensor
	if strings.HasSuffix(path, ".npy") {
		t, err = npy.Decode(b)
	} else {
		t, err = onnx.DecodeTensor(b)
	}
	if err != nil {
		return nil, fmt.Errorf("quant: %s: %w", path, err)
	}
	return t, nil
}

// Rows splits a batch tensor into slices of at most n rows (views).
func Rows(t *tensor.Tensor, n int) []*tensor.Tensor {
	if len(t.Shape) == 0 || t.Shape[0] <= n {
		return []*tensor.Tensor{t}
	}
	per := t.Len() / t.Shape[0]
	var out []*tensor.Tensor
	for lo := 0; lo < t.Shape[0]; lo += n {
		hi := min(lo+n, t.Shape[0])
		shape := append([]int{hi - lo}, t.Shape[1:]...)
		out = append(out, &tensor.Tensor{DType: t.DType, Shape: shape, Data: slice(t.Data, lo*per, hi*per)})
	}
	return out
}

func slice(d any, lo, hi int) any {
	switch v := d.(type) {
	case []float32:
		return v[lo:hi]
	case []float64:
		return v[lo:hi]
	case []int64:
		return v[lo:hi]
	case []int32:
		return v[lo:hi]
	case []uint8:
		return v[lo:hi]
	case []int8:
		return v[lo:hi]
	case []bool:
		return v[lo:hi]
	case []tensor.Half:
		return v[lo:hi]
	}
	panic(fmt.Sprintf("quant: cannot slice %T", d))
}

func sameInts(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
