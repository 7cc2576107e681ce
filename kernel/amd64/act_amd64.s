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

// SILU4_BODY is SILU_BODY for the four vectors in Z0, Z6, Z12 and Z18,
// its steps interleaved, up to the product: leaves the four Sigmoids in
// Z1, Z7, Z13 and Z19 (the constants as SiLUZ's four-vector pass holds
// them).
#define SILU4_BODY \
	VXORPS Z24, Z0, Z5 \
	VXORPS Z24, Z6, Z11 \
	VXORPS Z24, Z12, Z17 \
	VXORPS Z24, Z18, Z23 \
	VMULPS Z25, Z5, Z2 \
	VMULPS Z25, Z11, Z8 \
	VMULPS Z25, Z17, Z14 \
	VMULPS Z25, Z23, Z20 \
	VRNDSCALEPS $0, Z2, Z2 \
	VRNDSCALEPS $0, Z8, Z8 \
	VRNDSCALEPS $0, Z14, Z14 \
	VRNDSCALEPS $0, Z20, Z20 \
	VMOVAPS Z5, Z3 \
	VMOVAPS Z11, Z9 \
	VMOVAPS Z17, Z15 \
	VMOVAPS Z23, Z21 \
	VFMADD231PS Z26, Z2, Z3 \
	VFMADD231PS Z26, Z8, Z9 \
	VFMADD231PS Z26, Z14, Z15 \
	VFMADD231PS Z26, Z20, Z21 \
	VFMADD231PS Z27, Z2, Z3 \
	VFMADD231PS Z27, Z8, Z9 \
	VFMADD231PS Z27, Z14, Z15 \
	VFMADD231PS Z27, Z20, Z21 \
	VBROADCASTSS 12(R8), Z1 \
	VBROADCASTSS 12(R8), Z7 \
	VBROADCASTSS 12(R8), Z13 \
	VBROADCASTSS 12(R8), Z19 \
	VFMADD213PS.BCST 16(R8), Z3, Z1 \
	VFMADD213PS.BCST 16(R8), Z9, Z7 \
	VFMADD213PS.BCST 16(R8), Z15, Z13 \
	VFMADD213PS.BCST 16(R8), Z21, Z19 \
	VFMADD213PS.BCST 20(R8), Z3, Z1 \
	VFMADD213PS.BCST 20(R8), Z9, Z7 \
	VFMADD213PS.BCST 20(R8), Z15, Z13 \
	VFMADD213PS.BCST 20(R8), Z21, Z19 \
	VFMADD213PS.BCST 24(R8), Z3, Z1 \
	VFMADD213PS.BCST 24(R8), Z9, Z7 \
	VFMADD213PS.BCST 24(R8), Z15, Z13 \
	VFMADD213PS.BCST 24(R8), Z21, Z19 \
	VFMADD213PS.BCST 28(R8), Z3, Z1 \
	VFMADD213PS.BCST 28(R8), Z9, Z7 \
	VFMADD213PS.BCST 28(R8), Z15, Z13 \
	VFMADD213PS.BCST 28(R8), Z21, Z19 \
	VFMADD213PS.BCST 32(R8), Z3, Z1 \
	VFMADD213PS.BCST 32(R8), Z9, Z7 \
	VFMADD213PS.BCST 32(R8), Z15, Z13 \
	VFMADD213PS.BCST 32(R8), Z21, Z19 \
	VMULPS Z3, Z3, Z4 \
	VMULPS Z9, Z9, Z10 \
	VMULPS Z15, Z15, Z16 \
	VMULPS Z21, Z21, Z22 \
	VFMADD213PS Z3, Z4, Z1 \
	VFMADD213PS Z9, Z10, Z7 \
	VFMADD213PS Z15, Z16, Z13 \
	VFMADD213PS Z21, Z22, Z19 \
	VADDPS Z28, Z1, Z1 \
	VADDPS Z28, Z7, Z7 \
	VADDPS Z28, Z13, Z13 \
	VADDPS Z28, Z19, Z19 \
	VSCALEFPS Z2, Z1, Z1 \
	VSCALEFPS Z8, Z7, Z7 \
	VSCALEFPS Z14, Z13, Z13 \
	VSCALEFPS Z20, Z19, Z19 \
	VCMPPS $17, Z30, Z5, K1 \
	VCMPPS $17, Z30, Z11, K2 \
	VCMPPS $17, Z30, Z17, K3 \
	VCMPPS $17, Z30, Z23, K4 \
	VMOVAPS Z31, K1, Z1 \
	VMOVAPS Z31, K2, Z7 \
	VMOVAPS Z31, K3, Z13 \
	VMOVAPS Z31, K4, Z19 \
	VCMPPS $30, Z29, Z5, K1 \
	VCMPPS $30, Z29, Z11, K2 \
	VCMPPS $30, Z29, Z17, K3 \
	VCMPPS $30, Z29, Z23, K4 \
	VBROADCASTSS 48(R8), K1, Z1 \
	VBROADCASTSS 48(R8), K2, Z7 \
	VBROADCASTSS 48(R8), K3, Z13 \
	VBROADCASTSS 48(R8), K4, Z19 \
	VCMPPS $3, Z5, Z5, K1 \
	VCMPPS $3, Z11, Z11, K2 \
	VCMPPS $3, Z17, Z17, K3 \
	VCMPPS $3, Z23, Z23, K4 \
	VMOVAPS Z5, K1, Z1 \
	VMOVAPS Z11, K2, Z7 \
	VMOVAPS Z17, K3, Z13 \
	VMOVAPS Z23, K4, Z19 \
	VADDPS Z28, Z1, Z1 \
	VADDPS Z28, Z7, Z7 \
	VADDPS Z28, Z13, Z13 \
	VADDPS Z28, Z19, Z19 \
	VDIVPS Z1, Z28, Z1 \
	VDIVPS Z7, Z28, Z7 \
	VDIVPS Z13, Z28, Z13 \
	VDIVPS Z19, Z28, Z19

