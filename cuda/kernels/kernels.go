// Package kernels holds vouch's CUDA C kernels (exact.cu and the files
// listed in Sources, compiled as one translation unit) and the one set
// of NVRTC options they are compiled with. The source is embedded so that
// `vouch build --device cuda` can compile it with NVRTC for the plan's
// target architecture; a plan stores the products (PTX and cubin) and the
// source digest, and loading one never compiles.
//
// testdata/exact.ptx is the golden PTX for compute_90 from the NVRTC named
// in its header, with the source digest it was made from: a change to
// exact.cu must come with a regenerated golden file (go test -tags cuda
// -run Golden -update on a machine with that NVRTC), which the CPU-only
// test TestGoldenMatchesSource enforces.
package kernels

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
)

//go:embed exact.cu
var exactCU string

//go:embed elementwise.cu
var elementwiseCU string

//go:embed convt.cu
var convtCU string

//go:embed rnn.cu
var rnnCU string

// Sources are the CUDA C files of the exact kernels in the order they are
// joined into one translation unit: exact.cu first (its helpers and the
// vmath polynomials), then one file per op family. An empty file adds
// nothing, so the source digest is that of the non-empty files joined.
var Sources = []struct{ Name, Text string }{
	{"exact.cu", exactCU},
	{"elementwise.cu", elementwiseCU},
	{"convt.cu", convtCU},
	{"rnn.cu", rnnCU},
}

var exactSource = joinSources()

func joinSources() string {
	s := ""
	for _, f := range Sources {
		s += f.Text
	}
	return s
}

// Name is the source's name in compiler messages.
const Name = "exact.cu"

// Source returns the CUDA C source of the exact kernels.
func Source() string { return exactSource }

// Digest is the SHA-256 of Source, hex.
func Digest() string {
	h := sha256.Sum256([]byte(exactSource))
	return hex.EncodeToString(h[:])
}

// Options are the NVRTC options of every exact-mode compilation. They keep
// IEEE float32 behaviour: no contraction of a*b+c (only the kernels'
// explicit __fmaf_rn fuse), subnormals kept, division and square root
// correctly rounded.
var Options = []string{"--fmad=false", "--ftz=false", "--prec-div=true", "--prec-sqrt=true", "--std=c++17"}

// Kernel names (extern "C" entry points of exact.cu).
const (
	Unary      = "vx_unary"
	Add        = "vx_add"
	SGEMM      = "vx_sgemm"
	SGEMM128K8 = "vx_sgemm128k8"
	SGEMM128   = "vx_sgemm128k16"
	Conv2D     = "vx_conv2d"
	MaxPool2D  = "vx_maxpool2d"
	AvgPool2D  = "vx_avgpool2d"
	GlobalAvg  = "vx_global_avg"
	Softmax    = "vx_softmax"
	LayerNorm  = "vx_layernorm"
	Affine     = "vx_channel_affine"
	Clip       = "vx_clip"
	ConvDirect = "vx_conv_direct"
	Copy       = "vx_copy"
	AddBcast   = "vx_add_bcast"
	DivBcast   = "vx_div_bcast"
	Gather     = "vx_gather"
)

// ConvTiles are the batch-folded Conv tile kernels (exact.cu's vx_ct*),
// largest first: name, rows (output channels) and columns ((image,
// pixel) pairs) of a tile, and whether it has the 16-byte-load variants. Each has a _1x1 variant (ConvTile1x1)
// for 1x1 kernels without padding; the Vec ones also _va (weights in
// 16-byte loads: K a multiple of 4), _1x1_va and _1x1_vab (the input too:
// stride 1, P a multiple of 4), _3x3 (_va with the 3x3 taps decoded
// without the table; no dilation).
var ConvTiles = []struct {
	Name   string
	BM, BN int
	Vec    bool
}{
	{"vx_ct128x128", 128, 128, true},
	{"vx_ct64x128", 64, 128, true},
	{"vx_ct64x64", 64, 64, false},
	{"vx_ct32x32", 32, 32, false},
	{"vx_ct16x16", 16, 16, false},
}

// ConvTile1x1 is the name of a tile kernel's 1x1 variant.
func ConvTile1x1(name string) string { return name + "_1x1" }

// The 16-byte-load variants' suffixes (tiles with Vec).
const (
	VecA     = "_va"
	VecA1x1  = "_1x1_va"
	VecAB1x1 = "_1x1_vab"
	VecA3x3  = "_3x3"
)

// All lists every kernel name, for loading checks.
var All = allKernels()

func allKernels() []string {
	a := []string{Unary, Add, SGEMM, SGEMM128K8, SGEMM128, Conv2D, MaxPool2D, AvgPool2D, GlobalAvg, Softmax, LayerNorm, Affine, Clip, ConvDirect, Copy, AddBcast, DivBcast, Gather}
	a = append(a, ElementwiseKernels...)
	a = append(a, ConvTKernels...)
	a = append(a, RNNKernels...)
	for _, t := range ConvTiles {
		a = append(a, t.Name, ConvTile1x1(t.Name))
		if t.Vec {
			a = append(a, t.Name+VecA, t.Name+VecA1x1, t.Name+VecAB1x1, t.Name+VecA3x3)
		}
	}
	return a
}
