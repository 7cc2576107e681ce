package q8

import "golang.org/x/sys/cpu"

// hasDW reports whether dwBlocks may run (VPDPBUSD and VPERMB on zmm).
var hasDW = hasVNNI && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VBMI
