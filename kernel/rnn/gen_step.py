#!/usr/bin/env python3
"""Generates step_amd64.s (go generate ./kernel/rnn, or from this directory:
python3 gen_step.py > step_amd64.s).

The fused recurrent steps of LSTM and GRU (linear_before_reset) on AVX-512F:
for each block of 16 hidden units, the chains of the block's gates continue
from the input chains over h·Rᵀ (the block's panel, one zmm per gate and
step of k), for up to four batch rows at once (each panel load serves every
row), and the block's gate arithmetic runs on the accumulators in
registers: the operations of stepPortable (fused.go), lane by lane, with
vmath's Sigmoid32 and Tanh32 written out 16 lanes wide as vmath's own
vector twins perform them (vecasm's gen_asm.py, 8 lanes there).
"""

import sys

out = []


def a(s=''):
    out.append(s)


labels = [0]


def label():
    labels[0] += 1
    return f'nopeep{labels[0]}'


# Rows of the constant table (stepTab in fused.go), 64 bytes each.
TAB = ['log2e', 'negLn2Hi', 'negLn2Lo', 'expP0', 'expP1', 'expP2', 'expP3',
       'expP4', 'expP5', 'expMax', 'expMin', 'inf', 'i127', 'im126', 'one',
       'two', 'sign', 'abs', 'tanhP0', 'tanhP1', 'tanhP2', 'tanhP3',
       'tanhP4', 'tanhSmall', 'tanhBig', 'canon']


def t(name):
    return f'{64 * TAB.index(name)}(R12)'


def exp_core(x, y, t1, t2, t3):
    """y = Exp32's polynomial and scaling of x (no range or NaN handling);
    clobbers t1-t3. vecasm's exp body, 16 lanes."""
    a(f'\tVMULPS {t("log2e")}, {x}, {t1}')
    a(f'\tVRNDSCALEPS $0, {t1}, {t1}')
    a(f'\tVMOVAPS {x}, {t2}')
    a(f'\tVFMADD231PS {t("negLn2Hi")}, {t1}, {t2}')
    a(f'\tVFMADD231PS {t("negLn2Lo")}, {t1}, {t2}')
    a(f'\tVMOVUPS {t("expP0")}, {y}')
    for p in ('expP1', 'expP2', 'expP3', 'expP4', 'expP5'):
        a(f'\tVFMADD213PS {t(p)}, {t2}, {y}')
    a(f'\tVMULPS {t2}, {t2}, {t3}')
    a(f'\tVFMADD213PS {t2}, {t3}, {y}')
    a(f'\tVADDPS {t("one")}, {y}, {y}')
    a(f'\tVCVTTPS2DQ {t1}, {t1}')
    a(f'\tVPMINSD {t("i127")}, {t1}, {t2}')
    a(f'\tVPMAXSD {t("im126")}, {t2}, {t2}')
    a(f'\tVPSUBD {t2}, {t1}, {t1}')
    a(f'\tVPADDD {t("i127")}, {t2}, {t2}')
    a(f'\tVPSLLD $23, {t2}, {t2}')
    a(f'\tVMULPS {t2}, {y}, {y}')
    a(f'\tVPADDD {t("i127")}, {t1}, {t1}')
    a(f'\tVPSLLD $23, {t1}, {t1}')
    a(f'\tVMULPS {t1}, {y}, {y}')


def sigmoid(x, y, t1, t2, t3, t4):
    """y = Sigmoid32(x) = 1 / (1 + Exp32(-x)); x is kept; clobbers t1-t4."""
    a(f'\tVXORPS {t("sign")}, {x}, {t4}')
    exp_core(t4, y, t1, t2, t3)
    a(f'\tVCMPPS $17, {t("expMin")}, {t4}, K1')
    a(f'\tVXORPS {y}, {y}, K1, {y}')
    a(f'\tVCMPPS $30, {t("expMax")}, {t4}, K1')
    a(f'\tVMOVUPS {t("inf")}, K1, {y}')
    a(f'\tVCMPPS $3, {t4}, {t4}, K1')
    a(f'\tVMOVAPS {t4}, K1, {y}')
    a(f'\tVADDPS {t("one")}, {y}, {y}')
    a(f'\tVMOVUPS {t("one")}, {t1}')
    a(f'\tVDIVPS {y}, {t1}, {y}')


