#include "textflag.h"

// The body of SiLUZ for one vector: Z0 holds x; leaves x·Sigmoid(x) (or
// Sigmoid(x)·x: MUL_ORDER) in Z1. Z16-Z30 hold the constants (see SiLUZ).
// Sigmoid32(x) = 1/(1 + Exp32(-x)), Exp32's steps one by one: t = -x,
// n = RoundEven32(float32(t·log2e)), r = FMA(n, -ln2Hi, t), r = FMA(n,
// -ln2Lo, r), Horner's p, y = FMA(p, r·r, r) + 1, then Ldexp32(y, n) as one
// VSCALEFPS (y·2^n rounded once: Ldexp32's two products are exact but
// the last); t > expMax gives +Inf, t < expMin +0, a NaN t itself.
#define SILU_BODY(MUL) \
	VXORPS Z29, Z0, Z5 \
	VMULPS Z16, Z5, Z2 \
	VRNDSCALEPS $0, Z2, Z2 \
	VMOVAPS Z5, Z3 \
	VFMADD231PS Z17, Z2, Z3 \
	VFMADD231PS Z18, Z2, Z3 \
	VMOVAPS Z19, Z1 \
	VFMADD213PS Z20, Z3, Z1 \
	VFMADD213PS Z21, Z3, Z1 \
	VFMADD213PS Z22, Z3, Z1 \
	VFMADD213PS Z23, Z3, Z1 \
	VFMADD213PS Z24, Z3, Z1 \
	VMULPS Z3, Z3, Z4 \
	VFMADD213PS Z3, Z4, Z1 \
	VADDPS Z27, Z1, Z1 \
	VSCALEFPS Z2, Z1, Z1 \
	VCMPPS $17, Z26, Z5, K2 \
	VMOVAPS Z30, K2, Z1 \
	VCMPPS $30, Z25, Z5, K3 \
	VMOVAPS Z28, K3, Z1 \
	VCMPPS $3, Z5, Z5, K4 \
	VMOVAPS Z5, K4, Z1 \
	VADDPS Z27, Z1, Z1 \
	VDIVPS Z1, Z27, Z1 \
	MUL

// x·s: the product's first operand (Intel's src1, whose NaN a product of
// two NaNs returns) is x; s·x: it is s.
#define MUL_XS VMULPS Z1, Z0, Z1
#define MUL_SX VMULPS Z0, Z1, Z1

// func SiLUZ(x, y *float32, n int, tab *[SiLUConsts]float32, sigFirst bool)
TEXT ·SiLUZ(SB), NOSPLIT, $0-33
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ tab+24(FP), R8
	MOVBLZX sigFirst+32(FP), R9
	VBROADCASTSS 0(R8), Z16
	VBROADCASTSS 4(R8), Z17
	VBROADCASTSS 8(R8), Z18
	VBROADCASTSS 12(R8), Z19
	VBROADCASTSS 16(R8), Z20
	VBROADCASTSS 20(R8), Z21
	VBROADCASTSS 24(R8), Z22
	VBROADCASTSS 28(R8), Z23
	VBROADCASTSS 32(R8), Z24
	VBROADCASTSS 36(R8), Z25
	VBROADCASTSS 40(R8), Z26
	VBROADCASTSS 44(R8), Z27
	VBROADCASTSS 48(R8), Z28
	VBROADCASTSS 52(R8), Z29
	VXORPS Z30, Z30, Z30
	TESTQ R9, R9
	JNZ sx

xs_loop:
	CMPQ CX, $16
	JL xs_tail
	VMOVUPS (SI), Z0
	SILU_BODY(MUL_XS)
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP xs_loop

xs_tail:
	TESTQ CX, CX
	JZ done
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Z0
	SILU_BODY(MUL_XS)
	VMOVUPS Z1, K1, (DI)
	JMP done

sx:
sx_loop:
	CMPQ CX, $16
	JL sx_tail
	VMOVUPS (SI), Z0
	SILU_BODY(MUL_SX)
	VMOVUPS Z1, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP sx_loop

sx_tail:
	TESTQ CX, CX
	JZ done
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Z0
	SILU_BODY(MUL_SX)
	VMOVUPS Z1, K1, (DI)

done:
	VZEROUPPER
	RET

// func HardSwishZ(x, y *float32, n int, a, b float32) int
// y[i] = x[i]·h for h = max(0, min(1, float32(a*x[i])+b)) (HardSigmoidZ's
// h, then the Mul's product), for i < n, any n (the last partial vector
// masked); it stops before the first group of 16 in which float32(a*x[i])+b
// is a NaN, writing nothing of it, and returns how many it did (n when
// none). Without NaNs the product's operand order changes nothing.
TEXT ·HardSwishZ(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ CX, R8
	VBROADCASTSS a+24(FP), Z1
	VBROADCASTSS b+28(FP), Z2
	VXORPS Z3, Z3, Z3
	MOVL $0x3f800000, AX
	VPBROADCASTD AX, Z4

hsloop:
	CMPQ CX, $16
	JL   hstail
	VMOVUPS (SI), Z5
	VMULPS Z5, Z1, Z0
	VADDPS Z2, Z0, Z0
	VCMPPS $3, Z0, Z0, K2
	KORTESTW K2, K2
	JNZ  hsdone
	VMINPS Z0, Z4, Z0
	VMAXPS Z0, Z3, Z0
	VADDPS Z3, Z0, Z0
	VMULPS Z0, Z5, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  hsloop

hstail:
	TESTQ CX, CX
	JZ   hsdone
	MOVQ CX, R9
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Z5
	VMULPS Z5, Z1, Z0
	VADDPS Z2, Z0, Z0
	VCMPPS $3, Z0, Z0, K2
	KORTESTW K2, K2
	JNZ  hsdone
	VMINPS Z0, Z4, Z0
	VMAXPS Z0, Z3, Z0
	VADDPS Z3, Z0, Z0
	VMULPS Z0, Z5, Z0
	VMOVUPS Z0, K1, (DI)
	XORQ CX, CX

hsdone:
	SUBQ CX, R8
	MOVQ R8, ret+32(FP)
	VZEROUPPER
	RET

// func ScaleZ(x, y *float32, n int, s float32)
// y[i] = x[i]·s for i < n, any n (the last partial vector masked); the
// product's first operand (Intel's src1, whose NaN a product of two NaNs
// returns) is x[i].
TEXT ·ScaleZ(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSS s+24(FP), Z1

sc16:
	CMPQ CX, $16
	JL   sctail
	VMOVUPS (SI), Z0
	VMULPS Z1, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  sc16

sctail:
	TESTQ CX, CX
	JZ   scdone
	MOVL $1, AX
	SHLL CX, AX
	DECL AX
	KMOVW AX, K1
	VMOVUPS.Z (SI), K1, Z0
	VMULPS Z1, Z0, Z0
	VMOVUPS Z0, K1, (DI)

scdone:
	VZEROUPPER
	RET
