package bundle

import (
	"bufio"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"

	"golang.org/x/sys/cpu"
)

// Environment is the fingerprint of the machine and program that built a
// bundle.
type Environment struct {
	OS            string   `json:"os"`
	Arch          string   `json:"arch"`
	CPUModel      string   `json:"cpuModel,omitempty"`
	CPUFeatures   []string `json:"cpuFeatures,omitempty"` // sorted, cpuinfo names
	GoVersion     string   `json:"goVersion"`
	VouchVersion  string   `json:"vouchVersion"`
	VouchRevision string   `json:"vouchRevision,omitempty"` // VCS revision of the vouch binary
	VouchModified bool     `json:"vouchModified,omitempty"` // built from a modified work tree
}

// HostEnvironment returns this machine's and this program's fingerprint.
// vouchVersion is the release version of the running vouch (the CLI owns
// it); the VCS revision comes from the binary's build information.
func HostEnvironment(vouchVersion string) Environment {
	env := Environment{
		OS:           runtime.GOOS,
		Arch:         runtime.GOARCH,
		GoVersion:    runtime.Version(),
		VouchVersion: vouchVersion,
	}
	env.CPUModel, env.CPUFeatures = hostCPU()
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				env.VouchRevision = s.Value
			case "vcs.modified":
				env.VouchModified = s.Value == "true"
			}
		}
	}
	return env
}

// HostCPUFeatures returns the CPU features of this machine, sorted, in
// Linux /proc/cpuinfo spelling ("avx2", "fma", "asimd").
func HostCPUFeatures() []string {
	_, f := hostCPU()
	return f
}

func hostCPU() (model string, features []string) {
	if runtime.GOOS == "linux" {
		if f, err := os.Open("/proc/cpuinfo"); err == nil {
			model, features = parseCPUInfo(f)
			f.Close()
		}
	}
	features = append(features, sysCPUFeatures()...)
	slices.Sort(features)
	return model, slices.Compact(features)
}

// parseCPUInfo reads the model name and feature flags of the first
// processor in a /proc/cpuinfo listing (x86 "model name"/"flags", arm64
// "CPU part"/"Features").
func parseCPUInfo(r io.Reader) (model string, features []string) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	seenFlags := false
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "model name", "Model", "cpu model":
			if model == "" {
				model = val
			}
		case "flags", "Features":
			if !seenFlags {
				features = strings.Fields(val)
				seenFlags = true
			}
		}
	}
	slices.Sort(features)
	return model, slices.Compact(features)
}

// sysCPUFeatures names the features golang.org/x/sys/cpu detects, which
// take the operating system's support into account.
func sysCPUFeatures() []string {
	var out []string
	add := func(ok bool, name string) {
		if ok {
			out = append(out, name)
		}
	}
	switch runtime.GOARCH {
	case "amd64", "386":
		x := cpu.X86
		add(x.HasAES, "aes")
		add(x.HasADX, "adx")
		add(x.HasAVX, "avx")
		add(x.HasAVX2, "avx2")
		add(x.HasAVX512F, "avx512f")
		add(x.HasAVX512CD, "avx512cd")
		add(x.HasAVX512VL, "avx512vl")
		add(x.HasAVX512BW, "avx512bw")
		add(x.HasAVX512DQ, "avx512dq")
		add(x.HasAVX512VNNI, "avx512_vnni")
		add(x.HasAVX512BF16, "avx512_bf16")
		add(x.HasAVXVNNI, "avx_vnni")
		add(x.HasBMI1, "bmi1")
		add(x.HasBMI2, "bmi2")
		add(x.HasF16C, "f16c")
		add(x.HasFMA, "fma")
		add(x.HasPOPCNT, "popcnt")
		add(x.HasSSE2, "sse2")
		add(x.HasSSE3, "pni")
		add(x.HasSSSE3, "ssse3")
		add(x.HasSSE41, "sse4_1")
		add(x.HasSSE42, "sse4_2")
	case "arm64":
		a := cpu.ARM64
		add(a.HasFP, "fp")
		add(a.HasASIMD, "asimd")
		add(a.HasASIMDHP, "asimdhp")
		add(a.HasASIMDDP, "asimddp")
		add(a.HasFPHP, "fphp")
		add(a.HasSVE, "sve")
		add(a.HasSVE2, "sve2")
		add(a.HasI8MM, "i8mm")
		add(a.HasASIMDFHM, "asimdfhm")
	}
	return out
}
