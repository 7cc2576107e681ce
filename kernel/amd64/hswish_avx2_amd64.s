#include "textflag.h"

// The AVX2 (8-lane, 256-bit) twins of HardSigmoidZ, HardSwishZ and
// ScaleZ: the same instructions on Y registers, so the same bits, for
// hosts without AVX-512. Each takes any n: the last partial vector is loaded and stored
// through VMASKMOVPS with the first n lanes of ymask<> (masked-off lanes
// read as 0 and are not written).

// ymask<>: eight all-ones lanes, then eight zero lanes; the 8 lanes from
// element 8-n hold n all-ones lanes first.
DATA ymask<>+0(SB)/8, $0xffffffffffffffff
DATA ymask<>+8(SB)/8, $0xffffffffffffffff
DATA ymask<>+16(SB)/8, $0xffffffffffffffff
DATA ymask<>+24(SB)/8, $0xffffffffffffffff
DATA ymask<>+32(SB)/8, $0
DATA ymask<>+40(SB)/8, $0
DATA ymask<>+48(SB)/8, $0
DATA ymask<>+56(SB)/8, $0
GLOBL ymask<>(SB), RODATA|NOPTR, $64

// TAILMASK loads the mask of the first CX (1..7) lanes into Y15.
#define TAILMASK \
	LEAQ ymask<>(SB), AX \
	MOVQ $8, DX \
	SUBQ CX, DX \
	VMOVDQU (AX)(DX*4), Y15

// HSIG(X, T) sets T = a*X + b (Y1 a, Y2 b): HardSigmoid's float32(a*x)+b,
// before the clamp.
#define HSIG(X, T) \
	VMULPS X, Y1, T \
	VADDPS Y2, T, T

// CLAMP(T) sets T = max(0, min(1, T)) with Go's min and max for a T that
// is not a NaN (Y3 +0, Y4 1): VMINPS(1, t) is t unless 1 < t, VMAXPS(0, u)
// is u unless 0 > u, so max(0, -0) is the -0 that + 0 turns into +0 (every
// other value is unchanged by + 0).
#define CLAMP(T) \
	VMINPS T, Y4, T \
	VMAXPS T, Y3, T \
	VADDPS Y3, T, T

// HSCONSTS broadcasts a and b (the frame's a+24, b+28) into Y1 and Y2,
// +0 into Y3 and 1 into Y4.
#define HSCONSTS \
	VBROADCASTSS a+24(FP), Y1 \
	VBROADCASTSS b+28(FP), Y2 \
	VXORPS Y3, Y3, Y3 \
	MOVL $0x3f800000, AX \
	MOVL AX, X4 \
	VBROADCASTSS X4, Y4

