package compile_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/vouchml/vouch/buildlog"
	"github.com/vouchml/vouch/compile"
	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/kernel"
	"github.com/vouchml/vouch/kernel/builtin"
	"github.com/vouchml/vouch/plan"
	"github.com/vouchml/vouch/tensor"
	"github.com/vouchml/vouch/tune"
)

// twinModel is x -> test.Twin -> y, where Twin offers a slow and a fast
// tactic that give the same bits.
func twinModel() (*ir.Model, *kernel.Registry) {
	reg := builtin.Registry()
	reg.Add("test", kernel.Table{"Twin": {
		Run: func(c *kernel.Ctx, n *ir.Node, in []*tensor.Tensor) ([]*tensor.Tensor, error) {
			if kernel.Tactic(n) == "slow" {
				time.Sleep(2 * time.Millisecond)
			}
			return []*tensor.Tensor{in[0].Clone()}, nil
		},
		Infer:   kernel.InferSame(0),
		Tactics: func(*ir.Node, []ir.Type) []string { return []string{"slow", "fast"} },
	}})
	g := &ir.Graph{
		Name:         "g",
		Inputs:       []*ir.Value{{Name: "x", Type: ir.StaticType(tensor.Float32, []int{2, 3})}},
		Outputs:      []*ir.Value{{Name: "y", Type: ir.Type{DType: tensor.Float32}}},
		Initializers: map[string]*tensor.Tensor{},
		Nodes:        []*ir.Node{{Name: "twin", OpType: "Twin", Domain: "test", Version: 1, Inputs: []string{"x"}, Outputs: []string{"y"}, Attrs: map[string]*ir.Attr{}}},
	}
	if err := ir.Verify(g, nil); err != nil {
		panic(err)
	}
	return &ir.Model{Graph: g, Opsets: map[string]int64{"": 17, "test": 1}}, reg
}

func TestTimedTacticsAndCache(t *testing.T) {
	opts := compile.DefaultOptions()
	opts.Tactics = compile.TacticsTimed // timing is asked for; the default is the rule
	opts.TimingCache = tune.NewCache()
	opts.TuneReps = 3
	var progress int
	opts.Progress = func(done, total int) { progress = done }
	m, reg := twinModel()
	log := buildlog.New(nil)
	a, err := compile.Build(m, []byte("src"), "twin", "test", opts, reg, log)
	if err != nil {
		t.Fatal(err)
	}
	p, err := plan.Decode(a.Plan)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Header.Graph.Layers[0].Tactic; got != "fast" {
		t.Fatalf("chose %q", got)
	}
	if kernel.Tactic(p.Graph.Nodes[0]) != "fast" {
		t.Fatal("the tactic is not recorded on the layer")
	}
	if log.Count("tactics", "timed") != 2 || progress != 1 || opts.TimingCache.Len() != 2 {
		t.Fatalf("timings logged %d, progress %d, cache %d", log.Count("tactics", "timed"), progress, opts.TimingCache.Len())
	}
	// Same model, options and cache: byte-identical plan, nothing re-timed.
	var buf bytes.Buffer
	opts.TimingCache.Encode(&buf)
	cache, err := tune.ReadCache(&buf)
	if err != nil {
		t.Fatal(err)
	}
	opts.TimingCache = cache
	m2, reg2 := twinModel()
	log2 := buildlog.New(nil)
	b, err := compile.Build(m2, []byte("src"), "twin", "test", opts, reg2, log2)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Plan, b.Plan) {
		t.Fatal("rebuild with the same timing cache differs")
	}
	for _, r := range log2.Records {
		if r.Event == "timed" && r.Fields["cached"] != true {
			t.Fatal("a cached timing was measured again")
		}
	}
	// The heuristic policy takes the kernel's first choice without timing.
	opts.Tactics = "heuristic"
	opts.TimingCache = nil
	m3, reg3 := twinModel()
	log3 := buildlog.New(nil)
	c, err := compile.Build(m3, []byte("src"), "twin", "test", opts, reg3, log3)
	if err != nil {
		t.Fatal(err)
	}
	p3, _ := plan.Decode(c.Plan)
	if p3.Header.Graph.Layers[0].Tactic != "slow" || log3.Count("tactics", "timed") != 0 {
		t.Fatal("heuristic policy timed or chose differently")
	}
}
