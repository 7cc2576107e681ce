package q8

import (
	"fmt"

	"github.com/vouchml/vouch/ir"
)

// geom2 is a 2-D convolution's geometry.
type geom2 struct {
	N, C, H, W, M, G, Cg, Mg int
	KH, KW, OH, OW           int
	sh, sw, dh, dw, pt, pl   int
}

func (g *geom2) K() int { return g.Cg * g.KH * g.KW }
func (g *geom2) P() int { return g.OH * g.OW }

func (g *geom2) pointwise() bool {
	return g.KH == 1 && g.KW == 1 && g.sh == 1 && g.sw == 1 && g.pt == 0 && g.pl == 0 && g.OH == g.H && g.OW == g.W
}

func ints2(n *ir.Node, name string, def int) ([2]int, error) {
	v := n.Ints(name, nil)
	if v == nil {
		return [2]int{def, def}, nil
	}
	if len(v) != 2 {
		return [2]int{}, fmt.Errorf("q8: Conv: attribute %s has %d values, want 2", name, len(v))
	}
	return [2]int{int(v[0]), int(v[1])}, nil
}

// convGeom validates X [N,C,H,W] and W [M,C/group,KH,KW] against the
// node's Conv attributes (ONNX semantics, 2-D only).
func convGeom(n *ir.Node, x, w []int) (*geom2, error) {
	if len(x) != 4 || len(w) != 4 {
		return nil, fmt.Errorf("q8: Conv: int8 layers are 2-D: X %v, W %v", x, w)
	}
	g := &geom2{N: x[0], C: x[1], H: x[2], W: x[3], M: w[0], KH: w[2], KW: w[3], G: int(n.Int("group", 1))}
	if g.G < 1 || g.C%g.G != 0 || g.M%g.G != 0 {
		return nil, fmt.Errorf("q8: Conv: group %d must divide channels %d and %d", g.G, g.C, g.M)
	}
	g.Cg, g.Mg = g.C/g.G, g.M/g.G
	if w[1] != g.Cg {
		return nil, fmt.Errorf("q8: Conv: W %v has %d input channels per group, want %d", w, w[1], g.Cg)
	}
	if ks := n.Ints("kernel_shape", nil); ks != nil && (len(ks) != 2 || int(ks[0]) != g.KH || int(ks[1]) != g.KW) {
		return nil, fmt.Errorf("q8: Conv: kernel_shape %v does not match W %v", ks, w)
	}
	st, err := ints2(n, "strides", 1)
	if err != nil {
		return nil, err
	}
	dl, err := ints2(n, "dilations", 1)
	if err != nil {
		return nil, err
	}
	g.sh, g.sw, g.dh, g.dw = st[0], st[1], dl[0], dl[1]
	if g.sh < 1 || g.sw < 1 || g.dh < 1 || g.dw < 1 || g.KH < 1 || g.KW < 1 {
		return nil, fmt.Errorf("q8: Conv: strides %v, dilations %v and kernel %v must be positive", st, dl, w[2:])
	}
	pads := n.Ints("pads", nil)
	if pads == nil {
		pads = make([]int64, 4)
	}
	if len(pads) != 4 {
		return nil, fmt.Errorf("q8: Conv: pads has %d values, want 4", len(pads))
	}
	in, k, s, d := [2]int{g.H, g.W}, [2]int{g.KH, g.KW}, st, dl
	var out, pb [2]int
	ap := n.String("auto_pad", "NOTSET")
	for i := 0; i < 2; i++ {
		ek := (k[i]-1)*d[i] + 1
		switch ap {
		case "SAME_UPPER", "SAME_LOWER":
			out[i] = (in[i] + s[i] - 1) / s[i]
			total := max(0, (out[i]-1)*s[i]+ek-in[i])
			pb[i] = total / 2
			if ap == "SAME_LOWER" {
				pb[i] = total - total/2
			}
		case "VALID":
			out[i] = 0
			if in[i] >= ek {
				out[i] = (in[i]-ek)/s[i] + 1
			}
		case "NOTSET", "":
			b, e := int(pads[i]), int(pads[i+2])
			if b < 0 || e < 0 {
				return nil, fmt.Errorf("q8: Conv: negative pads %v", pads)
			}
			span := in[i] + b + e - ek
			if span < 0 {
				return nil, fmt.Errorf("q8: Conv: kernel extent %d exceeds padded input %d", ek, in[i]+b+e)
			}
			out[i], pb[i] = span/s[i]+1, b
		default:
			return nil, fmt.Errorf("q8: Conv: unknown auto_pad %q", ap)
		}
	}
	g.OH, g.OW, g.pt, g.pl = out[0], out[1], pb[0], pb[1]
	if g.K() > MaxK {
		return nil, fmt.Errorf("q8: Conv: reduction length %d exceeds the int8 kernel's bound %d", g.K(), MaxK)
	}
	return g, nil
}

// im2col writes the K×P matrix of channel group xg ([Cg,H,W] int16) into
// col, row (c, ky, kx), column (oy, ox), padding as 0.
func (g *geom2) im2col(xg, col []int16) {
	P := g.P()
	row := 0
	for c := 0; c < g.Cg; c++ {
		xc := xg[c*g.H*g.W : (c+1)*g.H*g.W]
		for ky := 0; ky < g.KH; ky++ {
			for kx := 0; kx < g.KW; kx++ {
				dst := col[row*P : (row+1)*P]
				row++
				off := kx*g.dw - g.pl
				lo := 0
				if off < 0 {
					lo = (-off + g.sw - 1) / g.sw
				}
				hi := 0
				if last := g.W - 1 - off; last >= 0 {
					hi = min(g.OW, last/g.sw+1)
				}
				lo = min(lo, hi)
				for oy := 0; oy < g.OH; oy++ {
					seg := dst[oy*g.OW : (oy+1)*g.OW]
					iy := oy*g.sh + ky*g.dh - g.pt
					if iy < 0 || iy >= g.H {
						clear(seg)
						continue
					}
					xr := xc[iy*g.W : (iy+1)*g.W]
					clear(seg[:lo])
					if g.sw == 1 {
						copy(seg[lo:hi], xr[lo+off:hi+off])
					} else {
						for ox := lo; ox < hi; ox++ {
							seg[ox] = xr[ox*g.sw+off]
						}
					}
					clear(seg[hi:])
				}
			}
		}
	}
}
