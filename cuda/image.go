package cuda

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Image is a plan's GPU section: the compiled kernels for one target
// architecture and what they were compiled from.
type Image struct {
	Arch         string   // the real architecture of Cubin, e.g. "sm_90"
	NVRTC        string   // NVRTC version that compiled it, e.g. "13.0"
	Source       string   // name of the CUDA C source
	SourceDigest string   // SHA-256 of the source, hex
	Options      []string // NVRTC options (the architecture excluded)
	PTX          []byte   // compute_XX PTX, NUL-terminated
	Cubin        []byte   // sm_XX cubin
}

// Build compiles src with NVRTC into PTX (compute_XX) and a cubin (sm_XX)
// for arch "sm_XX". This is build-time work: loading an Image never
// compiles.
func Build(n *NVRTC, src, name, arch string, options []string) (*Image, error) {
	num, ok := strings.CutPrefix(arch, "sm_")
	if !ok || num == "" || strings.Trim(num, "0123456789a") != "" {
		return nil, fmt.Errorf("cuda: target architecture %q: want sm_XX (sm_90, sm_80, ...)", arch)
	}
	v, err := n.Version()
	if err != nil {
		return nil, err
	}
	ptx, err := n.Compile(src, name, "compute_"+num, options)
	if err != nil {
		return nil, err
	}
	bin, err := n.Compile(src, name, arch, options)
	if err != nil {
		return nil, err
	}
	h := sha256.Sum256([]byte(src))
	return &Image{Arch: arch, NVRTC: v, Source: name, SourceDigest: hex.EncodeToString(h[:]),
		Options: append([]string{}, options...), PTX: ptx.PTX, Cubin: bin.Cubin}, nil
}

// Check reports whether the image can run on the device: its cubin's
// architecture must be the device's. Otherwise the error wraps ErrArch
// and says what to rebuild.
func (img *Image) Check(d DeviceInfo) error {
	if img.Arch != d.Arch() {
		return fmt.Errorf("%w: the plan's kernels are compiled for %s, device %d (%s) is %s: rebuild the plan for this GPU (vouch build --device cuda:%d --arch %s)",
			ErrArch, img.Arch, d.Ordinal, d.Name, d.Arch(), d.Ordinal, d.Arch())
	}
	return nil
}

// Digest is the SHA-256 of the encoded image, hex.
func (img *Image) Digest() string {
	h := sha256.Sum256(img.Encode())
	return hex.EncodeToString(h[:])
}

// imageVersion is the first line of an encoded Image; a format change
// changes it.
const imageVersion = "vouch-cuda-image 1"

// Limits on what an encoded image may claim.
const (
	maxImageBlob   = 64 << 20
	maxImageFields = 64
)

// Encode writes the image:
//
//	vouch-cuda-image 1
//	arch sm_90
//	nvrtc 13.0
//	source exact.cu <sha256 hex>
//	option --fmad=false          (one line per option, in order)
//	ptx <bytes> <sha256 hex>
//	cubin <bytes> <sha256 hex>
//	end
//
// followed by the PTX bytes and then the cubin bytes. Text fields hold no
// spaces or newlines.
func (img *Image) Encode() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\narch %s\nnvrtc %s\nsource %s %s\n", imageVersion, img.Arch, img.NVRTC, img.Source, img.SourceDigest)
	for _, o := range img.Options {
		fmt.Fprintf(&b, "option %s\n", o)
	}
	blob := func(name string, v []byte) {
		h := sha256.Sum256(v)
		fmt.Fprintf(&b, "%s %d %s\n", name, len(v), hex.EncodeToString(h[:]))
	}
	blob("ptx", img.PTX)
	blob("cubin", img.Cubin)
	b.WriteString("end\n")
	b.Write(img.PTX)
	b.Write(img.Cubin)
	return b.Bytes()
}

// ErrImage wraps every decoding failure.
var ErrImage = errors.New("cuda: bad GPU image")

// DecodeImage parses an encoded image, checking every size against the
// limits and every blob against its digest.
func DecodeImage(data []byte) (*Image, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrImage, fmt.Sprintf(format, a...))
	}
	r := bufio.NewReader(bytes.NewReader(data))
	line := func() (string, error) {
		s, err := r.ReadString('\n')
		if err != nil {
			return "", bad("truncated header")
		}
		if len(s) > 4096 {
			return "", bad("header line of %d bytes", len(s))
		}
		return strings.TrimSuffix(s, "\n"), nil
	}
	first, err := line()
	if err != nil {
		return nil, err
	}
	if first != imageVersion {
		return nil, bad("version line %q, want %q", first, imageVersion)
	}
	img := &Image{}
	type blob struct {
		n   int
		sum string
		dst *[]byte
	}
	var blobs []blob
	seen := map[string]bool{}
	for fields := 0; ; fields++ {
		if fields > maxImageFields {
			return nil, bad("more than %d header lines", maxImageFields)
		}
		s, err := line()
		if err != nil {
			return nil, err
		}
		if s == "end" {
			break
		}
		f := strings.Split(s, " ")
		key := f[0]
		if key != "option" && seen[key] {
			return nil, bad("duplicate %q line", key)
		}
		seen[key] = true
		switch {
		case key == "arch" && len(f) == 2:
			img.Arch = f[1]
		case key == "nvrtc" && len(f) == 2:
			img.NVRTC = f[1]
		case key == "source" && len(f) == 3 && len(f[2]) == 64:
			img.Source, img.SourceDigest = f[1], f[2]
		case key == "option" && len(f) == 2:
			img.Options = append(img.Options, f[1])
		case (key == "ptx" || key == "cubin") && len(f) == 3:
			n, err := strconv.Atoi(f[1])
			if err != nil || n < 0 || n > maxImageBlob {
				return nil, bad("%s size %q out of range (0 to %d)", key, f[1], maxImageBlob)
			}
			dst := &img.PTX
			if key == "cubin" {
				dst = &img.Cubin
			}
			blobs = append(blobs, blob{n, f[2], dst})
		default:
			return nil, bad("header line %q", s)
		}
	}
	for _, k := range []string{"arch", "nvrtc", "source", "ptx", "cubin"} {
		if !seen[k] {
			return nil, bad("no %q line", k)
		}
	}
	for _, b := range blobs {
		v := make([]byte, b.n)
		if _, err := io.ReadFull(r, v); err != nil {
			return nil, bad("blob of %d bytes truncated", b.n)
		}
		h := sha256.Sum256(v)
		if hex.EncodeToString(h[:]) != b.sum {
			return nil, bad("blob digest %s does not match its %d bytes", b.sum, b.n)
		}
		*b.dst = v
	}
	if _, err := r.ReadByte(); err != io.EOF {
		return nil, bad("trailing bytes after the blobs")
	}
	return img, nil
}
