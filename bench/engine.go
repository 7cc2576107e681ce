package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/vouchml/vouch/exec"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/tensor"
)

// Engine runs one model on fixed inputs.
type Engine interface {
	// Name is the engine's name in reports ("vouch", "ort", "gomlx").
	Name() string
	// Run performs one inference on the inputs the engine was made with.
	Run() error
	// Close releases what the engine holds.
	Close() error
}

// PeerConfig is how peers are set up.
type PeerConfig struct {
	// Threads is the number of intra-op threads a peer may use.
	Threads int
	// ORTLib is the path of libonnxruntime.so.1 (scripts/fetch-ort.sh).
	ORTLib string
}

// Peers lists the peer names NewPeer knows.
var Peers = []string{"ort", "gomlx"}

// NewPeer returns the named peer set up to run m. A peer that cannot run
// here returns an error wrapping ErrUnavailable with the reason.
func NewPeer(name string, m *Model, cfg PeerConfig) (Engine, error) {
	if m.ONNX == nil {
		return nil, fmt.Errorf("bench: peer %s: %w: peers need the ONNX model, and %s is a plan", name, ErrUnavailable, m.Path)
	}
	switch name {
	case "ort":
		return newORT(m, cfg)
	case "gomlx":
		return newGoMLX(m, cfg)
	}
	return nil, fmt.Errorf("bench: unknown peer %q (known: ort, gomlx)", name)
}

// vouchEngine runs the plan on the serving engine (exec.Engine), bound
// once to the input shapes (one arena, allocation-free kernels), then
// executed per run.
type vouchEngine struct {
	b      *exec.Bound
	inputs []*tensor.Tensor
}

// NewVouch returns the vouch engine for m.
func NewVouch(m *Model) (Engine, error) {
	eng, err := exec.NewEngine(m.Plan.Graph, builtin.Registry(), exec.Options{})
	if err != nil {
		return nil, err
	}
	g := m.Plan.Graph
	inputs := make([]*tensor.Tensor, len(g.Inputs))
	shapes := make([][]int, len(g.Inputs))
	for i, v := range g.Inputs {
		t, ok := m.Inputs[v.Name]
		if !ok {
			return nil, fmt.Errorf("bench: no input %q", v.Name)
		}
		inputs[i], shapes[i] = t, t.Shape
	}
	b, err := eng.Bind(shapes)
	if err != nil {
		return nil, err
	}
	return &vouchEngine{b: b, inputs: inputs}, nil
}

func (v *vouchEngine) Name() string { return "vouch" }
func (v *vouchEngine) Run() error   { _, err := v.b.Execute(v.inputs); return err }
func (v *vouchEngine) Close() error { return nil }

// Options set how many times each engine runs.
type Options struct {
	Warmup int // untimed runs of each engine first (default 0)
	Runs   int // timed runs of each engine (default 10)
	// Threads is Profile's kernel thread count (exec.CPU.Threads: 0 is
	// GOMAXPROCS).
	Threads int
}

// Result is one engine's timings.
type Result struct {
	Engine  string          `json:"engine"`
	Summary Summary         `json:"summary"`
	Samples []time.Duration `json:"samples_ns"`
}

// Compare runs the engines alternately: each warms up, then every round
// times one run of each engine, the first engine of a round rotating so that
// none always runs right after another. Results are in engines' order.
func Compare(ctx context.Context, engines []Engine, o Options) ([]Result, error) {
	if o.Runs <= 0 {
		o.Runs = 10
	}
	for _, e := range engines {
		for i := 0; i < o.Warmup; i++ {
			if err := e.Run(); err != nil {
				return nil, fmt.Errorf("bench: %s warm-up: %w", e.Name(), err)
			}
		}
	}
	samples := make([][]time.Duration, len(engines))
	for r := 0; r < o.Runs; r++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		for j := range engines {
			i := (r + j) % len(engines)
			start := time.Now()
			err := engines[i].Run()
			d := time.Since(start)
			if err != nil {
				return nil, fmt.Errorf("bench: %s run %d: %w", engines[i].Name(), r, err)
			}
			samples[i] = append(samples[i], d)
		}
	}
	res := make([]Result, len(engines))
	for i, e := range engines {
		res[i] = Result{Engine: e.Name(), Summary: Summarize(samples[i]), Samples: samples[i]}
	}
	return res, nil
}
