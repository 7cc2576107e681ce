package cuda

import (
	"errors"
	"fmt"
	"path/filepath"
)

// ErrNoCUBLAS: cuBLAS could not be loaded. vouch uses cuBLAS only as the
// speed peer of its exact SGEMM (cuBLAS's results are not vouch's bits).
var ErrNoCUBLAS = errors.New("cuda: no cuBLAS library found (libcublas.so)")

// CUBLAS is a cuBLAS handle bound to a context.
type CUBLAS struct {
	Path string
	c    *Context
	h    uintptr
	api  struct {
		create      func(h *uintptr) int32
		destroy     func(h uintptr) int32
		setMathMode func(h uintptr, mode int32) int32
		setStream   func(h uintptr, s uintptr) int32
		sgemm       func(h uintptr, ta, tb int32, m, n, k int32, alpha *float32, a uint64, lda int32, b uint64, ldb int32, beta *float32, c uint64, ldc int32) int32
	}
}

// OpenCUBLAS loads cuBLAS (path, or libcublas.so.13/12 from the usual
// places) and creates a handle in c with the default math mode, which
// for FP32 is plain FP32 (no TF32 tensor cores).
func OpenCUBLAS(c *Context, path string) (*CUBLAS, error) {
	cands := Find(path, "libcublas.so.13", "libcublas.so.12", "libcublas.so")
	// libcublas needs libcublasLt from its own directory.
	for _, p := range cands {
		if filepath.IsAbs(p) {
			lt := filepath.Join(filepath.Dir(p), "libcublasLt"+filepath.Ext(p))
			if m, _ := filepath.Glob(filepath.Join(filepath.Dir(p), "libcublasLt.so*")); len(m) > 0 {
				lt = m[0]
			}
			_, _, _ = dlopen(ErrNoCUBLAS, []string{lt})
			break
		}
	}
	h, p, err := dlopen(ErrNoCUBLAS, cands)
	if err != nil {
		return nil, err
	}
	b := &CUBLAS{Path: p, c: c}
	a := &b.api
	if err := bind(p, h, []symbol{
		{&a.create, []string{"cublasCreate_v2"}},
		{&a.destroy, []string{"cublasDestroy_v2"}},
		{&a.setMathMode, []string{"cublasSetMathMode"}},
		{&a.setStream, []string{"cublasSetStream_v2"}},
		{&a.sgemm, []string{"cublasSgemm_v2"}},
	}); err != nil {
		return nil, err
	}
	if err := b.st("cublasCreate", func() int32 { return a.create(&b.h) }); err != nil {
		return nil, err
	}
	const defaultMath = 0
	if err := b.st("cublasSetMathMode", func() int32 { return a.setMathMode(b.h, defaultMath) }); err != nil {
		return nil, err
	}
	return b, nil
}

func (b *CUBLAS) st(call string, f func() int32) error {
	return b.c.do(func() error {
		if r := f(); r != 0 {
			return fmt.Errorf("cuda: %s: cublasStatus %d", call, r)
		}
		return nil
	})
}

// SGEMM sets row-major C [m,n] = A [m,k] · B [k,n] on s.
func (b *CUBLAS) SGEMM(s *Stream, m, n, k int, a uint64, lda int, bm uint64, ldb int, c uint64, ldc int) error {
	one, zero := float32(1), float32(0)
	return b.st("cublasSgemm", func() int32 {
		if r := b.api.setStream(b.h, s.handle()); r != 0 {
			return r
		}
		// Column-major C^T = B^T A^T is row-major C = A B.
		return b.api.sgemm(b.h, 0, 0, int32(n), int32(m), int32(k), &one, bm, int32(ldb), a, int32(lda), &zero, c, int32(ldc))
	})
}

// Close destroys the handle.
func (b *CUBLAS) Close() error {
	if b.h == 0 {
		return nil
	}
	h := b.h
	b.h = 0
	return b.st("cublasDestroy", func() int32 { return b.api.destroy(h) })
}
