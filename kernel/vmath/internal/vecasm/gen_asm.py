#!/usr/bin/env python3
"""Generates vec_amd64.s and consts.go (go generate ./kernel/vmath/internal/vecasm).

Each routine is the lane-wise transcription of a scalar function in
kernel/vmath: every scalar float32 operation becomes the same packed
operation (MULPS, ADDPS, SUBPS, DIVPS, VFMADD = FMA32, VROUNDPS mode 0 =
RoundEven32, exponent-bit construction = Ldexp32), the range branches
become compares and blends, evaluated lane by lane in the scalar order.
Lanes of a branch that the scalar code does not take compute values that
are then discarded. Constants come from a table the caller builds from the
scalar code's own constants (one 32-byte broadcast row per constant).
"""
import re

CONSTS = [
    # Exp32
    'Log2e', 'NegLn2Hi', 'NegLn2Lo', 'ExpP0', 'ExpP1', 'ExpP2', 'ExpP3', 'ExpP4', 'ExpP5',
    'ExpMax', 'ExpMin', 'Inf', 'I127', 'IM126',
    # shared
    'One', 'Two', 'Half', 'Sign', 'Abs',
    # Tanh32
    'TanhP0', 'TanhP1', 'TanhP2', 'TanhP3', 'TanhP4', 'TanhSmall', 'TanhBig',
    # Erf32
    'ErfS0', 'ErfS1', 'ErfS2', 'ErfS3', 'ErfS4', 'ErfS5', 'ErfScale', 'ErfSmall', 'ErfBig',
    'ErfT', 'ErfA0', 'ErfA1', 'ErfA2', 'ErfA3', 'ErfA4',
    # Gelu
    'GeluRsqrt2', 'GeluK', 'GeluC',
]
IDX = {c: i for i, c in enumerate(CONSTS)}

L = []
a = L.append


def K(name):
    return f'{32*IDX[name]}(R8)'


LT, GE, GT, UNORD = 0x11, 0x1d, 0x1e, 3


def exp_core(x, out, t1, t2, t3):
    """out = the polynomial and Ldexp32 of Exp32(x), without the range
    branches. x is left intact unless t3 == x (t3 is written last)."""
    a(f'\tVMULPS {K("Log2e")}, {x}, {t1}')           # float32(x * log2e)
    a(f'\tVROUNDPS $0, {t1}, {t1}')                  # n = RoundEven32
    a(f'\tVMOVAPS {x}, {t2}')
    a(f'\tVFMADD231PS {K("NegLn2Hi")}, {t1}, {t2}')  # r = FMA32(n, -ln2Hi, x)
    a(f'\tVFMADD231PS {K("NegLn2Lo")}, {t1}, {t2}')  # r = FMA32(n, -ln2Lo, r)
    a(f'\tVMOVUPS {K("ExpP0")}, {out}')
    for i in range(1, 6):
        a(f'\tVFMADD213PS {K(f"ExpP{i}")}, {t2}, {out}')  # p = FMA32(p, r, c)
    a(f'\tVMULPS {t2}, {t2}, {t3}')                  # r2 = float32(r * r)
    a(f'\tVFMADD213PS {t2}, {t3}, {out}')            # y = FMA32(p, r2, r)
    a(f'\tVADDPS {K("One")}, {out}, {out}')          # y = y + 1
    # Ldexp32(y, n) = (y * 2^n1) * 2^n2, n1 = clamp(n, -126, 127), n2 = n - n1:
    # the scalar's one multiplication when n2 = 0 (times 1 is exact), its
    # two steps otherwise.
    a(f'\tVCVTTPS2DQ {t1}, {t1}')
    a(f'\tVPMINSD {K("I127")}, {t1}, {t2}')
    a(f'\tVPMAXSD {K("IM126")}, {t2}, {t2}')
    a(f'\tVPSUBD {t2}, {t1}, {t1}')
    a(f'\tVPADDD {K("I127")}, {t2}, {t2}')
    a(f'\tVPSLLD $23, {t2}, {t2}')
    a(f'\tVMULPS {t2}, {out}, {out}')
    a(f'\tVPADDD {K("I127")}, {t1}, {t1}')
    a(f'\tVPSLLD $23, {t1}, {t1}')
    a(f'\tVMULPS {t1}, {out}, {out}')