def tanh(x, y, t1, t2, t3, t4, t5):
    """y = Tanh32(x); x is kept; clobbers t1-t5."""
    a(f'\tVANDPS {t("abs")}, {x}, {t1}')          # |x|
    a(f'\tVMULPS {x}, {x}, {t2}')                 # z = x*x
    a(f'\tVMOVUPS {t("tanhP0")}, {t3}')
    for p in ('tanhP1', 'tanhP2', 'tanhP3', 'tanhP4'):
        a(f'\tVFMADD213PS {t(p)}, {t2}, {t3}')
    a(f'\tVMULPS {t2}, {t3}, {t3}')               # p*z
    a(f'\tVFMADD213PS {x}, {x}, {t3}')            # FMA(p*z, x, x)
    a(f'\tVADDPS {t1}, {t1}, {t2}')               # a+a
    exp_core(t2, y, t4, t5, t2)
    a(f'\tVADDPS {t("one")}, {y}, {y}')           # e+1
    a(f'\tVMOVUPS {t("two")}, {t4}')
    a(f'\tVDIVPS {y}, {t4}, {t4}')                # 2/(e+1)
    a(f'\tVMOVUPS {t("one")}, {y}')
    a(f'\tVSUBPS {t4}, {y}, {y}')                 # 1 - 2/(e+1)
    a(f'\tVANDPS {t("sign")}, {x}, {t4}')
    a(f'\tVXORPS {t4}, {y}, {y}')                 # -t where x < 0
    a(f'\tVORPS {t("one")}, {t4}, {t4}')          # ±1
    a(f'\tVCMPPS $30, {t("tanhBig")}, {t1}, K1')
    a(f'\tVMOVAPS {t4}, K1, {y}')
    a(f'\tVCMPPS $17, {t("tanhSmall")}, {t1}, K1')
    a(f'\tVMOVAPS {t3}, K1, {y}')
    a(f'\tVCMPPS $3, {x}, {x}, K1')
    a(f'\tVMOVAPS {x}, K1, {y}')


def canon(z):
    a(f'\tVCMPPS $3, {z}, {z}, K1')
    a(f'\tVMOVUPS {t("canon")}, K1, {z}')


# stepArgs (fused.go): field offsets.
ARGS = {'k': 0, 'nblk': 8, 'panel': 16, 'tab': 24, 'peep': 32, 'rbh': 40,
        'h': 48, 'pre': 80, 'c': 112, 'hout': 144}
HROW = ['R8', 'R9', 'R10', 'R11']


def step(kind, rows):
    gates = {'LSTM': 4, 'GRU': 3}[kind]
    name = f'step{kind}{rows}Z'
    acc = lambda r, g: f'Z{r * gates + g}'
    a(f'// func {name}(p *stepArgs)')
    a(f'TEXT ·{name}(SB), NOSPLIT, $0-8')
    a('\tMOVQ p+0(FP), DI')
    a(f'\tMOVQ {ARGS["panel"]}(DI), SI')
    a(f'\tMOVQ {ARGS["tab"]}(DI), R12')
    a(f'\tMOVQ {ARGS["nblk"]}(DI), DX')
    for r in range(rows):
        a(f'\tMOVQ {ARGS["h"] + 8 * r}(DI), {HROW[r]}')
    a('\tXORQ AX, AX')  # the block's offset in bytes of 16 floats
    a(f'{name}_block:')
    # The chains start from the input chains (GRU's h~ chain from Rbh).
    for r in range(rows):
        a(f'\tMOVQ {ARGS["pre"] + 8 * r}(DI), R13')
        if gates == 4:
            a('\tLEAQ (R13)(AX*4), R13')
        else:
            a('\tLEAQ (R13)(AX*2), R13')
            a('\tADDQ AX, R13')
        for g in range(gates):
            if kind == 'GRU' and g == 2:
                continue
            a(f'\tVMOVUPS {64 * g}(R13), {acc(r, g)}')
    if kind == 'GRU':
        a(f'\tMOVQ {ARGS["rbh"]}(DI), R13')
        for r in range(rows):
            a(f'\tVMOVUPS (R13)(AX*1), {acc(r, 2)}')
    a(f'\tMOVQ {ARGS["k"]}(DI), CX')
    a('\tXORQ BX, BX')
    a('\tTESTQ CX, CX')
    a(f'\tJZ {name}_epi')
    a(f'{name}_k:')
    if rows == 1:
        a(f'\tVBROADCASTSS ({HROW[0]})(BX*1), Z20')
        for g in range(gates):
            a(f'\tVFMADD231PS {64 * g}(SI), Z20, {acc(0, g)}')
    else:
        for g in range(gates):
            a(f'\tVMOVUPS {64 * g}(SI), Z{16 + g}')
        for r in range(rows):
            a(f'\tVBROADCASTSS ({HROW[r]})(BX*1), Z20')
            for g in range(gates):
                a(f'\tVFMADD231PS Z{16 + g}, Z20, {acc(r, g)}')
    a(f'\tADDQ ${64 * gates}, SI')
    a('\tADDQ $4, BX')
    a('\tDECQ CX')
    a(f'\tJNZ {name}_k')
    a(f'{name}_epi:')
    for r in range(rows):
        for g in range(gates):
            canon(acc(r, g))
    for r in range(rows):
        if kind == 'LSTM':
            lstm_epilogue(r, acc)
        else:
            gru_epilogue(r, acc)
    a('\tADDQ $64, AX')
    a('\tDECQ DX')
    a(f'\tJNZ {name}_block')
    a('\tVZEROUPPER')
    a('\tRET')
    a()


