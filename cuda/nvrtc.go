package cuda

import (
	"fmt"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"unsafe"
)

// NVRTC is the loaded runtime compilation library. vouch uses it when a
// plan is built, never when one is loaded.
type NVRTC struct {
	Path string
	api  nvrtcAPI
}

type nvrtcAPI struct {
	version     func(major, minor *int32) int32
	create      func(p *uintptr, src, name string, nh int32, headers, names unsafe.Pointer) int32
	compile     func(p uintptr, n int32, opts unsafe.Pointer) int32
	logSize     func(p uintptr, n *uint64) int32
	log         func(p uintptr, b *byte) int32
	ptxSize     func(p uintptr, n *uint64) int32
	ptx         func(p uintptr, b *byte) int32
	cubinSize   func(p uintptr, n *uint64) int32
	cubin       func(p uintptr, b *byte) int32
	destroy     func(p *uintptr) int32
	errorString func(r int32) unsafe.Pointer
}

// NVRTCNames are the library names tried, newest first.
var NVRTCNames = []string{"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so.11.2", "libnvrtc.so"}

// OpenNVRTC loads NVRTC from path, or the newest of NVRTCNames found in
// the usual places when path is empty. Without one the error wraps
// ErrNoNVRTC.
func OpenNVRTC(path string) (*NVRTC, error) {
	cands := Find(path, NVRTCNames...)
	// NVRTC dlopens libnvrtc-builtins by name at compile time; loading the
	// one beside each candidate first lets it be found outside the
	// loader's search path (the toolkit and the pip wheels keep both in
	// one directory).
	for _, c := range cands {
		if filepath.IsAbs(c) {
			if m, _ := filepath.Glob(filepath.Join(filepath.Dir(c), "libnvrtc-builtins.so*")); len(m) > 0 {
				sort.Sort(sort.Reverse(sort.StringSlice(m)))
				_, _, _ = dlopen(ErrNoNVRTC, m)
			}
		}
	}
	h, p, err := dlopen(ErrNoNVRTC, cands)
	if err != nil {
		return nil, err
	}
	n := &NVRTC{Path: p}
	a := &n.api
	err = bind(p, h, []symbol{
		{&a.version, []string{"nvrtcVersion"}},
		{&a.create, []string{"nvrtcCreateProgram"}},
		{&a.compile, []string{"nvrtcCompileProgram"}},
		{&a.logSize, []string{"nvrtcGetProgramLogSize"}},
		{&a.log, []string{"nvrtcGetProgramLog"}},
		{&a.ptxSize, []string{"nvrtcGetPTXSize"}},
		{&a.ptx, []string{"nvrtcGetPTX"}},
		{&a.cubinSize, []string{"nvrtcGetCUBINSize"}},
		{&a.cubin, []string{"nvrtcGetCUBIN"}},
		{&a.destroy, []string{"nvrtcDestroyProgram"}},
		{&a.errorString, []string{"nvrtcGetErrorString"}},
	})
	if err != nil {
		return nil, err
	}
	return n, nil
}

// Version returns NVRTC's version, e.g. "13.0".
func (n *NVRTC) Version() (string, error) {
	var ma, mi int32
	if r := n.api.version(&ma, &mi); r != 0 {
		return "", n.err("nvrtcVersion", r, "")
	}
	return fmt.Sprintf("%d.%d", ma, mi), nil
}

func (n *NVRTC) err(call string, r int32, log string) error {
	msg := goString(n.api.errorString(r))
	if log = strings.TrimSpace(log); log != "" {
		return fmt.Errorf("cuda: %s: %s (%d):\n%s", call, msg, r, log)
	}
	return fmt.Errorf("cuda: %s: %s (%d)", call, msg, r)
}

// Output is one compilation's products.
type Output struct {
	PTX   []byte // for a virtual architecture (compute_XX); NUL-terminated
	Cubin []byte // for a real one (sm_XX)
	Log   string
}

// Compile compiles CUDA C source (named name in messages) with options
// for arch: a "compute_XX" arch yields PTX, an "sm_XX" one a cubin.
func (n *NVRTC) Compile(src, name, arch string, options []string) (*Output, error) {
	var p uintptr
	if r := n.api.create(&p, src, name, 0, nil, nil); r != 0 {
		return nil, n.err("nvrtcCreateProgram", r, "")
	}
	defer n.api.destroy(&p)
	opts := append([]string{"--gpu-architecture=" + arch}, options...)
	cs := make([][]byte, len(opts))
	ptrs := make([]uintptr, len(opts))
	for i, o := range opts {
		cs[i] = append([]byte(o), 0)
		ptrs[i] = uintptr(unsafe.Pointer(&cs[i][0]))
	}
	r := n.api.compile(p, int32(len(opts)), unsafe.Pointer(&ptrs[0]))
	runtime.KeepAlive(cs)
	out := &Output{}
	var ls uint64
	if n.api.logSize(p, &ls) == 0 && ls > 1 {
		b := make([]byte, ls)
		if n.api.log(p, &b[0]) == 0 {
			out.Log = strings.TrimRight(string(b), "\x00")
		}
	}
	if r != 0 {
		return nil, n.err("nvrtcCompileProgram("+name+", "+arch+")", r, out.Log)
	}
	get := func(what string, size func(uintptr, *uint64) int32, data func(uintptr, *byte) int32) ([]byte, error) {
		var sz uint64
		if r := size(p, &sz); r != 0 {
			return nil, n.err(what+"Size", r, "")
		}
		if sz == 0 {
			return nil, nil
		}
		b := make([]byte, sz)
		if r := data(p, &b[0]); r != 0 {
			return nil, n.err(what, r, "")
		}
		return b, nil
	}
	var err error
	if strings.HasPrefix(arch, "sm_") {
		out.Cubin, err = get("nvrtcGetCUBIN", n.api.cubinSize, n.api.cubin)
	} else {
		out.PTX, err = get("nvrtcGetPTX", n.api.ptxSize, n.api.ptx)
	}
	return out, err
}
