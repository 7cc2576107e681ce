#include "textflag.h"

// MASKOF sets Y to the mask of the first R lanes (0 <= R <= 8;
// ·tailMaskA's), clobbering R and CX.
#define MASKOF(R, Y) \
	SHLQ $2, R \
	LEAQ ·tailMaskA+32(SB), CX \
	SUBQ R, CX \
	VMOVDQU (CX), Y

// func Deint2A(src *float32, n, rows, lds int, ev *float32, nev int, od *float32, nod, ldd int)
// Deint2Z on AVX2: for each of rows rows r (src r·lds floats on, ev and od
// r·ldd on), ev[i] = src[2i] for i < nev and od[i] = src[2i+1] for i <
// nod, reading src[0 .. n-1] only. 16 source floats a step (VSHUFPS picks
// the even and the odd lanes of each 128-bit half, VPERMPD puts the pairs
// in order) while both outputs take 8 more, then, in a row but the last
// (lds >= 16, ldd >= 8), one more such step storing +0 in the (up to 7)
// lanes past nev and nod, else one float at a time.
TEXT ·Deint2A(SB), NOSPLIT, $0-72
	MOVQ rows+16(FP), BX
	TESTQ BX, BX
	JLE  done
	MOVQ src+0(FP), R13
	MOVQ ev+32(FP), R11
	MOVQ od+48(FP), R12

row:
	MOVQ R13, SI
	MOVQ R11, DI
	MOVQ R12, DX
	MOVQ n+8(FP), R8
	MOVQ nev+40(FP), R9
	MOVQ nod+56(FP), R10

vec:
	CMPQ R8, $16
	JL   tail
	CMPQ R9, $8
	JL   tail
	CMPQ R10, $8
	JL   tail
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VSHUFPS $0x88, Y1, Y0, Y2
	VSHUFPS $0xDD, Y1, Y0, Y3
	VPERMPD $0xD8, Y2, Y2
	VPERMPD $0xD8, Y3, Y3
	VMOVUPS Y2, (DI)
	VMOVUPS Y3, (DX)
	ADDQ $64, SI
	ADDQ $32, DI
	ADDQ $32, DX
	SUBQ $16, R8
	SUBQ $8, R9
	SUBQ $8, R10
	JMP  vec

tail:
	// A row but the last, each output at most 8 more: one more step of
	// whole vectors, reading into the next row (lds >= 16) and storing +0
	// in the lanes past nev and nod, which fall on padding or on the
	// next rows' outputs (ldd >= 8), stored after.
	MOVQ R9, AX
	ORQ  R10, AX
	JEQ  rowdone
	CMPQ BX, $1
	JLE  tscalar
	CMPQ R9, $8
	JG   tscalar
	CMPQ R10, $8
	JG   tscalar
	MOVQ lds+24(FP), AX
	CMPQ AX, $16
	JL   tscalar
	MOVQ ldd+64(FP), AX
	CMPQ AX, $8
	JL   tscalar
	MOVQ R9, AX
	CMPQ AX, $0
	JGE  tpos1
	XORQ AX, AX

tpos1:
	MASKOF(AX, Y6)
	MOVQ R10, AX
	CMPQ AX, $0
	JGE  tpos2
	XORQ AX, AX

tpos2:
	MASKOF(AX, Y7)
	VMOVUPS 0(SI), Y0
	VMOVUPS 32(SI), Y1
	VSHUFPS $0x88, Y1, Y0, Y2
	VSHUFPS $0xDD, Y1, Y0, Y3
	VPERMPD $0xD8, Y2, Y2
	VPERMPD $0xD8, Y3, Y3
	VANDPS Y6, Y2, Y2
	VANDPS Y7, Y3, Y3
	CMPQ R9, $0
	JLE  tvod
	VMOVUPS Y2, (DI)

tvod:
	CMPQ R10, $0
	JLE  rowdone
	VMOVUPS Y3, (DX)
	JMP  rowdone

tscalar:
	CMPQ R9, $0
	JLE  todd
	MOVL 0(SI), AX
	MOVL AX, (DI)

todd:
	CMPQ R10, $0
	JLE  tnext
	MOVL 4(SI), AX
	MOVL AX, (DX)