def lstm_epilogue(r, acc):
    pi, po, pf, pc = (acc(r, g) for g in range(4))
    a(f'\tMOVQ {ARGS["c"] + 8 * r}(DI), R13')
    a('\tVMOVUPS (R13)(AX*1), Z21')               # c
    a(f'\tMOVQ {ARGS["peep"]}(DI), R14')
    a('\tTESTQ R14, R14')
    lbl = label()
    a(f'\tJZ {lbl}')
    a('\tLEAQ (R14)(AX*2), R14')
    a('\tADDQ AX, R14')                           # the block's (i, o, f)
    a(f'\tVFMADD231PS 0(R14), Z21, {pi}')
    a(f'\tVFMADD231PS 128(R14), Z21, {pf}')
    a(f'{lbl}:')
    sigmoid(pi, 'Z22', 'Z26', 'Z27', 'Z28', 'Z29')   # i
    sigmoid(pf, 'Z23', 'Z26', 'Z27', 'Z28', 'Z29')   # f
    tanh(pc, 'Z24', 'Z25', 'Z26', 'Z27', 'Z28', 'Z29')  # c~
    a('\tVMULPS Z24, Z22, Z22')                   # i*c~
    a('\tVFMADD231PS Z21, Z23, Z22')              # c' = FMA(f, c, i*c~)
    a('\tVMOVUPS Z22, (R13)(AX*1)')
    a(f'\tMOVQ {ARGS["peep"]}(DI), R14')
    a('\tTESTQ R14, R14')
    lbl2 = label()
    a(f'\tJZ {lbl2}')
    a('\tLEAQ (R14)(AX*2), R14')
    a('\tADDQ AX, R14')
    a(f'\tVFMADD231PS 64(R14), Z22, {po}')
    a(f'{lbl2}:')
    sigmoid(po, 'Z23', 'Z26', 'Z27', 'Z28', 'Z29')   # o
    tanh('Z22', 'Z24', 'Z25', 'Z26', 'Z27', 'Z28', 'Z29')
    a('\tVMULPS Z24, Z23, Z23')                   # o * tanh(c')
    a(f'\tMOVQ {ARGS["hout"] + 8 * r}(DI), R13')
    a('\tVMOVUPS Z23, (R13)(AX*1)')


def gru_epilogue(r, acc):
    az, ar, ah = (acc(r, g) for g in range(3))
    sigmoid(az, 'Z21', 'Z26', 'Z27', 'Z28', 'Z29')   # z
    sigmoid(ar, 'Z22', 'Z26', 'Z27', 'Z28', 'Z29')   # r
    a(f'\tMOVQ {ARGS["pre"] + 8 * r}(DI), R13')
    a('\tLEAQ (R13)(AX*2), R13')
    a('\tADDQ AX, R13')
    a('\tVMOVUPS 128(R13), Z23')                  # x·Wh + Wbh
    a(f'\tVFMADD231PS {ah}, Z22, Z23')            # FMA(r, h·Rh + Rbh, ·)
    tanh('Z23', 'Z24', 'Z25', 'Z26', 'Z27', 'Z28', 'Z29')  # h~
    a(f'\tVMOVUPS {t("one")}, Z25')
    a('\tVSUBPS Z21, Z25, Z25')                   # 1-z
    a('\tVMULPS Z24, Z25, Z25')                   # (1-z)*h~
    a(f'\tVMOVUPS (R{8 + r})(AX*1), Z26')          # h
    a('\tVFMADD231PS Z26, Z21, Z25')              # FMA(z, h, (1-z)*h~)
    a(f'\tMOVQ {ARGS["hout"] + 8 * r}(DI), R13')
    a('\tVMOVUPS Z25, (R13)(AX*1)')


a('// Code generated by gen_step.py; DO NOT EDIT.')
a()
a('#include "textflag.h"')
a()
for kind in ('LSTM', 'GRU'):
    for rows in (1, 2, 3, 4):
        step(kind, rows)

sys.stdout.write('\n'.join(out))
