package amd64

import (
	"math"
	"math/rand"
	"testing"
)

// TestDeint2A checks Deint2A against the loop it stands for, bit for bit,
// over row lengths of 0 to 80 (odd ones, whole vectors and tails), every
// split of them into even and odd outputs up to the row's, several rows
// with gaps between them, and source floats of random bits (NaNs with
// payloads among them); every float around the outputs must keep its
// sentinel, but for the up to 7 after a row but the last, which may be
// +0 (where nothing else is stored there). With AVX-512 it checks Deint2Z on the same cases.
func TestDeint2A(t *testing.T) {
	if !Enabled {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewSource(2))
	const sentinel = 0x7f812345 // a signalling NaN no source float is
	for it := 0; it < 3000; it++ {
		n := r.Intn(81)
		rows := 1 + r.Intn(4)
		lds := n + r.Intn(5)
		nev := r.Intn((n+1)/2 + 1)
		nod := r.Intn(n/2 + 1)
		if it%3 == 0 {
			nev, nod = (n+1)/2, n/2
		}
		ldd := max(nev, nod) + r.Intn(4)
		src := make([]uint32, rows*lds+1)
		for i := range src {
			src[i] = r.Uint32()
			if i%7 == 3 {
				src[i] = 0x7f800000 | src[i]&0x807fffff // NaN or infinity
			}
			if src[i] == sentinel {
				src[i] = 0
			}
		}
		for _, z := range []bool{false, true} {
			if z && !EnabledZ {
				continue
			}
			// ev and od each with ldd·rows floats and 16 either side.
			ev := make([]uint32, rows*ldd+32)
			od := make([]uint32, rows*ldd+32)
			for i := range ev {
				ev[i], od[i] = sentinel, sentinel
			}
			want := append([]uint32(nil), ev...)
			wantOd := append([]uint32(nil), od...)
			for row := 0; row < rows; row++ {
				for i := 0; i < nev; i++ {
					want[16+row*ldd+i] = src[row*lds+2*i]
				}
				for i := 0; i < nod; i++ {
					wantOd[16+row*ldd+i] = src[row*lds+2*i+1]
				}
			}
			sf, ef, of := floats(src), floats(ev), floats(od)
			if z {
				Deint2Z(&sf[0], n, rows, lds, &ef[16], nev, &of[16], nod, ldd, &Deint2Idx)
			} else {
				Deint2A(&sf[0], n, rows, lds, &ef[16], nev, &of[16], nod, ldd)
			}
			for i := range ev {
				ev[i], od[i] = math.Float32bits(ef[i]), math.Float32bits(of[i])
			}
			// Deint2A may store +0 in the up to 7 floats after a row's
			// outputs, but the last row's, that no row's outputs cover.
			mayZ := func(i, k int) bool {
				o := i - 16
				if z || o < 0 || o >= (rows-1)*ldd+k {
					return false
				}
				r, c := o/ldd, o%ldd
				if c >= k && c < k+7 {
					return true
				}
				return r > 0 && c < k+7-ldd // the lanes past a row's end on the next
			}
			for i := range ev {
				okEv := ev[i] == want[i] || ev[i] == 0 && mayZ(i, nev)
				okOd := od[i] == wantOd[i] || od[i] == 0 && mayZ(i, nod)
				if !okEv || !okOd {
					t.Fatalf("z %v, n %d rows %d lds %d nev %d nod %d ldd %d: ev[%d] %#x (want %#x), od %#x (want %#x)",
						z, n, rows, lds, nev, nod, ldd, i-16, ev[i], want[i], od[i], wantOd[i])
				}
			}
		}
	}
}

// floats returns u's bits as float32s.
func floats(u []uint32) []float32 {
	f := make([]float32, len(u))
	for i, v := range u {
		f[i] = math.Float32frombits(v)
	}
	return f
}

// TestDwTapsMA checks DwTapsMA against DwTapsA channel by channel, bit for
// bit: random tap counts and offsets, weight and output strides with
// gaps, inputs and weights with zeros of both signs, infinities and NaNs
// (canonicalised, as DwTapsA does); the floats between the channels'
// outputs must keep their sentinel.
func TestDwTapsMA(t *testing.T) {
	if !Enabled {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewSource(3))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()),
		math.Float32frombits(0x7fa00001), math.Float32frombits(0xffc00123)}
	val := func(p float64) float32 {
		if r.Float64() < p {
			return special[r.Intn(len(special))]
		}
		return float32(r.NormFloat64())
	}
	for it := 0; it < 500; it++ {
		n := 16 * (1 + r.Intn(10))
		taps := 1 + r.Intn(80)
		span := 1 + r.Intn(300)
		offs := make([]int32, taps)
		for i := range offs {
			offs[i] = int32(r.Intn(span))
		}
		x := make([]float32, span+n)
		for i := range x {
			x[i] = val(0.02 * float64(it%3))
		}
		ldw := taps + r.Intn(5)
		w := make([]float32, 3*ldw+taps)
		for i := range w {
			w[i] = val(0.01 * float64(it%2))
		}
		ldy := n + r.Intn(20)
		y := make([]float32, 3*ldy+n+16)
		for i := range y {
			y[i] = math.Float32frombits(0x7f812345)
		}
		DwTapsMA(n, taps, &offs[0], &w[0], ldw, &x[0], &y[0], ldy)
		want := make([]float32, n)
		for j := 0; j < 4; j++ {
			DwTapsA(n, taps, &offs[0], &w[j*ldw], &x[0], &want[0])
			for i := 0; i < n; i++ {
				if g := math.Float32bits(y[j*ldy+i]); g != math.Float32bits(want[i]) {
					t.Fatalf("n %d taps %d: channel %d y[%d] = %#x, DwTapsA %#x", n, taps, j, i, g, math.Float32bits(want[i]))
				}
			}
			if j < 3 {
				for i := n; i < ldy; i++ {
					if math.Float32bits(y[j*ldy+i]) != 0x7f812345 {
						t.Fatalf("n %d ldy %d: channel %d wrote y[%d]", n, ldy, j, i)
					}
				}
			}
		}
		for i := 3*ldy + n; i < len(y); i++ {
			if math.Float32bits(y[i]) != 0x7f812345 {
				t.Fatalf("wrote past the last channel's outputs")
			}
		}
	}
}

