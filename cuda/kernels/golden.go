package kernels

import (
	"bytes"
	"fmt"
	"strings"
)

// Golden is the header line of a golden PTX file, and its parse.
type Golden struct {
	NVRTC, Arch, Source, Digest string
	PTX                         []byte // without the header, without a NUL
}

const goldenPrefix = "// vouch golden PTX: "

// FormatGolden returns a golden file: the header line
//
//	// vouch golden PTX: nvrtc 13.0 compute_90 source exact.cu sha256 <hex>
//
// and then the PTX (a trailing NUL dropped).
func FormatGolden(nvrtc, arch string, ptx []byte) []byte {
	return FormatGoldenOf(nvrtc, arch, Name, Digest(), ptx)
}

// FormatGoldenOf is FormatGolden for the source name with digest (fast.cu's
// golden names FastName and FastDigest).
func FormatGoldenOf(nvrtc, arch, name, digest string, ptx []byte) []byte {
	h := fmt.Sprintf("%snvrtc %s %s source %s sha256 %s\n", goldenPrefix, nvrtc, arch, name, digest)
	return append([]byte(h), bytes.TrimRight(ptx, "\x00")...)
}

// ParseGolden parses a golden file's header.
func ParseGolden(b []byte) (*Golden, error) {
	line, rest, ok := bytes.Cut(b, []byte("\n"))
	if !ok || !bytes.HasPrefix(line, []byte(goldenPrefix)) {
		return nil, fmt.Errorf("kernels: golden PTX has no %q header", strings.TrimSpace(goldenPrefix))
	}
	f := strings.Fields(string(line[len(goldenPrefix):]))
	if len(f) != 7 || f[0] != "nvrtc" || f[3] != "source" || f[5] != "sha256" || len(f[6]) != 64 {
		return nil, fmt.Errorf("kernels: golden PTX header %q: want \"nvrtc V ARCH source NAME sha256 HEX\"", line)
	}
	return &Golden{NVRTC: f[1], Arch: f[2], Source: f[4], Digest: f[6], PTX: rest}, nil
}