def exp_full(x, out, t1, t2, t3):
    """out = Exp32(x) with its branches: NaN -> x, > expMax -> +Inf,
    < expMin -> 0."""
    exp_core(x, out, t1, t2, t3)
    a(f'\tVCMPPS ${LT}, {K("ExpMin")}, {x}, {t1}')
    a(f'\tVANDNPS {out}, {t1}, {out}')
    a(f'\tVCMPPS ${GT}, {K("ExpMax")}, {x}, {t1}')
    a(f'\tVBLENDVPS {t1}, {K("Inf")}, {out}, {out}')
    a(f'\tVCMPPS ${UNORD}, {x}, {x}, {t1}')
    a(f'\tVBLENDVPS {t1}, {x}, {out}, {out}')


def body_exp():
    exp_full('Y0', 'Y1', 'Y2', 'Y3', 'Y4')
    return 'Y1'


def body_sigmoid():
    # 1 / (1 + Exp32(-x))
    a(f'\tVXORPS {K("Sign")}, Y0, Y5')
    exp_full('Y5', 'Y1', 'Y2', 'Y3', 'Y4')
    a(f'\tVADDPS {K("One")}, Y1, Y1')
    a(f'\tVMOVUPS {K("One")}, Y2')
    a('\tVDIVPS Y1, Y2, Y1')
    return 'Y1'


def body_tanh():
    """Tanh32 of Y0 into Y4; uses Y1-Y7."""
    a(f'\tVANDPS {K("Abs")}, Y0, Y1')                 # a = |x|
    # |x| < 0.625: FMA32(float32(p*z), x, x), z = x*x
    a('\tVMULPS Y0, Y0, Y2')
    a(f'\tVMOVUPS {K("TanhP0")}, Y3')
    for i in range(1, 5):
        a(f'\tVFMADD213PS {K(f"TanhP{i}")}, Y2, Y3')
    a('\tVMULPS Y2, Y3, Y3')
    a('\tVFMADD213PS Y0, Y0, Y3')
    # otherwise: e = Exp32(a + a); t = 1 - 2/(e+1); -t for x < 0
    a('\tVADDPS Y1, Y1, Y2')
    exp_core('Y2', 'Y4', 'Y5', 'Y6', 'Y2')
    a(f'\tVADDPS {K("One")}, Y4, Y4')
    a(f'\tVMOVUPS {K("Two")}, Y5')
    a('\tVDIVPS Y4, Y5, Y5')
    a(f'\tVMOVUPS {K("One")}, Y4')
    a('\tVSUBPS Y5, Y4, Y4')
    a(f'\tVANDPS {K("Sign")}, Y0, Y5')
    a('\tVXORPS Y5, Y4, Y4')
    # |x| > 9.01: Copysign(1, x)
    a(f'\tVORPS {K("One")}, Y5, Y5')
    a(f'\tVCMPPS ${GT}, {K("TanhBig")}, Y1, Y6')
    a('\tVBLENDVPS Y6, Y5, Y4, Y4')
    a(f'\tVCMPPS ${LT}, {K("TanhSmall")}, Y1, Y6')
    a('\tVBLENDVPS Y6, Y3, Y4, Y4')
    a(f'\tVCMPPS ${UNORD}, Y0, Y0, Y6')
    a('\tVBLENDVPS Y6, Y0, Y4, Y4')
    return 'Y4'


def body_erf():
    """Erf32 of Y0 into Y5; uses Y1-Y7."""
    a(f'\tVANDPS {K("Abs")}, Y0, Y1')                 # a = |x|
    # |x| < 0.5: float32(p * float32(x*c)), p a polynomial in z = x*x
    a('\tVMULPS Y0, Y0, Y2')
    a(f'\tVMOVUPS {K("ErfS0")}, Y3')
    for i in range(1, 6):
        a(f'\tVFMADD213PS {K(f"ErfS{i}")}, Y2, Y3')
    a(f'\tVMULPS {K("ErfScale")}, Y0, Y2')
    a('\tVMULPS Y2, Y3, Y3')
    # 0.5 <= |x| < 4: t = 1/FMA32(0.3275911, a, 1); p = float32(poly(t)*t);
    # r = FMA32(-p, Exp32(-float32(a*a)), 1); -r for x < 0
    a(f'\tVMOVUPS {K("One")}, Y2')
    a(f'\tVFMADD231PS {K("ErfT")}, Y1, Y2')
    a(f'\tVMOVUPS {K("One")}, Y4')
    a('\tVDIVPS Y2, Y4, Y4')
    a(f'\tVMOVUPS {K("ErfA0")}, Y5')
    for i in range(1, 5):
        a(f'\tVFMADD213PS {K(f"ErfA{i}")}, Y4, Y5')
    a('\tVMULPS Y4, Y5, Y5')
    a('\tVMULPS Y1, Y1, Y2')
    a(f'\tVXORPS {K("Sign")}, Y2, Y2')
    exp_core('Y2', 'Y4', 'Y6', 'Y7', 'Y2')
    a(f'\tVXORPS {K("Sign")}, Y5, Y5')
    a(f'\tVFMADD213PS {K("One")}, Y4, Y5')
    a(f'\tVANDPS {K("Sign")}, Y0, Y6')
    a('\tVXORPS Y6, Y5, Y5')
    # |x| >= 4: ±1
    a(f'\tVORPS {K("One")}, Y6, Y6')
    a(f'\tVCMPPS ${GE}, {K("ErfBig")}, Y1, Y7')
    a('\tVBLENDVPS Y7, Y6, Y5, Y5')
    a(f'\tVCMPPS ${LT}, {K("ErfSmall")}, Y1, Y7')
    a('\tVBLENDVPS Y7, Y3, Y5, Y5')
    a(f'\tVCMPPS ${UNORD}, Y0, Y0, Y7')
    a('\tVBLENDVPS Y7, Y0, Y5, Y5')
    return 'Y5'


