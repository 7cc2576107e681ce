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
