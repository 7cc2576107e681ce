#include "textflag.h"

// func Deint2A(src *float32, n, rows, lds int, ev *float32, nev int, od *float32, nod, ldd int)
// Deint2Z on AVX2: for each of rows rows r (src r·lds floats on, ev and od
// r·ldd on), ev[i] = src[2i] for i < nev and od[i] = src[2i+1] for i <
// nod, reading src[0 .. n-1] only. 16 source floats a step (VSHUFPS picks
// the even and the odd lanes of each 128-bit half, VPERMPD puts the pairs
// in order) while both outputs take 8 more, then one float at a time.
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
	JG   tail
	CMPQ R10, $0
	JG   tail

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