tnext:
	ADDQ $8, SI
	ADDQ $4, DI
	ADDQ $4, DX
	DECQ R9
	DECQ R10
	CMPQ R9, $0
	JG   tscalar
	CMPQ R10, $0
	JG   tscalar

rowdone:
	MOVQ lds+24(FP), AX
	LEAQ (R13)(AX*4), R13
	MOVQ ldd+64(FP), AX
	LEAQ (R11)(AX*4), R11
	LEAQ (R12)(AX*4), R12
	DECQ BX
	JNZ  row

done:
	VZEROUPPER
	RET

// func DwTapsMA(n, taps int, offs *int32, w *float32, ldw int, x *float32, y *float32, ldy int)
// DwTapsA for four output channels that read the same taps (a grouped
// convolution's): y[j·ldy+i] = canon of the chain acc = FMA(x[offs[t]+i],
// w[j·ldw+t], acc) over t < taps ascending from +0, j < 4, i < n (n a
// multiple of 16, taps >= 1). 16 outputs of the four channels per pass:
// eight accumulators, each tap's two input vectors loaded once for all
// four channels (DwTapsA loads them once per channel).
TEXT ·DwTapsMA(SB), NOSPLIT, $0-64
	MOVQ n+0(FP), CX
	MOVQ taps+8(FP), R8
	MOVQ offs+16(FP), R9
	MOVQ w+24(FP), R10
	MOVQ ldw+32(FP), R11
	SHLQ $2, R11
	MOVQ x+40(FP), SI
	MOVQ y+48(FP), DI
	MOVQ ldy+56(FP), DX
	SHLQ $2, DX
	MOVL $0x7fc00000, AX
	MOVL AX, X15
	VBROADCASTSS X15, Y15

mblk:
	CMPQ CX, $16
	JL   mdone
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	XORQ BX, BX
mtap:
	MOVLQSX (R9)(BX*4), AX
	LEAQ (SI)(AX*4), R13
	VMOVUPS 0(R13), Y8
	VMOVUPS 32(R13), Y9
	LEAQ (R10)(BX*4), AX
	VBROADCASTSS (AX), Y10
	VBROADCASTSS (AX)(R11*1), Y11
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y10, Y1
	VFMADD231PS Y8, Y11, Y2
	VFMADD231PS Y9, Y11, Y3
	LEAQ (AX)(R11*2), AX
	VBROADCASTSS (AX), Y10
	VBROADCASTSS (AX)(R11*1), Y11
	VFMADD231PS Y8, Y10, Y4
	VFMADD231PS Y9, Y10, Y5
	VFMADD231PS Y8, Y11, Y6
	VFMADD231PS Y9, Y11, Y7
	INCQ BX
	CMPQ BX, R8
	JL   mtap
	VCMPPS $3, Y0, Y0, Y13
	VBLENDVPS Y13, Y15, Y0, Y0
	VCMPPS $3, Y1, Y1, Y13
	VBLENDVPS Y13, Y15, Y1, Y1
	VCMPPS $3, Y2, Y2, Y13
	VBLENDVPS Y13, Y15, Y2, Y2
	VCMPPS $3, Y3, Y3, Y13
	VBLENDVPS Y13, Y15, Y3, Y3
	VCMPPS $3, Y4, Y4, Y13
	VBLENDVPS Y13, Y15, Y4, Y4
	VCMPPS $3, Y5, Y5, Y13
	VBLENDVPS Y13, Y15, Y5, Y5
	VCMPPS $3, Y6, Y6, Y13
	VBLENDVPS Y13, Y15, Y6, Y6
	VCMPPS $3, Y7, Y7, Y13
	VBLENDVPS Y13, Y15, Y7, Y7
	VMOVUPS Y0, 0(DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 0(DI)(DX*1)
	VMOVUPS Y3, 32(DI)(DX*1)
	LEAQ (DI)(DX*2), R12
	VMOVUPS Y4, 0(R12)
	VMOVUPS Y5, 32(R12)
	VMOVUPS Y6, 0(R12)(DX*1)
	VMOVUPS Y7, 32(R12)(DX*1)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  mblk

mdone:
	VZEROUPPER
	RET
