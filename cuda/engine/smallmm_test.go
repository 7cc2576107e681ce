package engine

import (
	"math/rand"
	"testing"
)

// BERT-base's products at batch 1 (128 rows) underfill an H200's 132 SMs
// on SGEMM's tiles and take the conv tiles; at batch 64 (8,192 rows) they
// keep SGEMM.
func TestUnderfills(t *testing.T) {
	for _, c := range []struct {
		m, n int
		want bool
	}{
		{128, 2304, true}, {128, 768, true}, {128, 3072, true}, // batch 1: 18, 6, 24 blocks of 128x128
		{8192, 2304, false}, {8192, 768, false}, {8192, 3072, false}, // batch 64
		{64, 100, true}, {1000, 1000, false}, // 64x64 tiles: 2 and 256 blocks
		{11 * 128, 12 * 128, false}, {11 * 128, 11 * 128, true}, // 132 and 121 blocks
	} {
		if got := underfills(c.m, c.n, 132); got != c.want {
			t.Errorf("underfills(%d, %d, 132) = %v, want %v", c.m, c.n, got, c.want)
		}
	}
}

func TestTransposed(t *testing.T) {
	r := rand.New(rand.NewSource(5))
	for range 50 {
		rows, cols := 1+r.Intn(9), 1+r.Intn(9)
		b := make([]float32, rows*cols)
		for i := range b {
			b[i] = r.Float32()
		}
		bt := Transposed(b, rows, cols)
		for i := range rows {
			for j := range cols {
				if bt[j*rows+i] != b[i*cols+j] {
					t.Fatalf("%dx%d: [%d,%d] moved wrong", rows, cols, i, j)
				}
			}
		}
	}
}
