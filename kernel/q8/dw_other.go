//go:build !amd64

package q8

const hasDW = false
