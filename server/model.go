package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/explain"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
)

// ErrInput is wrapped by every error about a request's tensors (missing,
// unknown, wrong dtype or shape, outside every profile). Runners wrap it so
// that the server answers 400 rather than 500.
var ErrInput = errors.New("bad input")

// A Runner is one loaded model: its metadata and a way to run it. The server
// needs nothing else from the engine.
//
// Run MUST be safe for concurrent use and MUST be a pure function of its
// inputs: the same inputs give the same output bits whatever else runs
// beside them. When Info().MaxBatch > 1, Run MUST also be batch invariant:
// running rows stacked along dimension 0 gives, for each row, the bits that
// running that row alone gives. Dynamic batching relies on it.
type Runner interface {
	Info() ModelInfo
	// Check validates inputs against the model (names, dtypes, shapes,
	// profiles) and returns the profile they select ("" when the model has
	// none). Errors wrap ErrInput.
	Check(inputs map[string]*tensor.Tensor) (profile string, err error)
	Run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error)
}

// ModelInfo describes a model to clients and to the audit trail.
type ModelInfo struct {
	Name     string
	Version  string
	Platform string // OIP model metadata "platform"
	Inputs   []TensorSpec
	Outputs  []TensorSpec

	PlanDigest   string // "sha256:" + hex
	BundleDigest string // "sha256:" + hex, when loaded from a bundle
	Precision    string
	Backend      string
	Device       string

	// MaxBatch is how many rows (dimension 0 of every input and output) one
	// Run may hold; 0 or 1 when the model has no batch dimension, in which
	// case requests are never stacked.
	MaxBatch int

	// Labels names the classes of LabelOutput's last dimension; when set,
	// responses and audit records carry output_label and confidence.
	Labels      []string
	LabelOutput string
}

// TensorSpec is a declared input or output: its name, element type and
// shape, -1 for a dimension of any size.
type TensorSpec struct {
	Name  string
	DType tensor.DType
	Shape []int64
}

// PlanOptions are the per-model settings of LoadPlan.
type PlanOptions struct {
	Name    string // default: the model name recorded in the plan, else the file name
	Version string // default "1"
	// Labels, one a class, and the output they name (default: the only
	// output, or the first).
	Labels      []string
	LabelOutput string
	// BundleDigest is the digest of the verified bundle the plan came from.
	BundleDigest string
	// Explain is the bundle's explanation data (feature names, background
	// set); see server/explain.go.
	Explain *explain.Data
	// Device runs the plan there: "cpu" (the default) or "cuda:N" (a GPU
	// plan, exact mode; see exec.NewPlanEngine).
	Device string
}

// PlanRunner runs an engine plan with vouch's executor.
type PlanRunner struct {
	info ModelInfo
	plan *plan.Plan
	eng  *exec.Engine
	xp   *explain.Explainer
}

// LoadPlan reads and decodes a plan file and prepares it to run.
func LoadPlan(path string, o PlanOptions) (*PlanRunner, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	p, err := plan.Decode(b)
	if err != nil {
		return nil, fmt.Errorf("server: %s: %w", path, err)
	}
	return NewPlanRunner(p, "sha256:"+plan.Digest(b), path, o)
}

