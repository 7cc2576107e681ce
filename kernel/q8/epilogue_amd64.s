#include "textflag.h"

// func epiRow(y *float32, acc *int32, n int, m, b float32, res *float32, relu int)
//
// For n/8 groups of 8: t = float32(acc)·m (rounded), t = t + b, then
// t = t + res[i] when res is not nil, then t = (0 > t) ? 0 : t when relu
// is 1 — the operations of epilogueRow, in its order.
TEXT ·epiRow(SB), NOSPLIT, $0-48
	MOVQ y+0(FP), DI
	MOVQ acc+8(FP), SI
	MOVQ n+16(FP), CX
	VBROADCASTSS m+24(FP), Y1
	VBROADCASTSS b+28(FP), Y2
	MOVQ res+32(FP), DX
	MOVQ relu+40(FP), AX
	VXORPS Y3, Y3, Y3
	SHRQ $3, CX
	JZ edone
	TESTQ DX, DX
	JNZ eres
	TESTQ AX, AX
	JNZ erelu
eplain:
	VCVTDQ2PS (SI), Y0
	VMULPS Y1, Y0, Y0
	VADDPS Y2, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ eplain
	JMP edone
erelu:
	VCVTDQ2PS (SI), Y0
	VMULPS Y1, Y0, Y0
	VADDPS Y2, Y0, Y0
	VMAXPS Y0, Y3, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ erelu
	JMP edone
eres:
	TESTQ AX, AX
	JNZ eresrelu
eres0:
	VCVTDQ2PS (SI), Y0
	VMULPS Y1, Y0, Y0
	VADDPS Y2, Y0, Y0
	VADDPS (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, DX
	DECQ CX
	JNZ eres0
	JMP edone
eresrelu:
	VCVTDQ2PS (SI), Y0
	VMULPS Y1, Y0, Y0
	VADDPS Y2, Y0, Y0
	VADDPS (DX), Y0, Y0
	VMAXPS Y0, Y3, Y0
	VMOVUPS Y0, (DI)
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, DX
	DECQ CX
	JNZ eresrelu
edone:
	VZEROUPPER
	RET
