//go:build !amd64

package bench

func fmaLoop(int)        {}
func havePeakLoop() bool { return false }
