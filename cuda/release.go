package cuda

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
)

// Release returns the driver's release number ("580.159.04"), read from
// the name of the library file libcuda.so.1 resolves to
// (libcuda.so.580.159.04), else from the one libcuda.so.<release> beside
// it or in the usual driver directories, or "" when none is found.
func (d *Driver) Release() string {
	if r := releaseOf(d.Path); r != "" {
		return r
	}
	dirs := []string{filepath.Dir(d.Path)}
	if p, err := filepath.EvalSymlinks(d.Path); err == nil {
		dirs = append(dirs, filepath.Dir(p))
	}
	for _, dir := range append(dirs, libDirs...) {
		m, _ := filepath.Glob(filepath.Join(dir, "libcuda.so.*.*"))
		var found []string
		for _, f := range m {
			if r := releaseOf(f); r != "" && !slices.Contains(found, r) {
				found = append(found, r)
			}
		}
		if len(found) == 1 {
			return found[0]
		}
	}
	return ""
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
