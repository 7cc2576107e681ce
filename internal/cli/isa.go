package cli

import (
	"flag"
	"fmt"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel"
)

// cpuFlags are --isa and --threads: how the CPU kernels run. Every choice
// gives the same bits (docs/determinism.md); replay --isa portable shows
// that a decision served with AVX-512 kernels replays on a CPU without
// them.
type cpuFlags struct {
	ISA     string
	Threads int
}

func (c *cpuFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.ISA, "isa", "best", "the CPU kernels' instruction set: best, portable (the Go twins, as on a CPU without AVX2), avx2 or avx512; the bits are the same")
	fs.IntVar(&c.Threads, "threads", 0, "goroutines one kernel may use (0: GOMAXPROCS); the bits are the same")
}

// cpu returns the exec.CPU of the flags; a bad value is a usage error.
func (c cpuFlags) cpu() (exec.CPU, error) {
	isa, err := kernel.ParseISA(c.ISA)
	if err != nil {
		return exec.CPU{}, fmt.Errorf("%w: --isa: %w", ErrUsage, err)
	}
	if c.Threads < 0 {
		return exec.CPU{}, fmt.Errorf("%w: --threads %d: want 0 or more", ErrUsage, c.Threads)
	}
	return exec.CPU{ISA: isa, Threads: c.Threads}, nil
}