def gelu_tail(r):
    # (0.5 * x) * (1 + f), x reloaded from src
    a(f'\tVADDPS {K("One")}, {r}, {r}')
    a('\tVMOVUPS (SI), Y6')
    a(f'\tVMULPS {K("Half")}, Y6, Y6')
    a(f'\tVMULPS {r}, Y6, {r}')


def body_gelu_erf():
    # 0.5 * x * (1 + Erf32(x * float32(1/sqrt2)))
    a(f'\tVMULPS {K("GeluRsqrt2")}, Y0, Y0')
    r = body_erf()
    gelu_tail(r)
    return r


def body_gelu_tanh():
    # in = float32(c) * (x + float32(float32(0.044715)*x*x*x))
    # 0.5 * x * (1 + Tanh32(in))
    a(f'\tVMULPS {K("GeluK")}, Y0, Y1')
    a('\tVMULPS Y0, Y1, Y1')
    a('\tVMULPS Y0, Y1, Y1')
    a('\tVADDPS Y1, Y0, Y0')
    a(f'\tVMULPS {K("GeluC")}, Y0, Y0')
    r = body_tanh()
    gelu_tail(r)
    return r


FUNCS = [
    ('Exp', body_exp, 'Exp32'),
    ('Sigmoid', body_sigmoid, 'Sigmoid32'),
    ('Tanh', body_tanh, 'Tanh32'),
    ('Erf', body_erf, 'Erf32'),
    ('GeluErf', body_gelu_erf, 'GeluErf32'),
    ('GeluTanh', body_gelu_tanh, 'GeluTanh32'),
]

a('// Code generated by gen_asm.py; DO NOT EDIT.\n')
a('#include "textflag.h"\n')
for name, body, _ in FUNCS:
    a(f'// func {name}(dst, src *float32, n int, tab *[NumConsts][8]float32)')
    a(f'TEXT ·{name}(SB), NOSPLIT, $0-32')
    a('\tMOVQ dst+0(FP), DI')
    a('\tMOVQ src+8(FP), SI')
    a('\tMOVQ n+16(FP), CX')
    a('\tMOVQ tab+24(FP), R8')
    a('\tSHRQ $3, CX')
    a(f'\tJZ {name}_done')
    a(f'{name}_loop:')
    a('\tVMOVUPS (SI), Y0')
    r = body()
    a(f'\tVMOVUPS {r}, (DI)')
    a('\tADDQ $32, SI')
    a('\tADDQ $32, DI')
    a('\tDECQ CX')
    a(f'\tJNZ {name}_loop')
    a(f'{name}_done:')
    a('\tVZEROUPPER')
    a('\tRET\n')

