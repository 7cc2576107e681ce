// Package plan defines vouch's engine plan: the frozen result of a build,
// holding everything the runtime will do — the layer list (each with its
// kind, the ONNX nodes it came from, its tactic and precision and its output
// shapes), the arena plan, the build options and the weights — in one file
// whose SHA-256 is the plan digest.
//
// # Format, version 1
//
// A plan file is:
//
//	"VOUCHPLAN 1\n"                      the version line; a future format changes the number
//	header length   uint64 little-endian
//	header          JSON (the Header type below, encoded by encoding/json:
//	                struct fields in declaration order, map keys sorted,
//	                so equal plans are equal bytes)
//	padding         zero bytes up to a multiple of 64 from the file start
//	weights         each weight's little-endian element bytes at the
//	                64-byte-aligned offset (relative to the weights section)
//	                the header gives, zero padding between them
//
// Float attributes are stored as their IEEE bit patterns so that NaN, the
// infinities and -0 survive exactly. Strings in weights are not supported
// (a string constant is kept as a header-side StringWeight).
//
// Decode accepts only what Encode writes: it checks the version line, the
// header length against the file, every weight's offset, length, dtype and
// shape, and the graph's structure (ir.Verify), and never panics on hostile
// bytes.
package plan

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"sort"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// FormatVersion is the plan format this package writes and reads.
const FormatVersion = 1

const versionLine = "VOUCHPLAN 1\n"

// align is the alignment of every weight in the file.
const align = 64

// ErrFormat is wrapped by every decoding error.
var ErrFormat = errors.New("plan: malformed plan")

// Plan is a decoded engine plan.
type Plan struct {
	Header Header
	// Graph is the layer graph: one node per layer (Node.Name is the
	// layer name), initializers holding the weights.
	Graph *ir.Graph
}

// Header is the JSON part of a plan.
type Header struct {
	FormatVersion int    `json:"format_version"`
	Producer      string `json:"producer"` // vouch version that built it
	// RequiredFeatures are the CPU features the plan's tactics use (e.g.
	// "avx2", "fma"); a machine without them runs the portable twins.
	RequiredFeatures []string `json:"required_features"`
	// Precision is the plan's precision label, computed from its layers
	// (Label); Decode rejects a header whose label its layers contradict.
	Precision Precision       `json:"precision,omitempty"`
	Options   json.RawMessage `json:"options,omitempty"` // compile.Options, as given
	Source    Source          `json:"source"`
	Profiles  []Profile       `json:"profiles,omitempty"`
	Graph     GraphHeader     `json:"graph"`
	Arena     *Arena          `json:"arena,omitempty"`
	// GPU is a GPU plan's kernels, build machine and layer placement
	// (format version 2, gpu.go); nil in a CPU plan.
	GPU *GPU `json:"gpu,omitempty"`
}

// Source identifies the model the plan was built from.
type Source struct {
	SHA256 string            `json:"sha256"`
	Name   string            `json:"name,omitempty"`
	Opsets map[string]int64  `json:"opsets"`
	Meta   map[string]string `json:"metadata,omitempty"`
}

// Profile is an optimization profile: per input, the min/opt/max shapes.
type Profile struct {
	Inputs map[string]ShapeRange `json:"inputs"`
}

// ShapeRange bounds an input's shape.
type ShapeRange struct {
	Min []int `json:"min"`
	Opt []int `json:"opt"`
	Max []int `json:"max"`
}

// Arena is the memory plan: every intermediate value's offset and size in
// one buffer.
type Arena struct {
	PeakBytes int64           `json:"peak_bytes"`
	Slots     map[string]Slot `json:"slots"`
}

// Slot places one value in the arena.
type Slot struct {
	Offset int64 `json:"offset"`
	Bytes  int64 `json:"bytes"`
}

// GraphHeader is a graph in the header.
type GraphHeader struct {
	Name    string        `json:"name"`
	Inputs  []ValueHeader `json:"inputs"`
	Outputs []ValueHeader `json:"outputs"`
	Layers  []Layer       `json:"layers"`
	// Init maps the graph's initializer names to weights.
	Init    []InitRef `json:"initializers"`
	Weights []Weight  `json:"weights,omitempty"` // top-level graph only: every weight
}

