package cli

import (
	"fmt"
	"io"
	"os"
)

// maxTensorFile bounds a tensor file read from the command line (--input
// of run and replay): protobuf itself stops at 2 GiB, and a request to a
// server is far smaller.
const maxTensorFile = 1 << 30

// openTensorFile checks that path is a regular file of at most
// maxTensorFile bytes before anything reads it: /dev/zero, a FIFO or a
// huge file must get an error naming it, not exhaust the memory.
func openTensorFile(path string) (*os.File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	switch {
	case !st.Mode().IsRegular():
		f.Close()
		return nil, fmt.Errorf("%s is not a regular file (%v): a tensor file must be one", path, st.Mode().Type())
	case st.Size() > maxTensorFile:
		f.Close()
		return nil, fmt.Errorf("%s has %d bytes, more than the %d a tensor file may have", path, st.Size(), maxTensorFile)
	}
	return f, nil
}

// readTensorFile reads a tensor file whole, within maxTensorFile bytes
// even if it grows while it is read.
func readTensorFile(path string) ([]byte, error) {
	f, err := openTensorFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTensorFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxTensorFile {
		return nil, fmt.Errorf("%s grew past %d bytes while it was read", path, maxTensorFile)
	}
	return b, nil
}