# func MaxNaN(x *float32, n int) (max float32, nan bool): n a positive
# multiple of 8. max is a maximum of x by VMAXPS, exact only when there is no
# NaN and it is not zero (the caller checks); nan reports a NaN in x.
a('// func MaxNaN(x *float32, n int) (max float32, nan bool)')
a('TEXT ·MaxNaN(SB), NOSPLIT, $0-21')
a('\tMOVQ x+0(FP), SI')
a('\tMOVQ n+8(FP), CX')
a('\tSHRQ $3, CX')
a('\tVMOVUPS (SI), Y0')
a('\tVCMPPS $3, Y0, Y0, Y1')
a('\tADDQ $32, SI')
a('\tDECQ CX')
a('\tJZ MaxNaN_reduce')
a('MaxNaN_loop:')
a('\tVMOVUPS (SI), Y2')
a('\tVMAXPS Y2, Y0, Y0')
a('\tVCMPPS $3, Y2, Y2, Y3')
a('\tVORPS Y3, Y1, Y1')
a('\tADDQ $32, SI')
a('\tDECQ CX')
a('\tJNZ MaxNaN_loop')
a('MaxNaN_reduce:')
a('\tVEXTRACTF128 $1, Y0, X2')
a('\tVMAXPS X2, X0, X0')
a('\tVPERMILPS $0x4e, X0, X2')
a('\tVMAXPS X2, X0, X0')
a('\tVPERMILPS $0xb1, X0, X2')
a('\tVMAXPS X2, X0, X0')
a('\tVMOVSS X0, max+16(FP)')
a('\tVMOVMSKPS Y1, AX')
a('\tTESTL AX, AX')
a('\tSETNE nan+20(FP)')
a('\tVZEROUPPER')
a('\tRET\n')

# func DivBy(dst, src *float32, n int, s float32): dst[i] = src[i] / s for
# n a multiple of 8 (VDIVPS: the correctly rounded quotient, as DIVSS).
a('// func DivBy(dst, src *float32, n int, s float32)')
a('TEXT ·DivBy(SB), NOSPLIT, $0-28')
a('\tMOVQ dst+0(FP), DI')
a('\tMOVQ src+8(FP), SI')
a('\tMOVQ n+16(FP), CX')
a('\tVBROADCASTSS s+24(FP), Y1')
a('\tSHRQ $3, CX')
a('\tJZ DivBy_done')
a('DivBy_loop:')
a('\tVMOVUPS (SI), Y0')
a('\tVDIVPS Y1, Y0, Y0')
a('\tVMOVUPS Y0, (DI)')
a('\tADDQ $32, SI')
a('\tADDQ $32, DI')
a('\tDECQ CX')
a('\tJNZ DivBy_loop')
a('DivBy_done:')
a('\tVZEROUPPER')
a('\tRET\n')


# Row reductions over 8 rows at once. Rows r0..r7 start at x, x+D, ...,
# x+7D (D floats apart); each 8-column block is loaded from the 8 rows and
# transposed in registers (unpack, shuffle, 128-bit permute), so that lane
# l of column vector k holds row l's element k. The columns are then
# accumulated in order k = 0, 1, ..., 7: each lane performs its row's
# sequential chain exactly as the scalar loop, one operation per element.


def transpose_block(col_op):
    """Loads columns k..k+7 of the 8 rows (SI = rows 0-3 at k, R10 = rows
    4-7 at k, BX = row stride in bytes, DX = 3*BX) and calls col_op(Y) for
    each column in order. Uses Y0-Y13; Y14, Y15 are the caller's."""
    a('\tVMOVUPS (SI), Y0')
    a('\tVMOVUPS (SI)(BX*1), Y1')
    a('\tVMOVUPS (SI)(BX*2), Y2')
    a('\tVMOVUPS (SI)(DX*1), Y3')
    a('\tVUNPCKLPS Y1, Y0, Y4')   # a0 b0 a1 b1 | a4 b4 a5 b5
    a('\tVUNPCKHPS Y1, Y0, Y5')   # a2 b2 a3 b3 | a6 b6 a7 b7
    a('\tVUNPCKLPS Y3, Y2, Y6')
    a('\tVUNPCKHPS Y3, Y2, Y7')
    a('\tVSHUFPS $0x44, Y6, Y4, Y0')  # a0 b0 c0 d0 | a4 b4 c4 d4
    a('\tVSHUFPS $0xee, Y6, Y4, Y1')  # a1 b1 c1 d1 | a5 ...
    a('\tVSHUFPS $0x44, Y7, Y5, Y2')  # a2 ... | a6 ...
    a('\tVSHUFPS $0xee, Y7, Y5, Y3')  # a3 ... | a7 ...
    a('\tVMOVUPS (R10), Y4')
    a('\tVMOVUPS (R10)(BX*1), Y5')
    a('\tVMOVUPS (R10)(BX*2), Y6')
    a('\tVMOVUPS (R10)(DX*1), Y7')
    a('\tVUNPCKLPS Y5, Y4, Y8')
    a('\tVUNPCKHPS Y5, Y4, Y9')
    a('\tVUNPCKLPS Y7, Y6, Y10')
    a('\tVUNPCKHPS Y7, Y6, Y11')
    a('\tVSHUFPS $0x44, Y10, Y8, Y4')
    a('\tVSHUFPS $0xee, Y10, Y8, Y5')
    a('\tVSHUFPS $0x44, Y11, Y9, Y6')
    a('\tVSHUFPS $0xee, Y11, Y9, Y7')
    # column k = low halves (k < 4) or high halves (k >= 4) of tt(k%4), tt(k%4+4)
    for k in range(8):
        j = k % 4
        imm = '0x20' if k < 4 else '0x31'
        a(f'\tVPERM2F128 ${imm}, Y{j+4}, Y{j}, Y{8 + k % 2}')
        col_op(f'Y{8 + k % 2}')