// InitRef binds an initializer name to a weight.
type InitRef struct {
	Name   string `json:"name"`
	Weight string `json:"weight"`
}

// ValueHeader is a graph input or output and its type.
type ValueHeader struct {
	Name  string   `json:"name"`
	DType string   `json:"dtype"`
	Shape []string `json:"shape,omitempty"` // dims: a number, a symbol, or "?"
	Rank  bool     `json:"rank_known"`
}

// Layer is one step of the plan.
type Layer struct {
	Name      string   `json:"name"`
	Kind      string   `json:"kind"`             // op type
	Domain    string   `json:"domain,omitempty"` // "" for ONNX, "vouch" for fused layers
	Version   int64    `json:"version"`
	Origin    []string `json:"origin,omitempty"` // the ONNX nodes it came from
	Tactic    string   `json:"tactic,omitempty"`
	Precision string   `json:"precision,omitempty"`
	Inputs    []string `json:"inputs"`
	Outputs   []string `json:"outputs"`
	// OutputShapes are the inferred output types, for people reading the plan.
	OutputShapes []string     `json:"output_shapes,omitempty"`
	Attrs        []AttrHeader `json:"attrs,omitempty"`
	FLOPs        int64        `json:"flops,omitempty"`
}

// AttrHeader is one attribute.
type AttrHeader struct {
	Name    string        `json:"name"`
	Kind    int           `json:"kind"`
	F       uint32        `json:"f,omitempty"` // float32 bits
	I       int64         `json:"i,omitempty"`
	S       string        `json:"s,omitempty"`
	Floats  []uint32      `json:"floats,omitempty"`
	Ints    []int64       `json:"ints,omitempty"`
	Strings []string      `json:"strings,omitempty"`
	T       string        `json:"t,omitempty"` // weight name
	Tensors []string      `json:"tensors,omitempty"`
	G       *GraphHeader  `json:"g,omitempty"`
	Graphs  []GraphHeader `json:"graphs,omitempty"`
}

// Weight locates one tensor in the weights section.
type Weight struct {
	Name    string   `json:"name"`
	DType   string   `json:"dtype"`
	Shape   []int    `json:"shape"`
	Offset  int64    `json:"offset"`
	Bytes   int64    `json:"bytes"`
	Strings []string `json:"strings,omitempty"` // string tensors live here
}

// Digest returns the hex SHA-256 of an encoded plan.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// LayerInfo carries the per-layer facts the compiler decided, keyed by
// layer (node) name, for Encode.
type LayerInfo struct {
	Origin    []string
	Tactic    string
	Precision string
	FLOPs     int64
}

// Encode serializes a plan. hdr supplies everything but Graph, which is
// built from g (layers in g's order, weights sorted by name); info adds the
// compiler's per-layer decisions. Equal inputs give equal bytes.
func Encode(hdr Header, g *ir.Graph, info map[string]LayerInfo) ([]byte, error) {
	hdr.FormatVersion = FormatVersion
	w := &weightWriter{}
	gh, err := encodeGraph(g, info, w, "")
	if err != nil {
		return nil, err
	}
	hdr.Graph = gh
	hdr.Graph.Weights = w.index
	hdr.Precision = Label(gh.Layers)
	if err := checkLabels(&hdr); err != nil {
		return nil, err
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return nil, fmt.Errorf("plan: encoding header: %w", err)
	}
	var buf bytes.Buffer
	buf.WriteString(versionLine)
	binary.Write(&buf, binary.LittleEndian, uint64(len(js)))
	buf.Write(js)
	pad(&buf)
	buf.Write(w.data.Bytes())
	return buf.Bytes(), nil
}

func pad(buf *bytes.Buffer) {
	if r := buf.Len() % align; r != 0 {
		buf.Write(make([]byte, align-r))
	}
}

type weightWriter struct {
	data  bytes.Buffer
	index []Weight
	seen  map[*tensor.Tensor]string
	names map[string]bool
}

