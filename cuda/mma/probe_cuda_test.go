//go:build cuda

package mma

import (
	"encoding/binary"
	"flag"
	"math"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/vouchml/vouch/cuda"
)

var (
	flagProblems = flag.Int("problems", 4000, "m16n8k16 problems per format")
	flagOut      = flag.String("mmaout", "", "write the hardware's outputs (float32, little endian) here, one file per format")
	flagSeed     = flag.Uint64("mmaseed", 7, "seed of the problems")
)

// TestProbe runs the probe on device 0 and compares every candidate model
// with the hardware, printing the best ones; it fails unless the
// architecture's model (ModelFor) gives the hardware's bits on every
// output. Run it on the GPU machine: go test -tags cuda ./cuda/mma.
func TestProbe(t *testing.T) {
	d, err := cuda.Open("")
	if err != nil {
		t.Fatal(err)
	}
	info, err := d.Device(0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := d.Context(0)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	n, err := cuda.OpenNVRTC("")
	if err != nil {
		t.Fatal(err)
	}
	img, err := cuda.Build(n, ProbeSource, "mma_probe.cu", info.Arch(), nil)
	if err != nil {
		t.Fatal(err)
	}
	mod, err := c.LoadModule(img.Cubin)
	if err != nil {
		t.Fatal(err)
	}
	defer mod.Unload()
	t.Logf("device %s (%s)", info.Name, info.Arch())
	for _, set := range []struct {
		name string
		pr   *Problems
	}{
		{"fp16", NewProblems(FP16, *flagProblems, *flagSeed)},
		{"bf16", NewProblems(BF16, *flagProblems, *flagSeed)},
		{"fp16-edge", NewEdgeProblems(FP16, *flagProblems/4, *flagSeed)},
		{"bf16-edge", NewEdgeProblems(BF16, *flagProblems/4, *flagSeed)},
	} {
		pr, f := set.pr, set.pr.F
		out := runProbe(t, c, mod, pr)
		if *flagOut != "" {
			b := make([]byte, 4*len(out))
			for i, v := range out {
				binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(v))
			}
			if err := os.WriteFile(filepath.Join(*flagOut, "mma_"+set.name+".bin"), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		fits, err := pr.FitModels(out, Candidates())
		if err != nil {
			t.Fatal(err)
		}
		for i, fit := range fits[:8] {
			t.Logf("%s #%d: %v: %d of %d outputs differ (%d in the integer problems)", set.name, i+1, fit.Model, fit.Differ, len(out), fit.Layout)
		}
		m, ok := ModelFor(info.Arch(), f)
		if !ok {
			t.Errorf("%s: no model for %s", f, info.Arch())
			continue
		}
		for _, fit := range fits {
			if fit.Model == m {
				if fit.Differ != 0 {
					t.Errorf("%s on %s: the model %v differs from the hardware on %d of %d outputs", set.name, info.Arch(), m, fit.Differ, len(out))
				} else {
					t.Logf("%s on %s: the model %v gives the hardware's bits on all %d outputs", set.name, info.Arch(), m, len(out))
				}
			}
		}
	}
}

func runProbe(t *testing.T, c *cuda.Context, mod *cuda.Module, pr *Problems) []float32 {
	t.Helper()
	fn, err := mod.Function("probe_" + pr.F.String())
	if err != nil {
		t.Fatal(err)
	}
	halves := func(h []uint16) []float32 {
		return unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(h))), len(h)/2)
	}
	bufs := make([]*cuda.Buffer, 4)
	sizes := []uint64{uint64(len(pr.A)) * 2, uint64(len(pr.B)) * 2, uint64(len(pr.C)) * 4, uint64(len(pr.C)) * 4}
	for i, s := range sizes {
		if bufs[i], err = c.Alloc(s); err != nil {
			t.Fatal(err)
		}
		defer bufs[i].Free()
	}
	for i, v := range [][]float32{halves(pr.A), halves(pr.B), pr.C} {
		if err := c.Upload(bufs[i], v); err != nil {
			t.Fatal(err)
		}
	}
	args := (&cuda.Args{}).Ptr(bufs[0].Ptr).Ptr(bufs[1].Ptr).Ptr(bufs[2].Ptr).Ptr(bufs[3].Ptr).I32(int32(pr.P))
	warps := uint32(4)
	if err := fn.Launch(nil, cuda.D3((uint32(pr.P)+warps-1)/warps, 1, 1), cuda.D3(32*warps, 1, 1), 0, args); err != nil {
		t.Fatal(err)
	}
	if err := c.Synchronize(); err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(pr.C))
	if err := c.Download(out, bufs[3]); err != nil {
		t.Fatal(err)
	}
	return out
}
