#include "textflag.h"

// func ScaleShiftZ(x, y *float32, n int, a, b float32, relu int)
// y[i] = float32(x[i]*a) + b, and, when relu is not 0, y[i] = 0 where
// y[i] < 0 (an ordered compare: NaN and -0 pass), for i < n (n a multiple
// of 16). AVX-512F.
TEXT ·ScaleShiftZ(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Z1
	VBROADCASTSS b+28(FP), Z2
	MOVQ relu+32(FP), AX
	VXORPS Z3, Z3, Z3
	TESTQ AX, AX
	JNZ  rl

pl:
	CMPQ CX, $16
	JL   done
	VMULPS (SI), Z1, Z0
	VADDPS Z2, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  pl

rl:
	CMPQ CX, $16
	JL   done
	VMULPS (SI), Z1, Z0
	VADDPS Z2, Z0, Z0
	VCMPPS $1, Z3, Z0, K1
	VMOVAPS Z3, K1, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  rl

done:
	VZEROUPPER
	RET

// func ScaleShift(x, y *float32, n int, a, b float32, relu int)
// ScaleShiftZ's arithmetic in 8-lane AVX2 (n a multiple of 8): VMULPS then
// VADDPS, no FMA, as the portable float32(x*a) + b; the Relu is VMAXPS
// with +0 as the first source and y as the second, 0 > y ? 0 : y, which is
// the portable y < 0 test (NaN and -0 pass). 32 floats per iteration
// while they last, then 8.
TEXT ·ScaleShift(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSS a+24(FP), Y1
	VBROADCASTSS b+28(FP), Y2
	MOVQ relu+32(FP), AX
	VXORPS Y3, Y3, Y3
	TESTQ AX, AX
	JNZ  yrl4

ypl4:
	CMPQ CX, $32
	JL   ypl
	VMULPS (SI), Y1, Y4
	VMULPS 32(SI), Y1, Y5
	VMULPS 64(SI), Y1, Y6
	VMULPS 96(SI), Y1, Y7
	VADDPS Y2, Y4, Y4
	VADDPS Y2, Y5, Y5
	VADDPS Y2, Y6, Y6
	VADDPS Y2, Y7, Y7
	VMOVUPS Y4, (DI)
	VMOVUPS Y5, 32(DI)
	VMOVUPS Y6, 64(DI)
	VMOVUPS Y7, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  ypl4

ypl:
	CMPQ CX, $8
	JL   ydone
	VMULPS (SI), Y1, Y4
	VADDPS Y2, Y4, Y4
	VMOVUPS Y4, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  ypl

yrl4:
	CMPQ CX, $32
	JL   yrl
	VMULPS (SI), Y1, Y4
	VMULPS 32(SI), Y1, Y5
	VMULPS 64(SI), Y1, Y6
	VMULPS 96(SI), Y1, Y7
	VADDPS Y2, Y4, Y4
	VADDPS Y2, Y5, Y5
	VADDPS Y2, Y6, Y6
	VADDPS Y2, Y7, Y7
	VMAXPS Y4, Y3, Y4
	VMAXPS Y5, Y3, Y5
	VMAXPS Y6, Y3, Y6
	VMAXPS Y7, Y3, Y7
	VMOVUPS Y4, (DI)
	VMOVUPS Y5, 32(DI)
	VMOVUPS Y6, 64(DI)
	VMOVUPS Y7, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  yrl4

yrl:
	CMPQ CX, $8
	JL   ydone
	VMULPS (SI), Y1, Y4
	VADDPS Y2, Y4, Y4
	VMAXPS Y4, Y3, Y4
	VMOVUPS Y4, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  yrl

ydone:
	VZEROUPPER
	RET
