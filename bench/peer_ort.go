//go:build ort

package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/vouchml/vouch/tensor"
)

// ORTBuilt reports whether the ONNX Runtime peer is compiled in.
const ORTBuilt = true

// ortEngine runs the model in ONNX Runtime (CPU execution provider, all
// graph optimisations, sequential execution, intra-op threads as asked).
//
// onnxruntime_go v1.27.0 asks the library for C API version 24; ORT 1.30
// serves every older API version, so the newest onnxruntime_go on the Go
// module proxy drives the 1.30 library.
type ortEngine struct {
	sess   *ort.DynamicAdvancedSession
	ins    []ort.Value
	outs   []ort.Value
	onames []string
}

func newORT(m *Model, cfg PeerConfig) (Engine, error) {
	if cfg.ORTLib == "" {
		return nil, fmt.Errorf("bench: peer ort: %w: no library path (run scripts/fetch-ort.sh and pass --ort-lib)", ErrUnavailable)
	}
	if _, err := os.Stat(cfg.ORTLib); err != nil {
		return nil, fmt.Errorf("bench: peer ort: %w: %w", ErrUnavailable, err)
	}
	if !ort.IsInitialized() {
		ort.SetSharedLibraryPath(cfg.ORTLib)
		if err := ort.InitializeEnvironment(ort.WithLogLevelError()); err != nil {
			return nil, fmt.Errorf("bench: peer ort: %w: loading %s: %w", ErrUnavailable, cfg.ORTLib, err)
		}
	}
	opts, err := ortOptions(cfg, "")
	if err != nil {
		return nil, err
	}
	defer opts.Destroy()
	e, err := newORTSession(m, opts)
	if err != nil {
		return nil, err
	}
	return e, nil
}

// newORTSession creates the session for m with opts and its input values.
func newORTSession(m *Model, opts *ort.SessionOptions) (*ortEngine, error) {
	var err error
	names := make([]string, 0, len(m.Inputs))
	for n := range m.Inputs {
		names = append(names, n)
	}
	sort.Strings(names)
	e := &ortEngine{}
	for _, n := range names {
		v, err := ortTensor(m.Inputs[n])
		if err != nil {
			e.Close()
			return nil, fmt.Errorf("bench: peer ort: input %q: %w", n, err)
		}
		e.ins = append(e.ins, v)
	}
	for _, o := range m.Plan.Graph.Outputs {
		e.onames = append(e.onames, o.Name)
	}
	e.outs = make([]ort.Value, len(e.onames))
	e.sess, err = ort.NewDynamicAdvancedSessionWithONNXData(m.ONNX, names, e.onames, opts)
	if err != nil {
		e.Close()
		return nil, fmt.Errorf("bench: peer ort: %w: creating the session: %w", ErrUnavailable, err)
	}
	return e, nil
}

// ortOptions are the session options of the peer: intra-op threads as
// asked, inter-op 1, sequential execution, all graph optimisations, no
// spinning; and ORT's own per-node profiling to files named after
// profile, when it is not "".
func ortOptions(cfg PeerConfig, profile string) (*ort.SessionOptions, error) {
	opts, err := ort.NewSessionOptions()
	if err != nil {
		return nil, fmt.Errorf("bench: peer ort: %w", err)
	}
	threads := max(cfg.Threads, 1)
	errs := []error{
		opts.SetIntraOpNumThreads(threads),
		opts.SetInterOpNumThreads(1),
		opts.SetExecutionMode(ort.ExecutionModeSequential),
		opts.SetGraphOptimizationLevel(ort.GraphOptimizationLevelEnableAll),
		// Spinning threads would steal the core from the engine timed next.
		opts.AddSessionConfigEntry("session.intra_op.allow_spinning", "0"),
	}
	if profile != "" {
		errs = append(errs, opts.EnableProfiling(profile))
	}
	for _, err := range errs {
		if err != nil {
			opts.Destroy()
			return nil, fmt.Errorf("bench: peer ort: session options: %w", err)
		}
	}
	return opts, nil
}

// ProfileORT runs the model o.Warmup + o.Runs times in a separate ONNX
// Runtime session with ORT's own profiling on, and returns each node's
// median kernel time, in the order ORT ran them (its optimised graph: its
// fused and layout nodes, not the ONNX model's). The profile adds a little
// time per node, so these times are for comparing layers, not for the
// end-to-end ratio.
func ProfileORT(m *Model, cfg PeerConfig, o Options) ([]PeerLayer, error) {
	if cfg.ORTLib == "" {
		return nil, fmt.Errorf("bench: peer ort: %w: no library path", ErrUnavailable)
	}
	dir, err := os.MkdirTemp("", "vouch-ort-profile")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	e, err := newORTProfiled(m, cfg, filepath.Join(dir, "ort"))
	if err != nil {
		return nil, err
	}
	for i := 0; i < o.Warmup+max(o.Runs, 1); i++ {
		if err := e.Run(); err != nil {
			e.Close()
			return nil, fmt.Errorf("bench: peer ort: %w", err)
		}
	}
	// The profile is written when the session ends.
	if err := e.Close(); err != nil {
		return nil, fmt.Errorf("bench: peer ort: %w", err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "ort*.json"))
	if len(files) != 1 {
		return nil, fmt.Errorf("bench: peer ort: profiling wrote %d files, want 1", len(files))
	}
	raw, err := os.ReadFile(files[0])
	if err != nil {
		return nil, err
	}
	return parseORTProfile(raw, o.Warmup)
}

func newORTProfiled(m *Model, cfg PeerConfig, profile string) (*ortEngine, error) {
	opts, err := ortOptions(cfg, profile)
	if err != nil {
		return nil, err
	}
	defer opts.Destroy()
	return newORTSession(m, opts)
}

func ortTensor(t *tensor.Tensor) (ort.Value, error) {
	shape := make(ort.Shape, len(t.Shape))
	for i, d := range t.Shape {
		shape[i] = int64(d)
	}
	switch d := t.Data.(type) {
	case []float32:
		return ort.NewTensor(shape, d)
	case []float64:
		return ort.NewTensor(shape, d)
	case []int64:
		return ort.NewTensor(shape, d)
	case []int32:
		return ort.NewTensor(shape, d)
	}
	return nil, fmt.Errorf("dtype %v is not wired to ORT", t.DType)
}

func (e *ortEngine) Name() string { return "ort" }

// Run lets ORT allocate the outputs, as a serving caller would, and frees
// them after the run.
func (e *ortEngine) Run() error {
	for i := range e.outs {
		e.outs[i] = nil
	}
	err := e.sess.Run(e.ins, e.outs)
	for _, o := range e.outs {
		if o != nil {
			o.Destroy()
		}
	}
	return err
}

func (e *ortEngine) Close() error {
	var errs []error
	if e.sess != nil {
		errs = append(errs, e.sess.Destroy())
	}
	for _, v := range e.ins {
		errs = append(errs, v.Destroy())
	}
	return errors.Join(errs...)
}
