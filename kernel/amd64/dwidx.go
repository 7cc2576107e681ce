package amd64

// Deint2Idx is Deint2Z's permutation: the even lanes of two vectors, then
// the odd ones.
var Deint2Idx = [32]int32{0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
	1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31}
