package audit

import (
	"os"
	"syscall"
)

// fdatasync flushes f's data and the metadata needed to read it back (its
// size), not its times: cheaper than fsync for an appended file.
func fdatasync(f *os.File) error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			return err
		}
	}
}

// preallocate sets f's length to size, reserving the blocks where the file
// system can (so that a full disk shows when a segment is made, not in the
// middle of an append), else leaving a sparse file of that length.
func preallocate(f *os.File, size int64) error {
	err := syscall.Fallocate(int(f.Fd()), 0, 0, size)
	if err == nil {
		return nil
	}
	if err == syscall.EOPNOTSUPP || err == syscall.ENOSYS {
		return f.Truncate(size)
	}
	return err
}
