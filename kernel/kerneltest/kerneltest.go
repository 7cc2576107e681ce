// Package kerneltest runs a kernel test once per implementation of the
// kernel on this CPU, the way Go's cryptotest.TestAllImplementations runs
// a crypto test once per registered implementation: every instruction-set
// level the CPU can run (kernel.ISAs: portable, AVX2, AVX-512) is forced in
// turn through kernel.Ctx, never through a package variable, so the tests
// that use it may run in parallel with anything.
//
// Twins is the determinism contract's check (DESIGN.md: every vectorised
// kernel has a portable Go twin that gives the same bits): it computes the
// same outputs at every level and fails on the first bit that differs from
// the portable twin's. The package's own test, TestAllFamilies, runs it over
// every kernel family of kernel/builtin on random inputs with NaN, ±Inf, ±0
// and subnormals mixed in.
package kerneltest

import (
	"bytes"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/tensor"
)

// Levels returns the instruction-set levels a twin test compares on this
// CPU, portable first.
func Levels() []kernel.ISA { return kernel.ISAs() }

// TestAllImplementations runs f once per level of Levels, as a subtest
// named after the level, with a copy of base (nil: the zero Ctx) forced to
// that level.
func TestAllImplementations(t *testing.T, base *kernel.Ctx, f func(t *testing.T, c *kernel.Ctx)) {
	t.Helper()
	for _, l := range Levels() {
		c := base.WithISA(l)
		t.Run(l.String(), func(t *testing.T) { f(t, c) })
	}
}

// Twins computes outputs once per level (with a copy of base forced to it)
// and requires every level's outputs to have the portable level's bits:
// the same count, dtypes, shapes and bytes. what names the case in the
// failure. It returns the portable outputs. An error from compute fails
// the test, unless every level returns an error (then the last is
// returned, for callers that test rejections).
func Twins(t testing.TB, what string, base *kernel.Ctx, compute func(c *kernel.Ctx) ([]*tensor.Tensor, error)) ([]*tensor.Tensor, error) {
	t.Helper()
	var want []*tensor.Tensor
	var wantErr error
	for i, l := range Levels() {
		got, err := compute(base.WithISA(l))
		if i == 0 {
			want, wantErr = got, err
			continue
		}
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("%s: portable error %v, %s error %v", what, wantErr, l, err)
		}
		if err != nil {
			continue
		}
		if d := Diff(want, got); d != "" {
			t.Fatalf("%s: %s differs from the portable twin: %s", what, l, d)
		}
	}
	return want, wantErr
}

// Diff describes the first difference between two output lists, bit for
// bit (NaN payloads included), or returns "" when they are identical.
func Diff(want, got []*tensor.Tensor) string {
	if len(want) != len(got) {
		return fmt.Sprintf("%d outputs, want %d", len(got), len(want))
	}
	for i := range want {
		w, g := want[i], got[i]
		switch {
		case w == nil && g == nil:
			continue
		case w == nil || g == nil:
			return fmt.Sprintf("output %d: %v, want %v", i, g, w)
		case w.DType != g.DType:
			return fmt.Sprintf("output %d: dtype %v, want %v", i, g.DType, w.DType)
		case !slices.Equal(w.Shape, g.Shape):
			return fmt.Sprintf("output %d: shape %v, want %v", i, g.Shape, w.Shape)
		}
		if wf, ok := w.Data.([]float32); ok {
			gf := g.Data.([]float32)
			for j := range wf {
				if math.Float32bits(wf[j]) != math.Float32bits(gf[j]) {
					return fmt.Sprintf("output %d element %d: %g (%#08x), want %g (%#08x)", i, j, gf[j], math.Float32bits(gf[j]), wf[j], math.Float32bits(wf[j]))
				}
			}
			continue
		}
		if !bytes.Equal(tensor.RawBytes(w), tensor.RawBytes(g)) {
			return fmt.Sprintf("output %d (%v %v): bytes differ", i, w.DType, w.Shape)
		}
	}
	return ""
}
