package cuda

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Without a driver, Open fails with ErrNoDriver and says so plainly (CI
// has no GPU: this is the "no GPU here" path). On a GPU machine it opens.
func TestOpenWithoutDriver(t *testing.T) {
	d, err := Open("")
	if err == nil {
		t.Skipf("a CUDA driver is installed here (%s)", d.Path)
	}
	if !errors.Is(err, ErrNoDriver) || !strings.HasPrefix(err.Error(), "cuda: no NVIDIA driver found (libcuda.so.1): ") {
		t.Fatalf("Open without a driver: %v", err)
	}
}

func TestDlopenFailureNamesEveryCandidate(t *testing.T) {
	dir := t.TempDir()
	notLib := filepath.Join(dir, "libcuda.so.1")
	if err := os.WriteFile(notLib, []byte("not an ELF file"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, err := dlopen(ErrNoDriver, []string{filepath.Join(dir, "missing.so"), notLib})
	if !errors.Is(err, ErrNoDriver) {
		t.Fatalf("err = %v, want ErrNoDriver", err)
	}
	for _, want := range []string{"missing.so", notLib} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, _, err := dlopen(ErrNoNVRTC, nil); !errors.Is(err, ErrNoNVRTC) || !strings.Contains(err.Error(), "no candidate paths") {
		t.Errorf("no candidates: %v", err)
	}
}

func TestOpenNVRTCExplicitMissing(t *testing.T) {
	n, err := OpenNVRTC("/nonexistent/libnvrtc.so.13")
	if err == nil {
		t.Skipf("an NVRTC is installed here (%s)", n.Path)
	}
	if !errors.Is(err, ErrNoNVRTC) || !strings.Contains(err.Error(), "/nonexistent/libnvrtc.so.13") {
		t.Fatalf("OpenNVRTC: %v", err)
	}
}

func TestFindOrder(t *testing.T) {
	got := Find("/x/explicit.so", "liba.so.1", "liba.so")
	if len(got) < 3 || got[0] != "/x/explicit.so" || got[1] != "liba.so.1" || got[2] != "liba.so" {
		t.Fatalf("Find = %v: want the explicit path, then the bare names", got)
	}
	if got := Find("", "libvouch-none.so"); len(got) != 1 || got[0] != "libvouch-none.so" {
		t.Fatalf("Find of a library that is nowhere = %v", got)
	}
}

func testImage() *Image {
	return &Image{Arch: "sm_90", NVRTC: "13.0", Source: "exact.cu", SourceDigest: strings.Repeat("ab", 32),
		Options: []string{"--fmad=false", "--ftz=false"}, PTX: []byte(".version 9.0\n.target sm_90\n\x00"), Cubin: []byte("\x7fELF cubin bytes")}
}

func TestImageRoundTrip(t *testing.T) {
	img := testImage()
	enc := img.Encode()
	got, err := DecodeImage(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Encode(), enc) || got.Arch != "sm_90" || got.NVRTC != "13.0" || len(got.Options) != 2 || !bytes.Equal(got.Cubin, img.Cubin) {
		t.Fatalf("round trip: %+v", got)
	}
	if img.Digest() != got.Digest() || len(img.Digest()) != 64 {
		t.Fatalf("digests %s %s", img.Digest(), got.Digest())
	}
}

func TestDecodeImageRejects(t *testing.T) {
	enc := testImage().Encode()
	// Every truncation fails, and so does every flipped byte (in the header
	// a field breaks; in a blob its digest does).
	for i := 0; i < len(enc); i++ {
		if _, err := DecodeImage(enc[:i]); err == nil {
			t.Fatalf("truncation to %d bytes decoded", i)
		}
		bad := append([]byte{}, enc...)
		bad[i] ^= 0x20
		if img, err := DecodeImage(bad); err == nil && bytes.Equal(img.Encode(), enc) {
			t.Fatalf("flipping byte %d decoded to the same image", i)
		}
	}
	for name, in := range map[string]string{
		"version":  "vouch-cuda-image 2\nend\n",
		"huge":     "vouch-cuda-image 1\narch sm_90\nnvrtc 13.0\nsource a " + strings.Repeat("0", 64) + "\nptx 99999999999 x\ncubin 0 x\nend\n",
		"missing":  "vouch-cuda-image 1\narch sm_90\nend\n",
		"unknown":  "vouch-cuda-image 1\nflavour mint\nend\n",
		"dup":      "vouch-cuda-image 1\narch sm_90\narch sm_80\nend\n",
		"trailing": string(enc) + "x",
	} {
		if _, err := DecodeImage([]byte(in)); !errors.Is(err, ErrImage) {
			t.Errorf("%s: err = %v, want ErrImage", name, err)
		}
	}
}

func FuzzDecodeImage(f *testing.F) {
	f.Add(testImage().Encode())
	f.Add([]byte("vouch-cuda-image 1\nend\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		img, err := DecodeImage(b)
		if err != nil {
			return
		}
		if _, err := DecodeImage(img.Encode()); err != nil {
			t.Fatalf("re-decoding an accepted image: %v", err)
		}
	})
}

func TestImageCheckRefusesOtherArch(t *testing.T) {
	img := testImage()
	h200 := DeviceInfo{Ordinal: 0, Name: "NVIDIA H200", Major: 9, Minor: 0}
	if err := img.Check(h200); err != nil {
		t.Fatalf("same architecture: %v", err)
	}
	a100 := DeviceInfo{Ordinal: 1, Name: "NVIDIA A100-SXM4-80GB", Major: 8, Minor: 0}
	err := img.Check(a100)
	if !errors.Is(err, ErrArch) {
		t.Fatalf("err = %v, want ErrArch", err)
	}
	for _, want := range []string{"sm_90", "sm_80", "NVIDIA A100", "--device cuda:1 --arch sm_80"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
}

func TestBuildRejectsArch(t *testing.T) {
	for _, a := range []string{"", "compute_90", "sm_", "sm_9x", "90"} {
		if _, err := Build(nil, "", "x.cu", a, nil); err == nil || !strings.Contains(err.Error(), "want sm_XX") {
			t.Errorf("Build arch %q: %v", a, err)
		}
	}
}

func TestArgsLayout(t *testing.T) {
	a := new(Args).I32(-2).Ptr(0x1122334455667788).F32(1).Struct(1, 2, 3)
	if len(a.vals) != 4 || a.vals[0][0] != 0xfe || a.vals[1][0] != 0x88 || a.vals[2][3] != 0x3f || len(a.vals[3]) < 12 || a.vals[3][8] != 3 {
		t.Fatalf("args %v", a.vals)
	}
}

func TestReleaseAndVersion(t *testing.T) {
	for path, want := range map[string]string{
		"/usr/lib/x86_64-linux-gnu/libcuda.so.580.159.04": "580.159.04",
		"/usr/lib/libcuda.so.1":                           "",
		"/x/libcuda.so":                                   "",
		"/x/libnvrtc.so.13":                               "",
	} {
		if got := releaseOf(path); got != want {
			t.Errorf("releaseOf(%s) = %q, want %q", path, got, want)
		}
	}
	for v, want := range map[int]string{13000: "13.0", 12040: "12.4", 11080: "11.8"} {
		if got := CUDAVersion(v); got != want {
			t.Errorf("CUDAVersion(%d) = %q, want %q", v, got, want)
		}
	}
}
