package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vouchml/vouch/bundle"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/npy"
	"github.com/vouchml/vouch/onnx"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// RunOptions are the settings of `vouch run`.
type RunOptions struct {
	Model  string
	Inputs []string // NAME=FILE, or FILE for a single-input model
	OutDir string
	JSON   bool
	Keys   string   // trusted public keys, for bundles
	Device string   // --device (device.go)
	CPU    cpuFlags // --isa, --threads (isa.go)
}

func runRun(ctx context.Context, m *Main, args []string) error {
	var o RunOptions
	fs := m.newFlagSet("run", "run MODEL.onnx|NAME.plan|NAME.vouch --input NAME=FILE ... [--out DIR] [--json]", `
Runs a model once on the given inputs and prints each output's name, dtype,
shape, first values and argmax.

Inputs are serialized ONNX TensorProto files (.pb, as in the ONNX test-data
layout) or NumPy .npy files. NAME is the model's input name; for a model with
one input, NAME= may be left out. Running with no --input lists the inputs the
model expects.

Example:
  vouch run ../shared/models/digits_cnn/model.onnx \
      --input image=../shared/models/digits_cnn/test_data_set_0/input_0.pb --out /tmp/out`)
	var inputs multiFlag
	fs.Var(&inputs, "input", "an input as NAME=FILE (.pb or .npy); repeat for each input")
	fs.StringVar(&o.OutDir, "out", "", "write each output as DIR/<output name>.pb (TensorProto)")
	fs.BoolVar(&o.JSON, "json", false, "print the outputs as JSON (all values)")
	fs.StringVar(&o.Keys, "key", "", "trusted public key(s) for a bundle (.vouch): it is verified before it is loaded")
	deviceFlag(fs, &o.Device)
	o.CPU.register(fs)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: want exactly one MODEL argument, got %d", ErrUsage, len(pos))
	}
	o.Model, o.Inputs = pos[0], inputs
	return m.run(o)
}

func (m *Main) run(o RunOptions) error {
	g, pl, err := loadGraph(o.Model, o.Keys)
	if err != nil {
		return err
	}
	reg := builtin.Registry()
	cpu, err := o.CPU.cpu()
	if err != nil {
		return err
	}
	eng, err := newEngine(g, pl, reg, o.Device, cpu)
	if err != nil {
		return err
	}
	defer eng.Close()
	if len(o.Inputs) == 0 {
		var b strings.Builder
		for _, v := range g.Inputs {
			fmt.Fprintf(&b, "\n  --input %s=FILE   (%v)", v.Name, v.Type)
		}
		return fmt.Errorf("%w: no inputs given; the model expects:%s", ErrUsage, b.String())
	}
	feeds, err := readInputs(g, o.Inputs)
	if err != nil {
		return err
	}
	profile := ""
	if pl != nil {
		idx, err := pl.SelectProfile(feeds)
		if err != nil {
			return err
		}
		if idx >= 0 {
			profile = fmt.Sprintf(" (profile %d)", idx)
		}
	}
	start := time.Now()
	outs, err := eng.Run(context.Background(), feeds)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	if o.OutDir != "" {
		if err := writeOutputs(o.OutDir, g, outs); err != nil {
			return err
		}
	}
	if o.JSON {
		return printJSON(m, g, outs, elapsed)
	}
	for _, v := range g.Outputs {
		fmt.Fprintln(m.Stdout, describe(v.Name, outs[v.Name]))
	}
	fmt.Fprintf(m.Stdout, "ran in %v%s on %s (CPU kernels at instruction set %s)\n", elapsed.Round(time.Microsecond), profile, eng.DeviceName(), (&kernel.Ctx{ISA: cpu.ISA}).Level())
	if o.OutDir != "" {
		fmt.Fprintf(m.Stdout, "outputs written to %s\n", o.OutDir)
	}
	return nil
}

// loadGraph reads an ONNX model or an engine plan (told apart by the plan's
// version line).
func loadGraph(path, keys string) (*ir.Graph, *plan.Plan, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	if isBundle(b) {
		trusted, err := readKeys(keys)
		if err != nil {
			return nil, nil, fmt.Errorf("%s is a bundle: %w", path, err)
		}
		l, err := bundle.Load(bytes.NewReader(b), bundle.LoadOptions{TrustedKeys: trusted, Check: checkOptions(false)})
		if err != nil {
			return nil, nil, err
		}
		b = l.Bundle.Plan()
	}
	if isPlan(b) {
		p, err := plan.Decode(b)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", path, err)
		}
		return p.Graph, p, nil
	}
	m, err := onnx.Decode(b, filepath.Dir(path))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return m.Graph, nil, nil
}

// isBundle reports whether b is a tar archive (a vouch bundle).
func isBundle(b []byte) bool { return len(b) > 262 && string(b[257:262]) == "ustar" }

// readInputs loads NAME=FILE pairs (or a bare FILE for single-input graphs).
func readInputs(g *ir.Graph, specs []string) (map[string]*tensor.Tensor, error) {
	named := make([]string, len(specs))
	for i, s := range specs {
		if !strings.Contains(s, "=") {
			if len(g.Inputs) != 1 {
				return nil, fmt.Errorf("%w: --input %q: name the input (NAME=FILE); the model has %d inputs", ErrUsage, s, len(g.Inputs))
			}
			s = g.Inputs[0].Name + "=" + s
		}
		named[i] = s
	}
	return readInputFiles(named)
}