// func HardSigmoidY(x, y *float32, n int, a, b float32) int
// y[i] = max(0, min(1, float32(a*x[i])+b)) with Go's min and max
// (max(0, -0) is +0) for i < n, any n; it stops before the first group of
// 8 (the last one partial) whose float32(a*x[i])+b holds a NaN, writing
// nothing of it, and returns how many it did (n when none): the caller
// runs that group through Go's min and max.
TEXT ·HardSigmoidY(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ CX, R8
	HSCONSTS

hg4:
	// Four vectors a pass, one NaN test for all four (VCMPPS unordered
	// of two vectors is true where either lane is a NaN); a NaN sends
	// the pass to the one-vector loop, which stops at its group.
	CMPQ CX, $32
	JL   hg1
	HSIG((SI), Y5)
	HSIG(32(SI), Y6)
	HSIG(64(SI), Y7)
	HSIG(96(SI), Y8)
	VCMPPS $3, Y6, Y5, Y9
	VCMPPS $3, Y8, Y7, Y10
	VORPS Y10, Y9, Y9
	VMOVMSKPS Y9, AX
	TESTL AX, AX
	JNZ  hg1
	CLAMP(Y5)
	CLAMP(Y6)
	CLAMP(Y7)
	CLAMP(Y8)
	VMOVUPS Y5, (DI)
	VMOVUPS Y6, 32(DI)
	VMOVUPS Y7, 64(DI)
	VMOVUPS Y8, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  hg4

hg1:
	CMPQ CX, $8
	JL   hgtail
	HSIG((SI), Y5)
	VCMPPS $3, Y5, Y5, Y9
	VMOVMSKPS Y9, AX
	TESTL AX, AX
	JNZ  hgdone
	CLAMP(Y5)
	VMOVUPS Y5, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  hg1

hgtail:
	TESTQ CX, CX
	JZ   hgdone
	TAILMASK
	VMASKMOVPS (SI), Y15, Y0
	HSIG(Y0, Y5)
	VCMPPS $3, Y5, Y5, Y9
	VANDPS Y15, Y9, Y9
	VMOVMSKPS Y9, AX
	TESTL AX, AX
	JNZ  hgdone
	CLAMP(Y5)
	VMASKMOVPS Y5, Y15, (DI)
	XORQ CX, CX

hgdone:
	SUBQ CX, R8
	MOVQ R8, ret+32(FP)
	VZEROUPPER
	RET

// func HardSwishY(x, y *float32, n int, a, b float32) int
// y[i] = x[i]·h for h = max(0, min(1, float32(a*x[i])+b)) (HardSigmoidY's
// h, then the Mul's product), for i < n, any n; it stops before the first
// group of 8 (the last one partial) in which float32(a*x[i])+b is a NaN,
// writing nothing of it, and returns how many it did (n when none).
// Without NaNs the product's operand order changes nothing (x is Intel's
// src1, as in HardSwishZ).
TEXT ·HardSwishY(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ CX, R8
	HSCONSTS

hs4:
	CMPQ CX, $32
	JL   hs1
	VMOVUPS (SI), Y10
	VMOVUPS 32(SI), Y11
	VMOVUPS 64(SI), Y12
	VMOVUPS 96(SI), Y13
	HSIG(Y10, Y5)
	HSIG(Y11, Y6)
	HSIG(Y12, Y7)
	HSIG(Y13, Y8)
	VCMPPS $3, Y6, Y5, Y9
	VCMPPS $3, Y8, Y7, Y14
	VORPS Y14, Y9, Y9
	VMOVMSKPS Y9, AX
	TESTL AX, AX
	JNZ  hs1
	CLAMP(Y5)
	CLAMP(Y6)
	CLAMP(Y7)
	CLAMP(Y8)
	VMULPS Y5, Y10, Y5
	VMULPS Y6, Y11, Y6
	VMULPS Y7, Y12, Y7
	VMULPS Y8, Y13, Y8
	VMOVUPS Y5, (DI)
	VMOVUPS Y6, 32(DI)
	VMOVUPS Y7, 64(DI)
	VMOVUPS Y8, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  hs4

hs1:
	CMPQ CX, $8
	JL   hstail
	VMOVUPS (SI), Y10
	HSIG(Y10, Y5)
	VCMPPS $3, Y5, Y5, Y9
	VMOVMSKPS Y9, AX
	TESTL AX, AX
	JNZ  hsdone
	CLAMP(Y5)
	VMULPS Y5, Y10, Y5
	VMOVUPS Y5, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  hs1

hstail:
	TESTQ CX, CX
	JZ   hsdone
	TAILMASK
	VMASKMOVPS (SI), Y15, Y10
	HSIG(Y10, Y5)
	VCMPPS $3, Y5, Y5, Y9
	VANDPS Y15, Y9, Y9
	VMOVMSKPS Y9, AX
	TESTL AX, AX
	JNZ  hsdone
	CLAMP(Y5)
	VMULPS Y5, Y10, Y5
	VMASKMOVPS Y5, Y15, (DI)
	XORQ CX, CX

hsdone:
	SUBQ CX, R8
	MOVQ R8, ret+32(FP)
	VZEROUPPER
	RET

// func ScaleY(x, y *float32, n int, s float32)
// y[i] = x[i]·s for i < n, any n; the product's first operand (Intel's
// src1, whose NaN a product of two NaNs returns) is x[i], as in ScaleZ.
TEXT ·ScaleY(SB), NOSPLIT, $0-28
	MOVQ x+0(FP), SI
	MOVQ y+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSS s+24(FP), Y1

sc4:
	CMPQ CX, $32
	JL   sc1
	VMOVUPS (SI), Y5
	VMOVUPS 32(SI), Y6
	VMOVUPS 64(SI), Y7
	VMOVUPS 96(SI), Y8
	VMULPS Y1, Y5, Y5
	VMULPS Y1, Y6, Y6
	VMULPS Y1, Y7, Y7
	VMULPS Y1, Y8, Y8
	VMOVUPS Y5, (DI)
	VMOVUPS Y6, 32(DI)
	VMOVUPS Y7, 64(DI)
	VMOVUPS Y8, 96(DI)
	ADDQ $128, SI
	ADDQ $128, DI
	SUBQ $32, CX
	JMP  sc4

sc1:
	CMPQ CX, $8
	JL   sctail
	VMOVUPS (SI), Y5
	VMULPS Y1, Y5, Y5
	VMOVUPS Y5, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	SUBQ $8, CX
	JMP  sc1

sctail:
	TESTQ CX, CX
	JZ   scdone
	TAILMASK
	VMASKMOVPS (SI), Y15, Y5
	VMULPS Y1, Y5, Y5
	VMASKMOVPS Y5, Y15, (DI)

scdone:
	VZEROUPPER
	RET