// add stores t under name (once per tensor) and returns the weight name.
func (w *weightWriter) add(name string, t *tensor.Tensor) string {
	if w.seen == nil {
		w.seen = map[*tensor.Tensor]string{}
	}
	if n, ok := w.seen[t]; ok {
		return n
	}
	if w.names == nil {
		w.names = map[string]bool{}
	}
	for base, k := name, 1; w.names[name]; k++ {
		name = fmt.Sprintf("%s#%d", base, k)
	}
	w.names[name] = true
	w.seen[t] = name
	wt := Weight{Name: name, DType: t.DType.String(), Shape: append([]int{}, t.Shape...)}
	if wt.Shape == nil {
		wt.Shape = []int{}
	}
	if s, ok := t.Data.([]string); ok {
		wt.Strings = append([]string{}, s...)
	} else {
		pad(&w.data)
		wt.Offset = int64(w.data.Len())
		raw := tensor.RawBytes(t)
		wt.Bytes = int64(len(raw))
		w.data.Write(raw)
	}
	w.index = append(w.index, wt)
	return name
}

func encodeGraph(g *ir.Graph, info map[string]LayerInfo, w *weightWriter, prefix string) (GraphHeader, error) {
	gh := GraphHeader{Name: g.Name, Inputs: []ValueHeader{}, Outputs: []ValueHeader{}, Layers: []Layer{}}
	for _, v := range g.Inputs {
		gh.Inputs = append(gh.Inputs, valueHeader(v))
	}
	for _, v := range g.Outputs {
		gh.Outputs = append(gh.Outputs, valueHeader(v))
	}
	names := make([]string, 0, len(g.Initializers))
	for n := range g.Initializers {
		names = append(names, n)
	}
	sort.Strings(names)
	gh.Init = []InitRef{}
	for _, n := range names {
		gh.Init = append(gh.Init, InitRef{Name: n, Weight: w.add(prefix+n, g.Initializers[n])})
	}
	for i, n := range g.Nodes {
		name := n.Name
		if name == "" {
			name = fmt.Sprintf("%s%s_%d", prefix, n.OpType, i)
		}
		l := Layer{Name: name, Kind: n.OpType, Domain: n.Domain, Version: n.Version,
			Inputs: append([]string{}, n.Inputs...), Outputs: append([]string{}, n.Outputs...)}
		if li, ok := info[n.Name]; ok && prefix == "" {
			l.Origin, l.Tactic, l.Precision, l.FLOPs = li.Origin, li.Tactic, li.Precision, li.FLOPs
		}
		for _, o := range n.Outputs {
			if t, ok := g.Types[o]; ok {
				l.OutputShapes = append(l.OutputShapes, t.String())
			}
		}
		anames := make([]string, 0, len(n.Attrs))
		for k := range n.Attrs {
			anames = append(anames, k)
		}
		sort.Strings(anames)
		for _, k := range anames {
			a := n.Attrs[k]
			ah := AttrHeader{Name: a.Name, Kind: int(a.Kind), I: a.I, S: a.S, Ints: a.Ints, Strings: a.Strings, F: math.Float32bits(a.F)}
			for _, f := range a.Floats {
				ah.Floats = append(ah.Floats, math.Float32bits(f))
			}
			wprefix := fmt.Sprintf("%s%s/%s", prefix, name, a.Name)
			if a.T != nil {
				ah.T = w.add(wprefix, a.T)
			}
			for j, t := range a.Tensors {
				ah.Tensors = append(ah.Tensors, w.add(fmt.Sprintf("%s/%d", wprefix, j), t))
			}
			if a.G != nil {
				sg, err := encodeGraph(a.G, info, w, wprefix+"/")
				if err != nil {
					return gh, err
				}
				ah.G = &sg
			}
			for j, sub := range a.Graphs {
				sg, err := encodeGraph(sub, info, w, fmt.Sprintf("%s/%d/", wprefix, j))
				if err != nil {
					return gh, err
				}
				ah.Graphs = append(ah.Graphs, sg)
			}
			l.Attrs = append(l.Attrs, ah)
		}
		gh.Layers = append(gh.Layers, l)
	}
	return gh, nil
}

func valueHeader(v *ir.Value) ValueHeader {
	vh := ValueHeader{Name: v.Name, DType: v.Type.DType.String(), Rank: v.Type.RankKnown}
	for _, d := range v.Type.Shape {
		vh.Shape = append(vh.Shape, d.String())
	}
	return vh
}
