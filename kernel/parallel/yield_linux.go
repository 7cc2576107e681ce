package parallel

import "syscall"

// osYield gives the worker's CPU to any other runnable thread of the
// machine (sched_yield), so that a worker polling through a held pool
// costs a shared machine nothing while others wait for a core.
func osYield() { syscall.Syscall(syscall.SYS_SCHED_YIELD, 0, 0, 0) }
