#include "textflag.h"

// func DwStoreA(src *float32, lds int, dst *float32, ldd int, rows, cols int, bias, lo, hi float32)
// DwStoreZ on AVX2: dst[i*ldd+j] = v for i < rows, j < cols, with v =
// src[i*lds+j] + bias (the sum's first operand src), then v = lo > v ? lo
// : v, then v = hi < v ? hi : v. Each row in vectors of 8, the columns
// left one at a time with the scalar forms of the same instructions.
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
	// BX: the columns in whole vectors.
	MOVQ DX, BX
	ANDQ $-8, BX

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
	VMOVSS (SI)(AX*4), X0
	VADDSS X13, X0, X0
	VMAXSS X0, X14, X0
	VMINSS X0, X15, X0
	VMOVSS X0, (DI)(AX*4)
	INCQ AX
	JMP  tail

next:
	ADDQ R8, SI
	ADDQ R9, DI
	DECQ CX
	JNZ  row

done:
	VZEROUPPER
	RET
