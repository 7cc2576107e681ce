#include "textflag.h"

// func DwStoreA(src *float32, lds int, dst *float32, ldd int, rows, cols int, bias, lo, hi float32)
// DwStoreZ on AVX2: dst[i*ldd+j] = v for i < rows, j < cols, with v =
// src[i*lds+j] + bias (the sum's first operand src), then v = lo > v ? lo
// : v, then v = hi < v ? hi : v. Each row in vectors of 8, the 1-7
// columns left as one more, loaded under a mask (VMASKMOVPS: nothing
// past cols is read) and stored under it too, unless the rows are
// contiguous and the whole vector ends inside them: then its lanes past
// cols fall on the next rows, which are stored after (a masked store is
// slow). A lane's operations are the same whichever vector it is in.
TEXT ·DwStoreA(SB), NOSPLIT, $0-60
	MOVQ src+0(FP), SI
	MOVQ lds+8(FP), R8
	SHLQ $2, R8
	MOVQ dst+16(FP), DI
	MOVQ ldd+24(FP), R9
	SHLQ $2, R9
	MOVQ rows+32(FP), CX
	MOVQ cols+40(FP), DX
	VBROADCASTSS bias+48(FP), Y13
	VBROADCASTSS lo+52(FP), Y14
	VBROADCASTSS hi+56(FP), Y15
	TESTQ CX, CX
	JLE  done
	TESTQ DX, DX
	JLE  done
	// BX: the columns in whole vectors; Y12 the mask of the rest.
	MOVQ DX, BX
	ANDQ $-8, BX
	MOVQ DX, AX
	ANDQ $7, AX
	SHLQ $2, AX
	LEAQ ·tailMaskA+32(SB), R10
	SUBQ AX, R10
	VMOVDQU (R10), Y12
	// R10: the end of the output rows where they are contiguous (ldd =
	// cols), else 0: a tail's whole-vector store that ends by R10 only
	// writes lanes of later rows, which are stored after it.
	XORQ R10, R10
	MOVQ DX, AX
	SHLQ $2, AX
	CMPQ AX, R9
	JNE  row
	MOVQ CX, R10
	IMULQ R9, R10
	ADDQ DI, R10

row:
	XORQ AX, AX

vec:
	CMPQ AX, BX
	JGE  tail
	VMOVUPS (SI)(AX*4), Y0
	VADDPS Y13, Y0, Y0
	VMAXPS Y0, Y14, Y0
	VMINPS Y0, Y15, Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP  vec

tail:
	CMPQ AX, DX
	JGE  next
	VMASKMOVPS (SI)(AX*4), Y12, Y0
	VADDPS Y13, Y0, Y0
	VMAXPS Y0, Y14, Y0
	VMINPS Y0, Y15, Y0
	LEAQ 32(DI)(AX*4), R11
	CMPQ R11, R10
	JA   mstore
	VMOVUPS Y0, (DI)(AX*4)
	JMP  next

mstore:
	VMASKMOVPS Y0, Y12, (DI)(AX*4)

next:
	ADDQ R8, SI
	ADDQ R9, DI
	DECQ CX
	JNZ  row

done:
	VZEROUPPER
	RET

// tailMaskA: eight lanes of -1, then eight of 0; the 32 bytes from
// tailMaskA+32-4r mask r lanes.
DATA ·tailMaskA+0(SB)/8, $-1
DATA ·tailMaskA+8(SB)/8, $-1
DATA ·tailMaskA+16(SB)/8, $-1
DATA ·tailMaskA+24(SB)/8, $-1
DATA ·tailMaskA+32(SB)/8, $0
DATA ·tailMaskA+40(SB)/8, $0
DATA ·tailMaskA+48(SB)/8, $0
DATA ·tailMaskA+56(SB)/8, $0
GLOBL ·tailMaskA(SB), RODATA|NOPTR, $64

// func CopyRowsA(src *float32, n, rows, lds int, dst *float32, ldd int)
// CopyRowsZ on AVX2: dst[r·ldd+i] = src[r·lds+i] for r < rows, i < n;
// each row in vectors of 8, the 1-7 floats left as one more loaded under
// a mask (VMASKMOVPS: nothing past n is read) and, in the last row or
// where the vector would end past it, stored under it (a masked store is
// slow); else stored whole, +0 in the lanes past n.
TEXT ·CopyRowsA(SB), NOSPLIT, $0-48
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), DX
	MOVQ rows+16(FP), CX
	MOVQ lds+24(FP), R8
	SHLQ $2, R8
	MOVQ dst+32(FP), DI
	MOVQ ldd+40(FP), R9
	SHLQ $2, R9
	TESTQ CX, CX
	JLE  cdone
	TESTQ DX, DX
	JLE  cdone
	MOVQ DX, BX
	ANDQ $-8, BX
	MOVQ DX, AX
	ANDQ $7, AX
	SHLQ $2, AX
	LEAQ ·tailMaskA+32(SB), R10
	SUBQ AX, R10
	VMOVDQU (R10), Y12
	// R10: the end of the last row's n floats; a tail's whole-vector
	// store that ends by it writes +0 past n of its row (the gap to the
	// next row, then the next rows' first floats, which are copied after).
	LEAQ -1(CX), R10
	IMULQ R9, R10
	ADDQ DI, R10
	LEAQ (R10)(DX*4), R10

crow:
	XORQ AX, AX

cvec:
	CMPQ AX, BX
	JGE  ctail
	VMOVUPS (SI)(AX*4), Y0
	VMOVUPS Y0, (DI)(AX*4)
	ADDQ $8, AX
	JMP  cvec

ctail:
	CMPQ AX, DX
	JGE  cnext
	VMASKMOVPS (SI)(AX*4), Y12, Y0
	LEAQ 32(DI)(AX*4), R11
	CMPQ R11, R10
	JA   cmstore
	VMOVUPS Y0, (DI)(AX*4)
	JMP  cnext

cmstore:
	VMASKMOVPS Y0, Y12, (DI)(AX*4)

cnext:
	ADDQ R8, SI
	ADDQ R9, DI
	DECQ CX
	JNZ  crow

cdone:
	VZEROUPPER
	RET
