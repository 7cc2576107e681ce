package bench

import "golang.org/x/sys/cpu"

// fmaLoop runs n iterations of 12 independent VFMADD231PS ymm (peak_amd64.s).
//
//go:noescape
func fmaLoop(n int)

func havePeakLoop() bool { return cpu.X86.HasAVX2 && cpu.X86.HasFMA }
