//go:build unix

package onnx

import "syscall"

// openFlags refuse a symlink swapped in after the checks and keep a FIFO
// from blocking the open.
const openFlags = syscall.O_NOFOLLOW | syscall.O_NONBLOCK
