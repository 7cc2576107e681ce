#include "textflag.h"

// func DwStoreZ(src *float32, lds int, dst *float32, ldd int, rows, cols int, bias, lo, hi float32)
// dst[i*ldd+j] = v for i < rows, j < cols, with v = src[i*lds+j] + bias
// (the sum's first operand src), then v = lo > v ? lo : v, then v = hi < v
// ? hi : v (Epi's bounds). AVX-512F; each row in vectors of 16, the last
// one masked.
TEXT ·DwStoreZ(SB), NOSPLIT, $0-60
	MOVQ src+0(FP), SI
	MOVQ lds+8(FP), R8
	SHLQ $2, R8
	MOVQ dst+16(FP), DI
	MOVQ ldd+24(FP), R9
	SHLQ $2, R9
	MOVQ rows+32(FP), CX
	MOVQ cols+40(FP), DX
	VBROADCASTSS bias+48(FP), Z13
	VBROADCASTSS lo+52(FP), Z14
	VBROADCASTSS hi+56(FP), Z15
	TESTQ CX, CX
	JLE  done
	TESTQ DX, DX
	JLE  done
	// K1: the last vector's lanes (cols mod 16, or all 16).
	MOVQ DX, BX
	ANDQ $15, BX
	MOVL $0xffff, AX
	JZ   full
	MOVL $1, AX
	MOVQ CX, R11
	MOVQ BX, CX
	SHLL CX, AX
	MOVQ R11, CX
	DECL AX

full:
	KMOVW AX, K1
	// BX: the columns before the last vector.
	MOVQ DX, BX
	DECQ BX
	ANDQ $-16, BX

row:
	XORQ AX, AX

vec:
	CMPQ AX, BX
	JGE  last
	VMOVUPS (SI)(AX*4), Z0
	VADDPS Z13, Z0, Z0
	VMAXPS Z0, Z14, Z0
	VMINPS Z0, Z15, Z0
	VMOVUPS Z0, (DI)(AX*4)
	ADDQ $16, AX
	JMP  vec

last:
	VMOVUPS.Z (SI)(AX*4), K1, Z0
	VADDPS Z13, Z0, Z0
	VMAXPS Z0, Z14, Z0
	VMINPS Z0, Z15, Z0
	VMOVUPS Z0, K1, (DI)(AX*4)
	ADDQ R8, SI
	ADDQ R9, DI
	DECQ CX
	JNZ  row

done:
	VZEROUPPER
	RET

// LANES sets K to the mask of the first min(max(R, 0), 16) lanes (R is
// kept; CX and AX are clobbered).
#define LANES(R, K) \
	MOVQ R, CX \
	CMPQ CX, $16 \
	JLE  2(PC) \
	MOVQ $16, CX \
	TESTQ CX, CX \
	JGE  2(PC) \
	XORQ CX, CX \
	MOVL $1, AX \
	SHLL CX, AX \
	DECL AX \
	KMOVW AX, K

// func Deint2Z(src *float32, n, rows, lds int, ev *float32, nev int, od *float32, nod, ldd int, idx *[32]int32)
// For each of rows rows r (src r·lds floats on, ev and od r·ldd on):
// ev[i] = src[2i] for i < nev and od[i] = src[2i+1] for i < nod, reading
// src[0 .. n-1] only (masked loads). idx holds 0, 2, ..., 30 then 1, 3,
// ..., 31. AVX-512F; 32 source floats a step.
TEXT ·Deint2Z(SB), NOSPLIT, $8-80
	MOVQ idx+72(FP), R11
	VMOVDQU32 0(R11), Z30
	VMOVDQU32 64(R11), Z31
	MOVQ rows+16(FP), BX
	TESTQ BX, BX
	JLE  done
	MOVQ src+0(FP), R13
	MOVQ ev+32(FP), R11
	MOVQ od+48(FP), AX
	MOVQ AX, odrow-8(SP)

row:
	MOVQ R13, SI
	MOVQ R11, DI
	MOVQ odrow-8(SP), DX
	MOVQ n+8(FP), R8
	MOVQ nev+40(FP), R9
	MOVQ nod+56(FP), R10

step:
	CMPQ R9, $0
	JG   go
	CMPQ R10, $0
	JLE  next

go:
	LANES(R8, K1)
	MOVQ R8, R12
	SUBQ $16, R12
	LANES(R12, K2)
	VMOVUPS.Z 0(SI), K1, Z0
	VMOVUPS.Z 64(SI), K2, Z1
	VMOVAPS Z30, Z2
	VPERMI2PS Z1, Z0, Z2
	VMOVAPS Z31, Z3
	VPERMI2PS Z1, Z0, Z3
	LANES(R9, K3)
	VMOVUPS Z2, K3, (DI)
	LANES(R10, K4)
	VMOVUPS Z3, K4, (DX)
	ADDQ $128, SI
	ADDQ $64, DI
	ADDQ $64, DX
	SUBQ $32, R8
	SUBQ $16, R9
	SUBQ $16, R10
	JMP  step

next:
	MOVQ lds+24(FP), AX
	LEAQ (R13)(AX*4), R13
	MOVQ ldd+64(FP), AX
	LEAQ (R11)(AX*4), R11
	MOVQ odrow-8(SP), CX
	LEAQ (CX)(AX*4), CX
	MOVQ CX, odrow-8(SP)
	DECQ BX
	JNZ  row

done:
	VZEROUPPER
	RET

// func CopyRowsZ(src *float32, n, rows, lds int, dst *float32, ldd int)
// dst[r·ldd+i] = src[r·lds+i] for r < rows, i < n. AVX-512F; each row in
// vectors of 16, the last one masked.
TEXT ·CopyRowsZ(SB), NOSPLIT, $0-48
	MOVQ src+0(FP), SI
	MOVQ n+8(FP), DX
	MOVQ rows+16(FP), BX
	MOVQ lds+24(FP), R8
	SHLQ $2, R8
	MOVQ dst+32(FP), DI
	MOVQ ldd+40(FP), R9
	SHLQ $2, R9
	TESTQ BX, BX
	JLE  cdone
	TESTQ DX, DX
	JLE  cdone
	// K1: the last vector's lanes; R10: the columns before it.
	MOVQ DX, CX
	ANDQ $15, CX
	MOVL $0xffff, AX
	JZ   cfull
	MOVL $1, AX
	SHLL CX, AX
	DECL AX

cfull:
	KMOVW AX, K1
	MOVQ DX, R10
	DECQ R10
	ANDQ $-16, R10

crow:
	XORQ AX, AX

cvec:
	CMPQ AX, R10
	JGE  clast
	VMOVUPS (SI)(AX*4), Z0
	VMOVUPS Z0, (DI)(AX*4)
	ADDQ $16, AX
	JMP  cvec

clast:
	VMOVUPS.Z (SI)(AX*4), K1, Z0
	VMOVUPS Z0, K1, (DI)(AX*4)
	ADDQ R8, SI
	ADDQ R9, DI
	DECQ BX
	JNZ  crow

cdone:
	VZEROUPPER
	RET