def row_routine(name, args_size, setup, col_op, store):
    a(f'TEXT ·{name}(SB), NOSPLIT, ${args_size}')
    setup()
    a('\tMOVQ D+8(FP), BX')
    a('\tMOVQ n+16(FP), CX')
    a('\tSHLQ $2, BX')
    a('\tLEAQ (BX)(BX*2), DX')
    a('\tLEAQ (SI)(BX*4), R10')
    a('\tVXORPS Y15, Y15, Y15')
    a('\tSHRQ $3, CX')
    a(f'\tJZ {name}_done')
    a(f'{name}_loop:')
    transpose_block(col_op)
    a('\tADDQ $32, SI')
    a('\tADDQ $32, R10')
    a('\tDECQ CX')
    a(f'\tJNZ {name}_loop')
    a(f'{name}_done:')
    store()
    a('\tVZEROUPPER')
    a('\tRET\n')


# func SumRows8(x *float32, D, n int, sum *[8]float32): sum[l] = the
# sequential float32 sum s = s + x[l*D+k] for k < n (n a multiple of 8),
# from s = 0.
a('// func SumRows8(x *float32, D, n int, sum *[8]float32)')
row_routine('SumRows8', '0-32',
            lambda: a('\tMOVQ x+0(FP), SI'),
            lambda y: a(f'\tVADDPS {y}, Y15, Y15'),
            lambda: (a('\tMOVQ sum+24(FP), DI'), a('\tVMOVUPS Y15, (DI)')))

# func SqDevRows8(x *float32, D, n int, mean, q *[8]float32): q[l] = the
# chain q = FMA32(x-m, x-m, q) over x = x[l*D+k], k < n, m = mean[l], from
# q = 0.
a('// func SqDevRows8(x *float32, D, n int, mean, q *[8]float32)')
row_routine('SqDevRows8', '0-40',
            lambda: (a('\tMOVQ x+0(FP), SI'), a('\tMOVQ mean+24(FP), DI'), a('\tVMOVUPS (DI), Y14')),
            lambda y: (a(f'\tVSUBPS Y14, {y}, {y}'), a(f'\tVFMADD231PS {y}, {y}, Y15')),
            lambda: (a('\tMOVQ q+32(FP), DI'), a('\tVMOVUPS Y15, (DI)')))

# func NormAffine(y, x *float32, n int, m, iv float32, sc, bs *float32):
# y[j] = float32(float32((x[j]-m)*iv) * sc[j]) + bs[j] for j < n (n a
# multiple of 8); bs nil: without the addition. NaN results are written as
# the canonical quiet NaN 0x7fc00000.
a('// func NormAffine(y, x *float32, n int, m, iv float32, sc, bs *float32)')
a('TEXT ·NormAffine(SB), NOSPLIT, $0-48')
a('\tMOVQ y+0(FP), DI')
a('\tMOVQ x+8(FP), SI')
a('\tMOVQ n+16(FP), CX')
a('\tVBROADCASTSS m+24(FP), Y1')
a('\tVBROADCASTSS iv+28(FP), Y2')
a('\tMOVQ sc+32(FP), R8')
a('\tMOVQ bs+40(FP), R9')
a('\tMOVL $0x7fc00000, AX')
a('\tMOVL AX, X3')
a('\tVPBROADCASTD X3, Y3')  # the canonical NaN
a('\tXORQ AX, AX')
a('\tSHRQ $3, CX')
a('\tJZ NormAffine_done')
a('\tTESTQ R9, R9')
a('\tJZ NormAffine_nobias')
a('NormAffine_loop:')
a('\tVMOVUPS (SI)(AX*1), Y0')
a('\tVSUBPS Y1, Y0, Y0')
a('\tVMULPS Y2, Y0, Y0')
a('\tVMULPS (R8)(AX*1), Y0, Y0')
a('\tVADDPS (R9)(AX*1), Y0, Y0')
a('\tVCMPPS $3, Y0, Y0, Y4')
a('\tVBLENDVPS Y4, Y3, Y0, Y0')
a('\tVMOVUPS Y0, (DI)(AX*1)')
a('\tADDQ $32, AX')
a('\tDECQ CX')
a('\tJNZ NormAffine_loop')
a('\tJMP NormAffine_done')
a('NormAffine_nobias:')
a('\tVMOVUPS (SI)(AX*1), Y0')
a('\tVSUBPS Y1, Y0, Y0')
a('\tVMULPS Y2, Y0, Y0')
a('\tVMULPS (R8)(AX*1), Y0, Y0')
a('\tVCMPPS $3, Y0, Y0, Y4')
a('\tVBLENDVPS Y4, Y3, Y0, Y0')
a('\tVMOVUPS Y0, (DI)(AX*1)')
a('\tADDQ $32, AX')
a('\tDECQ CX')
a('\tJNZ NormAffine_nobias')
a('NormAffine_done:')
a('\tVZEROUPPER')
a('\tRET\n')

