package q8

import "unsafe"

// The u8 × s7 path: on a CPU with AVX2 but without VNNI, a layer whose
// plan declares 7-bit weights (AttrWeightBits 7: every weight in [−63,
// 63], checked when the layer is parsed) runs the linear layers' rows
// tiles and the pointwise convolutions' cols tiles of vnni.go, with
// their packings, shifts and corrections, through the AVX2 tiles of
// vnni7_amd64.s (gen_vnni7.py): VPMADDUBSW's int16 pair sums of
// u8 × s7 products cannot saturate (2·255·63 < 2¹⁵), VPMADDWD against
// ones adds a quad's two pairs exactly into int32, VPADDD wraps as Go's
// int32 does. The sums are the exact integers of every other path, so
// the output bits are those of the portable twins, of the int16 GEMM and
// of the VPDPBUSD tiles. twins.s7 is set per call, only for such a layer
// (layer.compute): these tiles never see 8-bit weights, on which a pair
// of products (up to 2·255·127) would saturate.

// tile7 computes rr (1..4) rows by 64 lanes of sums over kq k-quads
// with the AVX2 tiles: cols false is rowsTile (b: rr activation rows,
// pan: the weights' panel, init one value per lane), cols true is
// colsTile (b: rr weight rows, pan: the activations' panel, init one
// value per row).
func tile7(cols bool, rr, kq int, b unsafe.Pointer, ldb int, pan unsafe.Pointer, init []int32, acc []int32) {
	if kq == 0 {
		for r := 0; r < rr; r++ {
			a := acc[r*vnniCols : (r+1)*vnniCols]
			for j := range a {
				if cols {
					a[j] = init[r]
				} else {
					a[j] = init[j]
				}
			}
		}
		return
	}
	k := 0
	if cols {
		k = 1
	}
	for r0 := 0; r0 < rr; r0 += 2 {
		f := q7Tiles[k][min(2, rr-r0)-1]
		for h := 0; h < 2; h++ {
			var in *int32
			if cols {
				in = &init[r0]
			} else {
				in = &init[h*vnniCols/2]
			}
			f(kq, (*uint8)(unsafe.Add(b, r0*ldb)), ldb, (*int8)(unsafe.Add(pan, h*vnniCols/2*4)), in, &acc[r0*vnniCols+h*vnniCols/2])
		}
	}
}
