#include "textflag.h"

// func DwTapsZ(n, taps int, offs *int32, w *float32, x *float32, y *float32)
// y[i] = canon of the chain acc = FMA(x[offs[t]+i], w[t], acc) over
// t < taps ascending from +0, for i < n (n a multiple of 16, taps >= 1).
// AVX-512F; four zmm accumulators (64 outputs) per pass, then one.
TEXT ·DwTapsZ(SB), NOSPLIT, $0-48
	MOVQ n+0(FP), CX
	MOVQ taps+8(FP), R8
	MOVQ offs+16(FP), R9
	MOVQ w+24(FP), R10
	MOVQ x+32(FP), SI
	MOVQ y+40(FP), DI
	MOVL $0x7fc00000, AX
	VPBROADCASTD AX, Z31

b64:
	CMPQ CX, $64
	JL   b16
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	XORQ R11, R11

l64:
	MOVLQSX (R9)(R11*4), R12
	VBROADCASTSS (R10)(R11*4), Z8
	LEAQ (SI)(R12*4), R13
	VFMADD231PS 0(R13), Z8, Z0
	VFMADD231PS 64(R13), Z8, Z1
	VFMADD231PS 128(R13), Z8, Z2
	VFMADD231PS 192(R13), Z8, Z3
	INCQ R11
	CMPQ R11, R8
	JL   l64
	VCMPPS $3, Z0, Z0, K1
	VMOVAPS Z31, K1, Z0
	VCMPPS $3, Z1, Z1, K1
	VMOVAPS Z31, K1, Z1
	VCMPPS $3, Z2, Z2, K1
	VMOVAPS Z31, K1, Z2
	VCMPPS $3, Z3, Z3, K1
	VMOVAPS Z31, K1, Z3
	VMOVUPS Z0, 0(DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	ADDQ $256, SI
	ADDQ $256, DI
	SUBQ $64, CX
	JMP  b64

b16:
	CMPQ CX, $16
	JL   done
	VXORPS Z0, Z0, Z0
	XORQ R11, R11

l16:
	MOVLQSX (R9)(R11*4), R12
	VBROADCASTSS (R10)(R11*4), Z8
	VFMADD231PS (SI)(R12*4), Z8, Z0
	INCQ R11
	CMPQ R11, R8
	JL   l16
	VCMPPS $3, Z0, Z0, K1
	VMOVAPS Z31, K1, Z0
	VMOVUPS Z0, 0(DI)
	ADDQ $64, SI
	ADDQ $64, DI
	SUBQ $16, CX
	JMP  b16

done:
	VZEROUPPER
	RET
