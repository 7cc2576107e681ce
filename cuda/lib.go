package cuda

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"unsafe"

	"github.com/ebitengine/purego"
)

// Sentinel errors, checked with errors.Is.
var (
	// ErrNoDriver: libcuda.so.1 could not be loaded (no NVIDIA driver).
	ErrNoDriver = errors.New("cuda: no NVIDIA driver found (libcuda.so.1)")
	// ErrNoDevice: the driver loaded but reports no usable device.
	ErrNoDevice = errors.New("cuda: no CUDA device")
	// ErrNoNVRTC: no NVRTC library could be loaded.
	ErrNoNVRTC = errors.New("cuda: no NVRTC library found (libnvrtc.so)")
	// ErrArch: an image was compiled for another GPU architecture.
	ErrArch = errors.New("cuda: GPU architecture mismatch")
)

// Search locations for the CUDA toolkit's and the pip wheels' libraries.
var libDirs = []string{
	"/usr/local/cuda/lib64",
	"/usr/local/cuda/targets/x86_64-linux/lib",
	"/usr/lib/x86_64-linux-gnu",
	"/usr/local/nvidia/lib64",
	"/usr/local/nvidia/lib",
}

// libGlobs are directories matched with filepath.Glob, newest last.
var libGlobs = []string{
	"/usr/local/cuda-*/lib64",
	"/usr/local/cuda-*/targets/x86_64-linux/lib",
	"/opt/*/.venv/lib/python3*/site-packages/nvidia/*/lib",
	"/usr/local/lib/python3*/dist-packages/nvidia/*/lib",
	"/usr/lib/python3/dist-packages/nvidia/*/lib",
}

// Find returns the candidate paths for a shared library, in the order
// they are tried: explicit (when not empty), the bare names (the dynamic
// loader's own search path), then every existing file of those names in
// the usual CUDA locations.
func Find(explicit string, names ...string) []string {
	var out []string
	if explicit != "" {
		out = append(out, explicit)
	}
	out = append(out, names...)
	dirs := append([]string{}, libDirs...)
	for _, g := range libGlobs {
		m, _ := filepath.Glob(g)
		sort.Strings(m)
		dirs = append(dirs, m...)
	}
	seen := map[string]bool{}
	for _, d := range dirs {
		for _, n := range names {
			p := filepath.Join(d, n)
			if seen[p] {
				continue
			}
			seen[p] = true
			if st, err := os.Stat(p); err == nil && !st.IsDir() {
				out = append(out, p)
			}
		}
	}
	return out
}

// dlopen loads the first of paths that loads, and returns its handle and
// path, or an error wrapping sentinel that lists every failure.
func dlopen(sentinel error, paths []string) (uintptr, string, error) {
	var fails []string
	for _, p := range paths {
		h, err := purego.Dlopen(p, purego.RTLD_NOW|purego.RTLD_GLOBAL)
		if err == nil {
			return h, p, nil
		}
		msg := err.Error()
		if msg == "" {
			msg = p + ": cannot be loaded"
		}
		fails = append(fails, msg)
	}
	if len(fails) == 0 {
		fails = append(fails, "no candidate paths")
	}
	return 0, "", fmt.Errorf("%w: %s", sentinel, strings.Join(fails, "; "))
}

// symbols binds Go function variables to a library's symbols. Each entry's
// names are tried in order (versioned names first); a missing symbol is an
// error naming it, never a panic.
type symbol struct {
	fn    any
	names []string
}

func bind(lib string, h uintptr, syms []symbol) error {
	for _, s := range syms {
		var addr uintptr
		var err error
		for _, n := range s.names {
			if addr, err = purego.Dlsym(h, n); err == nil {
				break
			}
		}
		if addr == 0 {
			return fmt.Errorf("cuda: %s has no symbol %s: %v", lib, strings.Join(s.names, " or "), err)
		}
		purego.RegisterFunc(s.fn, addr)
	}
	return nil
}

// goString copies the NUL-terminated C string at p (nil gives "").
func goString(p unsafe.Pointer) string {
	if p == nil {
		return ""
	}
	var b []byte
	for i := 0; i < 1<<16; i++ {
		c := *(*byte)(unsafe.Add(p, i))
		if c == 0 {
			break
		}
		b = append(b, c)
	}
	return string(b)
}
