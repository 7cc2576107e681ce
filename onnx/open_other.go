//go:build !unix

package onnx

// openFlags: no O_NOFOLLOW here; the Lstat checks and the Stat after the
// open refuse symlinks and non-regular files.
const openFlags = 0