// NewPlanRunner prepares a decoded plan; digest is its "sha256:" digest and
// path names it in errors and as the fallback model name.
func NewPlanRunner(p *plan.Plan, digest, path string, o PlanOptions) (*PlanRunner, error) {
	if d, err := exec.ParseDevice(o.Device); err == nil && d.Kind == exec.DeviceCPU {
		// A record of a fast plan served on the CPU would name the fast
		// plan and its label over the exact plan's bits.
		if err := p.CheckCPU(); err != nil {
			return nil, fmt.Errorf("server: %s: %w (serve it with --device cuda:N on a %s GPU or --device emu, or serve the exact plan of the same model)", path, err, p.Pinned())
		}
	}
	eng, err := exec.NewPlanEngine(p, builtin.Registry(), exec.Options{Device: o.Device})
	if err != nil {
		return nil, fmt.Errorf("server: %s: %w", path, err)
	}
	name := o.Name
	if name == "" {
		name = p.Header.Source.Name
	}
	if name == "" {
		name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	version := o.Version
	if version == "" {
		version = "1"
	}
	info := ModelInfo{
		Name: name, Version: version, Platform: "vouch_plan",
		PlanDigest: digest, Backend: backend(p.Header.RequiredFeatures), Device: "cpu",
		// The label of the layers that run, not the precision the build
		// asked for (a build whose precision pass was disabled is fp32).
		Precision: string(p.Precision()),
	}
	if eng.Backend() != exec.DeviceCPU {
		// What actually runs: "cuda-exact" on "cuda:0 NVIDIA H200 (...)".
		info.Backend, info.Device = eng.Backend(), eng.DeviceName()
	}
	for _, v := range p.Graph.Inputs {
		s := TensorSpec{Name: v.Name, DType: v.Type.DType}
		for _, d := range v.Type.Shape {
			s.Shape = append(s.Shape, dimSize(d.Known(), d.Value))
		}
		info.Inputs = append(info.Inputs, s)
	}
	for _, v := range p.Graph.Outputs {
		s := TensorSpec{Name: v.Name, DType: v.Type.DType}
		for _, d := range v.Type.Shape {
			s.Shape = append(s.Shape, dimSize(d.Known(), d.Value))
		}
		info.Outputs = append(info.Outputs, s)
	}
	// Batchable when every input and output shares a symbolic batch
	// dimension, inside the first profile that bounds it.
	info.MaxBatch = explain.MaxBatch(p)
	info.BundleDigest = o.BundleDigest
	// Labels from the flag, else the signed bundle, else the model's
	// metadata: replay resolves them with the same function.
	labels, labelOutput, err := explain.Labels(p.Graph, p.Header.Source.Meta, o.Explain, o.Labels, o.LabelOutput)
	if err != nil {
		return nil, fmt.Errorf("server: model %s: %w", name, err)
	}
	info.Labels, info.LabelOutput = labels, labelOutput
	r := &PlanRunner{info: info, plan: p, eng: eng}
	if err := r.setExplainer(o.Explain); err != nil {
		return nil, fmt.Errorf("server: model %s: %w", name, err)
	}
	return r, nil
}

func dimSize(known bool, v int64) int64 {
	if known {
		return v
	}
	return -1
}

// backend names the kernels the plan will run on this machine.
func backend(features []string) string {
	if runtime.GOARCH == "amd64" && len(features) > 0 {
		return "amd64"
	}
	return "go"
}

// Info returns the model's metadata.
func (r *PlanRunner) Info() ModelInfo { return r.info }

// Check validates inputs and selects the plan's profile.
func (r *PlanRunner) Check(inputs map[string]*tensor.Tensor) (string, error) {
	if err := exec.CheckInputs(r.plan.Graph, inputs); err != nil {
		return "", fmt.Errorf("%w: %s", ErrInput, strings.TrimPrefix(strings.TrimPrefix(err.Error(), "exec: "), "bad input: "))
	}
	idx, err := r.plan.SelectProfile(inputs)
	if err != nil {
		return "", fmt.Errorf("%w: %s", ErrInput, strings.TrimPrefix(err.Error(), "plan: "))
	}
	if idx < 0 {
		return "", nil
	}
	return fmt.Sprint(idx), nil
}

// Run executes the plan on the engine (exec.Engine: a pool of bound
// contexts per input shape, no allocation inside the engine), the engine
// replay and `vouch run` use too.
func (r *PlanRunner) Run(ctx context.Context, inputs map[string]*tensor.Tensor) (map[string]*tensor.Tensor, error) {
	outs, err := r.eng.Run(ctx, inputs)
	if err != nil {
		return nil, r.inputErr(err)
	}
	return outs, nil
}

func (r *PlanRunner) inputErr(err error) error {
	if errors.Is(err, exec.ErrInput) {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	return err
}

// warmupInputs returns zero inputs of the model's smallest accepted shape.
func warmupInputs(info ModelInfo) map[string]*tensor.Tensor {
	in := map[string]*tensor.Tensor{}
	for _, s := range info.Inputs {
		shape := make([]int, len(s.Shape))
		for i, d := range s.Shape {
			shape[i] = int(d)
			if d < 0 {
				shape[i] = 1
			}
		}
		if !s.DType.Supported() || s.DType == tensor.Sequence {
			return nil
		}
		in[s.Name] = tensor.New(s.DType, shape...)
	}
	return in
}