# func AddVV(dst, x, y *float32, n int): dst[i] = x[i] + y[i] for n a
# multiple of 8 (VADDPS with x as the first source: the float32 additions
# x[i] + y[i], NaN operands propagated as ADDSS x, y does).
a('// func AddVV(dst, x, y *float32, n int)')
a('TEXT ·AddVV(SB), NOSPLIT, $0-32')
a('\tMOVQ dst+0(FP), DI')
a('\tMOVQ x+8(FP), SI')
a('\tMOVQ y+16(FP), DX')
a('\tMOVQ n+24(FP), CX')
a('\tXORQ AX, AX')
a('\tSHRQ $3, CX')
a('\tJZ AddVV_done')
a('\tCMPQ CX, $4')
a('\tJB AddVV_one')
a('AddVV_four:')
for u in range(4):
    a(f'\tVMOVUPS {32*u}(SI)(AX*1), Y{u}')
for u in range(4):
    a(f'\tVADDPS {32*u}(DX)(AX*1), Y{u}, Y{u}')
for u in range(4):
    a(f'\tVMOVUPS Y{u}, {32*u}(DI)(AX*1)')
a('\tADDQ $128, AX')
a('\tSUBQ $4, CX')
a('\tCMPQ CX, $4')
a('\tJAE AddVV_four')
a('\tTESTQ CX, CX')
a('\tJZ AddVV_done')
a('AddVV_one:')
a('\tVMOVUPS (SI)(AX*1), Y0')
a('\tVADDPS (DX)(AX*1), Y0, Y0')
a('\tVMOVUPS Y0, (DI)(AX*1)')
a('\tADDQ $32, AX')
a('\tDECQ CX')
a('\tJNZ AddVV_one')
a('AddVV_done:')
a('\tVZEROUPPER')
a('\tRET\n')

# func GeluErf16(dst, src *float32, n int, tab *[NumConsts][8]float32):
# GeluErf over n floats (n a multiple of 16), AVX-512F on 16 lanes: the
# instructions of body_gelu_erf line by line, with the same operands in the
# same order (so NaN operands propagate alike), on ZMM registers. Branch
# blends are masked moves (VCMPPS into an opmask, then VMOVAPS under it),
# the bitwise operations their AVX-512F integer forms (same bits), VROUNDPS
# mode 0 is VRNDSCALEPS $0 (round to an integer, ties to even). The one
# difference is Ldexp32 in Exp32(-a*a): its lanes are used only for
# 0.5 <= a < 4, where n = RoundEven32(-a*a*log2e) lies in [-24, 0], so
# the scalar's one multiplication by 2^n is done without the two-step
# clamping (other lanes are discarded by the blends). Constants are held in
# Z8-Z31 where they fit, the rest read by embedded broadcast.
REG512 = ['GeluRsqrt2', 'Abs', 'One', 'Sign', 'ErfScale', 'ErfT', 'Log2e', 'NegLn2Hi', 'NegLn2Lo',
          'I127', 'ErfBig', 'ErfSmall', 'Half', 'ErfS0', 'ErfA0', 'ExpP0',
          'ErfS1', 'ErfS2', 'ErfS3', 'ErfS4', 'ErfS5', 'ErfA1', 'ErfA2', 'ErfA3']