// func SiLUZ(x, y *float32, n int, tab *[SiLUConsts]float32, sigFirst bool)
TEXT ·SiLUZ(SB), NOSPLIT, $0-33
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ tab+24(FP), R8
	MOVBLZX sigFirst+32(FP), R9
	// Four vectors a pass while 64 values are left: SILU_BODY's steps
	// for each, interleaved (SILU4_BODY; one vector's chain alone waits
	// on latency: 8192 values 3.7 us, 1.9 with two vectors, 1.7 with
	// four), Z24-Z31 holding the sign mask, log2e, -ln2Hi, -ln2Lo, 1,
	// expMax, expMin and +0, the other constants broadcast from the
	// table; the same operations, so the same bits.
	CMPQ CX, $64
	JL   silu1
	VBROADCASTSS 52(R8), Z24
	VBROADCASTSS 0(R8), Z25
	VBROADCASTSS 4(R8), Z26
	VBROADCASTSS 8(R8), Z27
	VBROADCASTSS 44(R8), Z28
	VBROADCASTSS 36(R8), Z29
	VBROADCASTSS 40(R8), Z30
	VXORPS Z31, Z31, Z31
	TESTQ R9, R9
	JNZ  sx4_loop
xs4_loop:
	CMPQ CX, $64
	JL   silu1
	VMOVUPS 0(SI), Z0
	VMOVUPS 64(SI), Z6
	VMOVUPS 128(SI), Z12
	VMOVUPS 192(SI), Z18
	SILU4_BODY
	VMULPS Z1, Z0, Z1
	VMULPS Z7, Z6, Z7
	VMULPS Z13, Z12, Z13
	VMULPS Z19, Z18, Z19
	VMOVUPS Z1, 0(DI)
	VMOVUPS Z7, 64(DI)
	VMOVUPS Z13, 128(DI)
	VMOVUPS Z19, 192(DI)
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $64, CX
	JMP  xs4_loop

sx4_loop:
	CMPQ CX, $64
	JL   silu1
	VMOVUPS 0(SI), Z0
	VMOVUPS 64(SI), Z6
	VMOVUPS 128(SI), Z12
	VMOVUPS 192(SI), Z18
	SILU4_BODY
	VMULPS Z0, Z1, Z1
	VMULPS Z6, Z7, Z7
	VMULPS Z12, Z13, Z13
	VMULPS Z18, Z19, Z19
	VMOVUPS Z1, 0(DI)
	VMOVUPS Z7, 64(DI)
	VMOVUPS Z13, 128(DI)
	VMOVUPS Z19, 192(DI)
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $64, CX
	JMP  sx4_loop

silu1:
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
