#include "textflag.h"

// func HardSigmoidZ(x, y *float32, n int, a, b float32) int
// y[i] = max(0, min(1, float32(a*x[i])+b)) with Go's min and max
// (max(0, -0) is +0), for i < n (n a multiple of 16), and returns n; it
// stops before the first group of 16 whose float32(a*x[i])+b holds a NaN,
// writing nothing of it, and returns how many it did (Go's min and max
// pick the NaN they return in their own way: the caller runs that group
// through them).
// AVX-512F: VMINPS(1, t) keeps t where t is NaN (the second operand),
// VMAXPS(0, u) likewise, and + 0 turns the -0 that VMAXPS keeps into +0
// (every other value, NaN included, is unchanged by + 0).
TEXT ·HardSigmoidZ(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ CX, R8
	VBROADCASTSS a+24(FP), Z1
	VBROADCASTSS b+28(FP), Z2
	VXORPS Z3, Z3, Z3
	MOVL $0x3f800000, AX
	VPBROADCASTD AX, Z4

loop:
	CMPQ CX, $16
	JL   done
	VMULPS (SI), Z1, Z0
	VADDPS Z2, Z0, Z0
	VCMPPS $3, Z0, Z0, K2
	KORTESTW K2, K2
	JNZ  done
	VMINPS Z0, Z4, Z0
	VMAXPS Z0, Z3, Z0
	VADDPS Z3, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  loop

done:
	SUBQ CX, R8
	MOVQ R8, ret+32(FP)
	VZEROUPPER
	RET