Z = {c: f'Z{8 + i}' for i, c in enumerate(REG512)}


def op512(mn, c, rest):
    """mn with constant c as its first (source-2) operand: a register, or
    the table row's first float broadcast from memory."""
    if c in Z:
        a(f'\t{mn} {Z[c]}, {rest}')
    else:
        op, _, imm = mn.partition(' ')  # VCMPPS $p,: the suffix goes on the mnemonic
        a(f'\t{op}.BCST {imm + " " if imm else ""}{K(c)}, {rest}')


def mov512(c, dst):
    if c in Z:
        a(f'\tVMOVAPS {Z[c]}, {dst}')
    else:
        a(f'\tVBROADCASTSS {K(c)}, {dst}')


def gelu16_body():
    """One vector's GeluErf at (SI) into (DI): Z0-Z7 and K1-K3 its
    registers, the constants as Z maps them."""
    a('\tVMOVUPS (SI), Z0')
    op512('VMULPS', 'GeluRsqrt2', 'Z0, Z0')
    # Erf32 of Z0 into Z5 (body_erf)
    op512('VPANDD', 'Abs', 'Z0, Z1')
    a('\tVMULPS Z0, Z0, Z2')
    mov512('ErfS0', 'Z3')
    for i in range(1, 6):
        op512('VFMADD213PS', f'ErfS{i}', 'Z2, Z3')
    op512('VMULPS', 'ErfScale', 'Z0, Z2')
    a('\tVMULPS Z2, Z3, Z3')
    mov512('One', 'Z2')
    op512('VFMADD231PS', 'ErfT', 'Z1, Z2')
    mov512('One', 'Z4')
    a('\tVDIVPS Z2, Z4, Z4')
    mov512('ErfA0', 'Z5')
    for i in range(1, 5):
        op512('VFMADD213PS', f'ErfA{i}', 'Z4, Z5')
    a('\tVMULPS Z4, Z5, Z5')
    a('\tVMULPS Z1, Z1, Z2')
    op512('VPXORD', 'Sign', 'Z2, Z2')
    # exp_core(Z2 -> Z4; Z6, Z7; Z2), Ldexp32 as one multiplication
    op512('VMULPS', 'Log2e', 'Z2, Z6')
    a('\tVRNDSCALEPS $0, Z6, Z6')
    a('\tVMOVAPS Z2, Z7')
    op512('VFMADD231PS', 'NegLn2Hi', 'Z6, Z7')
    op512('VFMADD231PS', 'NegLn2Lo', 'Z6, Z7')
    mov512('ExpP0', 'Z4')
    for i in range(1, 6):
        op512('VFMADD213PS', f'ExpP{i}', 'Z7, Z4')
    a('\tVMULPS Z7, Z7, Z2')
    a('\tVFMADD213PS Z7, Z2, Z4')
    op512('VADDPS', 'One', 'Z4, Z4')
    a('\tVCVTTPS2DQ Z6, Z6')
    op512('VPADDD', 'I127', 'Z6, Z6')
    a('\tVPSLLD $23, Z6, Z6')
    a('\tVMULPS Z6, Z4, Z4')
    op512('VPXORD', 'Sign', 'Z5, Z5')
    op512('VFMADD213PS', 'One', 'Z4, Z5')
    op512('VPANDD', 'Sign', 'Z0, Z6')
    a('\tVPXORD Z6, Z5, Z5')
    op512('VPORD', 'One', 'Z6, Z6')
    op512(f'VCMPPS ${GE},', 'ErfBig', 'Z1, K1')
    a('\tVMOVAPS Z6, K1, Z5')
    op512(f'VCMPPS ${LT},', 'ErfSmall', 'Z1, K2')
    a('\tVMOVAPS Z3, K2, Z5')
    a(f'\tVCMPPS ${UNORD}, Z0, Z0, K3')
    a('\tVMOVAPS Z0, K3, Z5')
    # gelu_tail
    op512('VADDPS', 'One', 'Z5, Z5')
    a('\tVMOVUPS (SI), Z6')
    op512('VMULPS', 'Half', 'Z6, Z6')
    a('\tVMULPS Z5, Z6, Z5')
    a('\tVMOVUPS Z5, (DI)')


