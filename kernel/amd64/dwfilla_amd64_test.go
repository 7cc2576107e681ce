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
// sentinel. With AVX-512 it checks Deint2Z on the same cases.
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
			for i := range ev {
				if ev[i] != want[i] || od[i] != wantOd[i] {
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