// TestCopyRowsA checks CopyRowsA against the loop it stands for, bit for
// bit (NaN payloads too), over row lengths of 0 to 40 and gaps between
// the rows; every float around the copies must keep its sentinel, but
// for the up to 7 after a row but the last, which may be +0.
func TestCopyRowsA(t *testing.T) {
	if !Enabled {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewSource(4))
	const sentinel = 0x7f812345
	for it := 0; it < 2000; it++ {
		n, rows := r.Intn(41), 1+r.Intn(5)
		lds, ldd := n+r.Intn(9), n+r.Intn(9)
		src := make([]uint32, rows*lds+1)
		for i := range src {
			if src[i] = r.Uint32(); src[i] == sentinel {
				src[i] = 0
			}
		}
		dst := make([]uint32, rows*ldd+32)
		for i := range dst {
			dst[i] = sentinel
		}
		want := append([]uint32(nil), dst...)
		for row := 0; row < rows; row++ {
			copy(want[16+row*ldd:16+row*ldd+n], src[row*lds:row*lds+n])
		}
		// The floats up to 7 after a row but the last that no row's copy
		// covers may be +0.
		mayZero := make([]bool, len(dst))
		for row := 0; row < rows-1; row++ {
			for i := n; i < n+7 && row*ldd+i < (rows-1)*ldd+n; i++ {
				if o := row*ldd + i; o%ldd >= n {
					mayZero[16+o] = true
				}
			}
		}
		sf, df := floats(src), floats(dst)
		CopyRowsA(&sf[0], n, rows, lds, &df[16], ldd)
		for i := range df {
			if g := math.Float32bits(df[i]); g != want[i] && !(mayZero[i] && g == 0) {
				t.Fatalf("n %d rows %d lds %d ldd %d: dst[%d] = %#x, want %#x", n, rows, lds, ldd, i-16, g, want[i])
			}
		}
	}
}

// TestDwStoreA checks DwStoreA against its definition in Go, bit for bit:
// column counts of 1 to 40 (whole vectors and masked tails), gaps between
// the rows and none, sources with NaN payloads, infinities and zeros of both
// signs, biases of both signs (-0 among them), clamps and none; every
// float around the outputs must keep its sentinel.
func TestDwStoreA(t *testing.T) {
	if !Enabled {
		t.Skip("no AVX2")
	}
	r := rand.New(rand.NewSource(5))
	const sentinel = 0x7f812345
	inf := float32(math.Inf(1))
	special := []float32{0, float32(math.Copysign(0, -1)), inf, -inf, math.Float32frombits(0x7fa00001), math.Float32frombits(0xffc00123)}
	for it := 0; it < 2000; it++ {
		cols, rows := 1+r.Intn(40), 1+r.Intn(5)
		lds, ldd := cols+r.Intn(9), cols+r.Intn(9)
		if it%3 == 0 {
			ldd = cols // contiguous rows: the tails' whole-vector stores
		}
		src := make([]float32, rows*lds)
		for i := range src {
			src[i] = float32(r.NormFloat64())
			if r.Intn(8) == 0 {
				src[i] = special[r.Intn(len(special))]
			}
		}
		bias := []float32{float32(math.Copysign(0, -1)), 0, float32(r.NormFloat64())}[it%3]
		lo, hi := -inf, inf
		if it%2 == 0 {
			lo, hi = 0, 6
		}
		dst := make([]float32, rows*ldd+32)
		for i := range dst {
			dst[i] = math.Float32frombits(sentinel)
		}
		want := make([]uint32, len(dst))
		for i := range want {
			want[i] = sentinel
		}
		for i := 0; i < rows; i++ {
			for j := 0; j < cols; j++ {
				v := src[i*lds+j] + bias
				if lo > v {
					v = lo
				}
				if hi < v {
					v = hi
				}
				want[16+i*ldd+j] = math.Float32bits(v)
			}
		}
		DwStoreA(&src[0], lds, &dst[16], ldd, rows, cols, bias, lo, hi)
		for i := range dst {
			if g := math.Float32bits(dst[i]); g != want[i] {
				t.Fatalf("cols %d rows %d lds %d ldd %d bias %g: dst[%d] = %#x, want %#x", cols, rows, lds, ldd, bias, i-16, g, want[i])
			}
		}
	}
}