# GELU16_V vectors a pass while that many are left: gelu16_body's lines
# for each, interleaved line by line (one vector's chain, two polynomials,
# a division and an Exp32, waits on latency: 8192 values 5.3 -> 2.9 us
# with two; three are no faster, four slower), vector v in Z(8v)..Z(8v+7) with its masks all in K(1+v),
# its loads and stores 64v bytes on; the constants that fit in
# Z(8V)..Z31, the rest by embedded broadcast. The same instructions on
# each vector, so the same bits; the single-vector loop does the rest.
GELU16_V = 2


def gelu16_wide(V):
    global Z, a
    saved, emit = Z, a
    Z = {c: f'Z{8 * V + i}' for i, c in enumerate(REG512[:32 - 8 * V])}
    one = []
    a = one.append
    gelu16_body()
    a = emit
    for c in REG512[:32 - 8 * V]:
        a(f'\tVBROADCASTSS {K(c)}, {Z[c]}')
    a('GeluErf16_wide:')
    a(f'\tCMPQ CX, ${V}')
    a('\tJL GeluErf16_one')
    for line in one:
        for v in range(V):
            t = re.sub(r'\bZ([0-7])\b', lambda m: f'Z{8 * v + int(m.group(1))}', line)
            t = re.sub(r'\bK[1-3]\b', f'K{1 + v}', t)
            t = re.sub(r'\((SI|DI)\)', lambda m: f'{64 * v}({m.group(1)})' if v else f'({m.group(1)})', t)
            a(t)
    a(f'\tADDQ ${64 * V}, SI')
    a(f'\tADDQ ${64 * V}, DI')
    a(f'\tSUBQ ${V}, CX')
    a('\tJMP GeluErf16_wide')
    a('GeluErf16_one:')
    Z = saved


a('// func GeluErf16(dst, src *float32, n int, tab *[NumConsts][8]float32)')
a('TEXT ·GeluErf16(SB), NOSPLIT, $0-32')
a('\tMOVQ dst+0(FP), DI')
a('\tMOVQ src+8(FP), SI')
a('\tMOVQ n+16(FP), CX')
a('\tMOVQ tab+24(FP), R8')
a('\tSHRQ $4, CX')
a('\tJZ GeluErf16_done')
gelu16_wide(GELU16_V)
a('\tTESTQ CX, CX')
a('\tJZ GeluErf16_done')
for c in REG512:
    a(f'\tVBROADCASTSS {K(c)}, {Z[c]}')
a('GeluErf16_loop:')
gelu16_body()
a('\tADDQ $64, SI')
a('\tADDQ $64, DI')
a('\tDECQ CX')
a('\tJNZ GeluErf16_loop')
a('GeluErf16_done:')
a('\tVZEROUPPER')
a('\tRET\n')

# func SubBy(dst, src *float32, n int, s float32): dst[i] = src[i] - s for
# n a multiple of 8 (VSUBPS with src as the first operand, as SUBSS).
a('// func SubBy(dst, src *float32, n int, s float32)')
a('TEXT ·SubBy(SB), NOSPLIT, $0-28')
a('\tMOVQ dst+0(FP), DI')
a('\tMOVQ src+8(FP), SI')
a('\tMOVQ n+16(FP), CX')
a('\tVBROADCASTSS s+24(FP), Y1')
a('\tSHRQ $3, CX')
a('\tJZ SubBy_done')
a('SubBy_loop:')
a('\tVMOVUPS (SI), Y0')
a('\tVSUBPS Y1, Y0, Y0')
a('\tVMOVUPS Y0, (DI)')
a('\tADDQ $32, SI')
a('\tADDQ $32, DI')
a('\tDECQ CX')
a('\tJNZ SubBy_loop')
a('SubBy_done:')
a('\tVZEROUPPER')
a('\tRET\n')

with open('vec_amd64.s', 'w') as f:
    f.write('\n'.join(L))

G = ['// Code generated by gen_asm.py; DO NOT EDIT.', '', 'package vecasm', '',
     '// Rows of the constant table (each constant broadcast to 8 lanes).', 'const (']
for i, c in enumerate(CONSTS):
    G.append(f'\tK{c} = {i}')
G.append(f'\tNumConsts = {len(CONSTS)}')
G.append(')')
G.append('')
G.append('// Funcs names each routine and the scalar vmath function it is the twin of.')
G.append('var Funcs = map[string]string{')
for name, _, scalar in FUNCS:
    G.append(f'\t"{name}": "{scalar}",')
G.append('}')
with open('consts.go', 'w') as f:
    f.write('\n'.join(G) + '\n')

import subprocess
subprocess.run(['gofmt', '-w', 'consts.go'], check=True)
