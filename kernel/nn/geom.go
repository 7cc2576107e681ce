package nn

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
	"github.com/vouchml/vouch/tensor"
)

// geom is the spatial geometry of a convolution or pooling window: per
// spatial dimension the input size, kernel size, output size, stride,
// dilation and the padding before and after.
type geom struct {
	in, k, out, stride, dil, padB, padE []int
	// row is a 1-D pool's geometry as one row of a 2-D one (set by
	// poolSetup), so that the 2-D float32 MaxPool runs it.
	row *geom
}

// attrInts reads an ints attribute of length nd with a default value.
func attrInts(n *ir.Node, name string, nd, def int) ([]int, error) {
	v := n.Ints(name, nil)
	if v == nil {
		out := make([]int, nd)
		for i := range out {
			out[i] = def
		}
		return out, nil
	}
	if len(v) != nd {
		return nil, fmt.Errorf("nn: %s: attribute %s has %d values, want %d (one per spatial dimension)", n.OpType, name, len(v), nd)
	}
	return intsOf(v), nil
}

func intsOf(v []int64) []int {
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// convGeom computes a window geometry from the node's strides, dilations,
// pads and auto_pad for inputs of spatial size inSp and kernel kSp. ceil
// selects ceil_mode output sizes (pooling).
func convGeom(n *ir.Node, inSp, kSp []int, ceil bool) (*geom, error) {
	nd := len(inSp)
	g := &geom{in: inSp, k: kSp, out: make([]int, nd), padB: make([]int, nd), padE: make([]int, nd)}
	var err error
	if g.stride, err = attrInts(n, "strides", nd, 1); err != nil {
		return nil, err
	}
	if g.dil, err = attrInts(n, "dilations", nd, 1); err != nil {
		return nil, err
	}
	pads, err := attrInts(n, "pads", 2*nd, 0)
	if err != nil {
		return nil, err
	}
	for i := 0; i < nd; i++ {
		if g.stride[i] < 1 || g.dil[i] < 1 || g.k[i] < 1 {
			return nil, fmt.Errorf("nn: %s: strides %v, dilations %v and kernel %v must be positive", n.OpType, g.stride, g.dil, g.k)
		}
	}
	ap := n.String("auto_pad", "NOTSET")
	for i := 0; i < nd; i++ {
		ek := (g.k[i]-1)*g.dil[i] + 1
		switch ap {
		case "SAME_UPPER", "SAME_LOWER":
			g.out[i] = (inSp[i] + g.stride[i] - 1) / g.stride[i]
			total := max(0, (g.out[i]-1)*g.stride[i]+ek-inSp[i])
			if ap == "SAME_UPPER" {
				g.padB[i] = total / 2
			} else {
				g.padB[i] = total - total/2
			}
			g.padE[i] = total - g.padB[i]
		case "VALID":
			g.out[i] = (inSp[i]-ek)/g.stride[i] + 1
			if inSp[i] < ek {
				g.out[i] = 0
			}
		case "NOTSET", "":
			g.padB[i], g.padE[i] = pads[i], pads[nd+i]
			if g.padB[i] < 0 || g.padE[i] < 0 {
				return nil, fmt.Errorf("nn: %s: negative pads %v", n.OpType, pads)
			}
			span := inSp[i] + g.padB[i] + g.padE[i] - ek
			if span < 0 {
				return nil, fmt.Errorf("nn: %s: kernel extent %d exceeds padded input %d in spatial dimension %d", n.OpType, ek, inSp[i]+g.padB[i]+g.padE[i], i)
			}
			if ceil {
				g.out[i] = (span+g.stride[i]-1)/g.stride[i] + 1
				// The last window must start inside the input or the
				// leading padding.
				if (g.out[i]-1)*g.stride[i] >= inSp[i]+g.padB[i] {
					g.out[i]--
				}
			} else {
				g.out[i] = span/g.stride[i] + 1
			}
		default:
			return nil, fmt.Errorf("nn: %s: unknown auto_pad %q", n.OpType, ap)
		}
	}
	return g, nil
}

// taps returns, per spatial dimension d, a table t[d][kd*out[d]+od] giving
// the input coordinate that kernel tap kd reads for output od, or -1 where
// it reads padding. transpose selects ConvTranspose's relation
// (o = i*stride + kd*dil - padB) instead of convolution's
// (i = o*stride + kd*dil - padB).
func (g *geom) taps(transpose bool) [][]int {
	t := make([][]int, len(g.in))
	for d := range g.in {
		tab := make([]int, g.k[d]*g.out[d])
		for kd := 0; kd < g.k[d]; kd++ {
			for o := 0; o < g.out[d]; o++ {
				var i int
				if transpose {
					v := o + g.padB[d] - kd*g.dil[d]
					if v < 0 || v%g.stride[d] != 0 {
						i = -1
					} else {
						i = v / g.stride[d]
					}
				} else {
					i = o*g.stride[d] + kd*g.dil[d] - g.padB[d]
				}
				if i < 0 || i >= g.in[d] {
					i = -1
				}
				tab[kd*g.out[d]+o] = i
			}
		}
		t[d] = tab
	}
	return t
}

// im2col fills col (rows: channel, then kernel taps in row-major order;
// columns: output positions in row-major order) from x, which holds C
// channels of spatial size prod(g.in). Padding reads zero.
func im2col[T any](x []T, C int, g *geom, tabs [][]int, col []T) {
	nd := len(g.in)
	P, kn, inSz := prod(g.out), prod(g.k), prod(g.in)
	inStr := tensor.Strides(g.in)
	var kbuf, obuf [4]int
	kidx, oidx := kbuf[:], obuf[:]
	if nd > len(kbuf) {
		kidx, oidx = make([]int, nd), make([]int, nd)
	}
	outer := P / max(1, g.out[nd-1])
	last := g.out[nd-1]
	var zero T
	row := 0
	for c := 0; c < C; c++ {
		xc := x[c*inSz : (c+1)*inSz]
		for kp := 0; kp < kn; kp++ {
			r := kp
			for d := nd - 1; d >= 0; d-- {
				kidx[d] = r % g.k[d]
				r /= g.k[d]
			}
			dst := col[row*P : (row+1)*P]
			row++
			lt := tabs[nd-1][kidx[nd-1]*last : (kidx[nd-1]+1)*last]
			for o := 0; o < outer; o++ {
				r := o
				for d := nd - 2; d >= 0; d-- {
					oidx[d] = r % g.out[d]
					r /= g.out[d]
				}
				base, ok := 0, true
				for d := 0; d < nd-1; d++ {
					i := tabs[d][kidx[d]*g.out[d]+oidx[d]]
					if i < 0 {
						ok = false
						break
					}
					base += i * inStr[d]
				}
				seg := dst[o*last : (o+1)*last]
				if !ok {
					for j := range seg {
						seg[j] = zero
					}
					continue
				}
				for j, i := range lt {
					if i < 0 {
						seg[j] = zero
					} else {
						seg[j] = xc[base+i]
					}
				}
			}
		}
	}
}

// inferSpatial computes output spatial dims symbolically: known where the
// input dims are known.
func inferSpatial(n *ir.Node, in []ir.Dim, k []int, ceil bool) ([]ir.Dim, error) {
	sp := make([]int, len(in))
	for i, d := range in {
		if !d.Known() {
			return unknownDims(len(in)), nil
		}
		sp[i] = int(d.Value)
	}
	g, err := convGeom(n, sp, k, ceil)
	if err != nil {
		return nil, err
	}
	out := make([]ir.Dim, len(in))
	for i, o := range g.out {
		out[i] = ir.Fixed(o)
	}
	return out, nil
}