// readInputFiles loads NAME=FILE pairs without a graph to check them
// against (replay checks them against the record's digest instead).
func readInputFiles(specs []string) (map[string]*tensor.Tensor, error) {
	feeds := map[string]*tensor.Tensor{}
	for _, s := range specs {
		name, file, ok := strings.Cut(s, "=")
		if !ok || name == "" {
			return nil, fmt.Errorf("%w: --input %q: want NAME=FILE", ErrUsage, s)
		}
		t, err := ReadTensorFile(file)
		if err != nil {
			return nil, fmt.Errorf("input %q: %w", name, err)
		}
		if _, dup := feeds[name]; dup {
			return nil, fmt.Errorf("%w: input %q given twice", ErrUsage, name)
		}
		feeds[name] = t
	}
	return feeds, nil
}

// ReadTensorFile reads a .npy file or a serialized TensorProto.
func ReadTensorFile(path string) (*tensor.Tensor, error) {
	if strings.EqualFold(filepath.Ext(path), ".npy") {
		b, err := readTensorFile(path)
		if err != nil {
			return nil, err
		}
		return npy.Decode(b)
	}
	f, err := openTensorFile(path) // bounds what DecodeTensorFile reads
	if err != nil {
		return nil, err
	}
	f.Close()
	t, _, err := onnx.DecodeTensorFile(path)
	return t, err
}

func writeOutputs(dir string, g *ir.Graph, outs map[string]*tensor.Tensor) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, v := range g.Outputs {
		b, err := onnx.EncodeTensor(outs[v.Name], v.Name)
		if err != nil {
			return err
		}
		name := strings.Map(func(r rune) rune {
			if r == '/' || r == '\\' || r == 0 {
				return '_'
			}
			return r
		}, v.Name)
		if err := writeFileAtomic(filepath.Join(dir, name+".pb"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// writeFileAtomic writes via a temporary file and rename, so a crash never
// leaves a half-written file under the final name.
func writeFileAtomic(path string, b []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-"+filepath.Base(path)+"-*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(tmp)
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		os.Remove(tmp)
		return err
	}
	return os.Rename(tmp, path)
}

// describe formats one output: name, type, first values and argmax.
func describe(name string, t *tensor.Tensor) string {
	const show = 8
	var vals []string
	if s, ok := t.Data.([]string); ok {
		for i := 0; i < len(s) && i < show; i++ {
			vals = append(vals, fmt.Sprintf("%q", s[i]))
		}
		return fmt.Sprintf("%s  %v  [%s]", name, t, strings.Join(vals, " "))
	}
	f, _ := t.Float64s()
	for i := 0; i < len(f) && i < show; i++ {
		vals = append(vals, formatValue(t.DType, f[i]))
	}
	more := ""
	if len(f) > show {
		more = " …"
	}
	line := fmt.Sprintf("%s  %v  [%s%s]", name, t, strings.Join(vals, " "), more)
	if len(t.Shape) >= 2 && t.Shape[len(t.Shape)-1] > 0 {
		// A batch of score rows: the class of each row.
		width := t.Shape[len(t.Shape)-1]
		var rows []string
		for r := 0; r*width < len(f) && r < show; r++ {
			am, _ := argmax(f[r*width : (r+1)*width])
			rows = append(rows, fmt.Sprint(am))
		}
		if len(f)/width > show {
			rows = append(rows, "…")
		}
		return line + "  argmax per row=[" + strings.Join(rows, " ") + "]"
	}
	if am, ok := argmax(f); ok {
		line += fmt.Sprintf("  argmax=%d", am)
	}
	return line
}

func formatValue(dt tensor.DType, v float64) string {
	if dt.IsFloat() {
		return fmt.Sprintf("%.6g", v)
	}
	return fmt.Sprint(v)
}

func argmax(f []float64) (int, bool) {
	if len(f) == 0 {
		return 0, false
	}
	best := 0
	for i, v := range f {
		if v > f[best] || (math.IsNaN(f[best]) && !math.IsNaN(v)) {
			best = i
		}
	}
	return best, true
}

type jsonOutput struct {
	Name   string `json:"name"`
	DType  string `json:"dtype"`
	Shape  []int  `json:"shape"`
	Values any    `json:"values"`
	Argmax *int   `json:"argmax,omitempty"`
}

func printJSON(m *Main, g *ir.Graph, outs map[string]*tensor.Tensor, elapsed time.Duration) error {
	var res struct {
		Outputs   []jsonOutput `json:"outputs"`
		LatencyMS float64      `json:"latency_ms"`
	}
	for _, v := range g.Outputs {
		t := outs[v.Name]
		o := jsonOutput{Name: v.Name, DType: t.DType.String(), Shape: append([]int{}, t.Shape...)}
		if o.Shape == nil {
			o.Shape = []int{}
		}
		if s, ok := t.Data.([]string); ok {
			o.Values = s
		} else {
			f, _ := t.Float64s()
			vals := make([]any, len(f))
			for i, x := range f {
				if math.IsNaN(x) || math.IsInf(x, 0) {
					vals[i] = fmt.Sprint(x) // JSON has no NaN/Inf
				} else {
					vals[i] = x
				}
			}
			o.Values = vals
			if am, ok := argmax(f); ok {
				o.Argmax = &am
			}
		}
		res.Outputs = append(res.Outputs, o)
	}
	res.LatencyMS = float64(elapsed.Microseconds()) / 1000
	enc := json.NewEncoder(m.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(res)
}
