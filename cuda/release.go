package cuda

import (
	"fmt"
	"path/filepath"
	"strings"
)

// Release returns the driver's release number ("580.159.04"), read from
// the name of the library file libcuda.so.1 resolves to
// (libcuda.so.580.159.04), or "" when the name carries none.
func (d *Driver) Release() string {
	return releaseOf(d.Path)
}

func releaseOf(path string) string {
	if p, err := filepath.EvalSymlinks(path); err == nil {
		path = p
	}
	v, ok := strings.CutPrefix(filepath.Base(path), "libcuda.so.")
	if !ok || strings.Count(v, ".") < 1 || strings.Trim(v, "0123456789.") != "" {
		return ""
	}
	return v
}

// CUDAVersion formats a driver API version (13000) as "13.0".
func CUDAVersion(v int) string { return fmt.Sprintf("%d.%d", v/1000, v%1000/10) }
