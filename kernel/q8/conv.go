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

// phases returns the source im2col reads for channel group xg
// ([Cg,H,W]) and its row length: xg itself, or for a strided convolution
// each input row split into its sw phases (written to ph), phase r of row
// iy holding x[iy, j*sw+r], so that every im2col segment is a contiguous
// copy.
func (g *geom2) phases(xg []int16, ph *[]int16) ([]int16, int) {
	if g.sw == 1 {
		return xg, g.W
	}
	Wp := (g.W + g.sw - 1) / g.sw
	W := g.sw * Wp
	src := *grow16(ph, g.Cg*g.H*W)
	for r := 0; r < g.Cg*g.H; r++ {
		xr, d := xg[r*g.W:(r+1)*g.W], src[r*W:(r+1)*W]
		for s := 0; s < g.sw; s++ {
			ds := d[s*Wp : (s+1)*Wp]
			j := 0
			for ix := s; ix < g.W; ix += g.sw {
				ds[j] = xr[ix]
				j++
			}
			clear(ds[j:])
		}
	}
	return src, W
}

// im2col writes columns [p0, p1) of the K×P matrix of a channel group
// into col (row length p1-p0), row (c, ky, kx), column (oy, ox), padding
// as 0; src and W come from phases.
func (g *geom2) im2col(src []int16, W int, col []int16, p0, p1 int) {
	n := p1 - p0
	row := 0
	for c := 0; c < g.Cg; c++ {
		xc := src[c*g.H*W : (c+1)*g.H*W]
		for ky := 0; ky < g.KH; ky++ {
			for kx := 0; kx < g.KW; kx++ {
				dst := col[row*n : (row+1)*n]
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
				// x[iy, ox*sw+off] is phase r, index ox+q.
				r := ((off % g.sw) + g.sw) % g.sw
				q := (off - r) / g.sw
				base := r * (W / g.sw)
				for oy := p0 / g.OW; oy*g.OW < p1; oy++ {
					a, b := max(p0-oy*g.OW, 0), min(p1-oy*g.OW, g.OW)
					seg := dst[oy*g.OW+a-p0 : oy*g.OW+b-p0]
					iy := oy*g.sh + ky*g.dh - g.pt
					if iy < 0 || iy >= g.H {
						clear(seg)
						continue
					}
					l := min(max(lo, a), b)
					h := max(min(hi, b), l)
					xr := xc[iy*W+base : (iy+1)*W]
					clear(seg[:l-a])
					copy(seg[l-a:h-a], xr[l+q:h+q])
					clear(seg[h-a:])
				}
			}
		}
	}
}

// Direct (implicit) unfolding for stride-1 convolutions: the quantized
// channel group is copied once into a zero-padded buffer of rows Wp wide;
// output positions are then taken on the padded grid ("virtual" position
// v = oy·Wp + ox, ox < Wp), so that row (c, ky, kx) of the K×P matrix is
// the contiguous run pad[off(c,ky,kx) + v], off = c·Hp·Wp + ky·dh·Wp +
// kx·dw, and B panels are packed straight from it without an im2col pass.
// Columns with ox ≥ OW are computed and dropped; the integer sums of the
// kept columns are those of the im2col path.

// directPads returns the padded grid (rows Hp of Wp values) and whether
// the direct path applies: stride 1, and at most a quarter of the
// virtual positions dropped.
func (g *geom2) directPads() (Hp, Wp int, ok bool) {
	if g.sh != 1 || g.sw != 1 || g.pointwise() {
		return 0, 0, false
	}
	Wp = g.OW + (g.KW-1)*g.dw
	Hp = g.OH + (g.KH-1)*g.dh
	if Wp-g.pl < g.W || Hp-g.pt < g.H || 4*(Wp-g.OW) > Wp {
		return 0, 0, false
	}
	return Hp, Wp, true
}

// padded writes channel group xg ([Cg,H,W]) into pad ([Cg,Hp,Wp] plus a
// zero tail that the last panels read past the grid) and the row offsets
// into offs (K values).
func (g *geom2) padded(xg []int16, pad []int16, offs []int, Hp, Wp int) {
	clear(pad)
	for c := 0; c < g.Cg; c++ {
		for y := 0; y < g.H; y++ {
			d := pad[(c*Hp+y+g.pt)*Wp+g.pl:]
			copy(d[:g.W], xg[(c*g.H+y)*g.W:(c*g.H+y+1)*g.W])
		}
	}
	kk := 0
	for c := 0; c < g.Cg; c++ {
		for ky := 0; ky < g.KH; ky++ {
			for kx := 0; kx < g.KW; kx++ {
				offs[kk] = c*Hp*Wp + ky*g.dh*Wp + kx*g.dw
				kk++
			}
		}
	}
}

// paddedLen is the length of the padded buffer: the grid, then the
// farthest a 16-column panel of the last virtual positions reads.
func (g *geom2) paddedLen(Hp, Wp int) int {
	return g.Cg*Hp*Wp + (g.KW-1)*g.dw + 2*tileN
}

// packDirect packs the full 16-column panels of virtual positions
// [v0, v0+16·np) straight from pad (B[kk, j] = pad[offs[kk] + v0 + j]).
func packDirect(c twins, dst []int16, pad []int16, offs []int, v0, np, k int) {
	kp := pairs(k)
	full := k / 2
	for q := 0; q < np; q++ {
		d := dst[q*kp*2*tileN : (q+1)*kp*2*tileN]
		src := pad[v0+q*tileN:]
		kk := 0
		if c.fast && full > 0 {
			// Bounds: every row read lies inside pad (paddedLen).
			_ = src[offs[2*full-1]+tileN-1]
			gatherPairs(&d[0], &src[0], &offs[0], full)
			kk = 2 * full
		}
		for ; kk < k; kk++ {
			r := src[offs[kk] : offs[kk]+tileN]
			o := d[(kk>>1)*2*tileN+kk&1:]
			for j, v := range r {
				o[2*j] = v
			}
		}
		if k&1 == 1 {
			o := d[(k>>1)*2*tileN+1:]
			for j := 0; j < tileN; j++ {
				o[2*j] = 0
			}
		}
	}
}
