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
vector twins perform them (vecasm's gen_asm.py, 8 lanes there). The
independent activations of a block are interleaved instruction by
instruction (two or three dependency chains side by side), which only
changes when each operation issues. stepLSTMP*Z take peepholes.
"""

import sys

out = []


def a(s=''):
    out.append(s)


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


def sigmoid(x, y, t1, t2, t3, t4, K='K1'):
    """y = Sigmoid32(x) = 1 / (1 + Exp32(-x)); x is kept; clobbers t1-t4."""
    a(f'\tVXORPS {t("sign")}, {x}, {t4}')
    exp_core(t4, y, t1, t2, t3)
    a(f'\tVCMPPS $17, {t("expMin")}, {t4}, {K}')
    a(f'\tVXORPS {y}, {y}, {K}, {y}')
    a(f'\tVCMPPS $30, {t("expMax")}, {t4}, {K}')
    a(f'\tVMOVUPS {t("inf")}, {K}, {y}')
    a(f'\tVCMPPS $3, {t4}, {t4}, {K}')
    a(f'\tVMOVAPS {t4}, {K}, {y}')
    a(f'\tVADDPS {t("one")}, {y}, {y}')
    a(f'\tVMOVUPS {t("one")}, {t1}')
    a(f'\tVDIVPS {y}, {t1}, {y}')


def tanh(x, y, t1, t2, t3, t4, t5, K='K1'):
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
    a(f'\tVCMPPS $30, {t("tanhBig")}, {t1}, {K}')
    a(f'\tVMOVAPS {t4}, {K}, {y}')
    a(f'\tVCMPPS $17, {t("tanhSmall")}, {t1}, {K}')
    a(f'\tVMOVAPS {t3}, {K}, {y}')
    a(f'\tVCMPPS $3, {x}, {x}, {K}')
    a(f'\tVMOVAPS {x}, {K}, {y}')


def canon(z):
    a(f'\tVCMPPS $3, {z}, {z}, K1')
    a(f'\tVMOVUPS {t("canon")}, K1, {z}')


# stepArgs (fused.go): field offsets.
ARGS = {'k': 0, 'nblk': 8, 'panel': 16, 'tab': 24, 'peep': 32, 'rbh': 40,
        'h': 48, 'pre': 80, 'c': 112, 'hout': 144}
HROW = ['R8', 'R9', 'R10', 'R11']


def step(kind, rows, peep=False):
    """One step over every block for rows rows. A GRU's one row takes
    blocks in pairs (six chains side by side, the pair's gate arithmetic
    interleaved: 12-30% faster a step), then the last odd block alone; an
    LSTM's one row (no faster in pairs) and more rows take a block at a
    time, the rows sharing each panel load."""
    gates = {'LSTM': 4, 'GRU': 3}[kind]
    name = f'step{kind}{"P" if peep else ""}{rows}Z'
    a(f'// func {name}(p *stepArgs)')
    a(f'TEXT ·{name}(SB), NOSPLIT, $0-8')
    a('\tMOVQ p+0(FP), DI')
    a(f'\tMOVQ {ARGS["panel"]}(DI), SI')
    a(f'\tMOVQ {ARGS["tab"]}(DI), R12')
    a(f'\tMOVQ {ARGS["nblk"]}(DI), DX')
    for r in range(rows):
        a(f'\tMOVQ {ARGS["h"] + 8 * r}(DI), {HROW[r]}')
    a('\tXORQ AX, AX')  # the block's offset in bytes of 16 floats
    if rows == 1 and kind == 'GRU':
        a(f'{name}_pair:')
        a('\tCMPQ DX, $2')
        a(f'\tJL {name}_tail')
        panel_bytes(gates)
        block(kind, gates, [(0, 0), (0, 1)], peep, f'{name}_p')
        panel_bytes(gates)
        a('\tADDQ R14, SI')                      # past the pair's second panel
        a('\tADDQ $128, AX')
        a('\tSUBQ $2, DX')
        a(f'\tJMP {name}_pair')
        a(f'{name}_tail:')
        a('\tTESTQ DX, DX')
        a(f'\tJZ {name}_done')
        block(kind, gates, [(0, 0)], peep, f'{name}_t')
    else:
        a(f'{name}_block:')
        block(kind, gates, [(r, 0) for r in range(rows)], peep, f'{name}_b')
        a('\tADDQ $64, AX')
        a('\tDECQ DX')
        a(f'\tJNZ {name}_block')
    a(f'{name}_done:')
    a('\tVZEROUPPER')
    a('\tRET')
    a()


def panel_bytes(gates):
    """R14 = a block's panel in bytes (k·gates·64)."""
    a(f'\tMOVQ {ARGS["k"]}(DI), R14')
    if gates == 4:
        a('\tSHLQ $8, R14')
    else:
        a('\tLEAQ (R14)(R14*2), R14')
        a('\tSHLQ $6, R14')


def block(kind, gates, vrows, peep, lbl):
    """The chains and gate arithmetic of the virtual rows vrows, (row r,
    block AX/64 + j) each: block j's panel at SI + j·R14."""
    acc = lambda v, g: f'Z{v * gates + g}'
    # The chains start from the input chains (GRU's h~ chain from Rbh).
    for v, (r, j) in enumerate(vrows):
        a(f'\tMOVQ {ARGS["pre"] + 8 * r}(DI), R13')
        if gates == 4:
            a('\tLEAQ (R13)(AX*4), R13')
        else:
            a('\tLEAQ (R13)(AX*2), R13')
            a('\tADDQ AX, R13')
        for g in range(gates):
            if kind == 'GRU' and g == 2:
                continue
            a(f'\tVMOVUPS {64 * g + 64 * gates * j}(R13), {acc(v, g)}')
    if kind == 'GRU':
        a(f'\tMOVQ {ARGS["rbh"]}(DI), R13')
        for v, (r, j) in enumerate(vrows):
            a(f'\tVMOVUPS {64 * j}(R13)(AX*1), {acc(v, 2)}')
    a(f'\tMOVQ {ARGS["k"]}(DI), CX')
    a('\tXORQ BX, BX')
    a('\tTESTQ CX, CX')
    a(f'\tJZ {lbl}_epi')
    a(f'{lbl}_k:')
    one_row = all(r == 0 for r, _ in vrows)
    if one_row:
        a(f'\tVBROADCASTSS ({HROW[0]})(BX*1), Z20')
        for v, (r, j) in enumerate(vrows):
            for g in range(gates):
                src = f'{64 * g}(SI)' if j == 0 else f'{64 * g}(SI)(R14*1)'
                a(f'\tVFMADD231PS {src}, Z20, {acc(v, g)}')
    else:
        for g in range(gates):
            a(f'\tVMOVUPS {64 * g}(SI), Z{16 + g}')
        for v, (r, j) in enumerate(vrows):
            a(f'\tVBROADCASTSS ({HROW[r]})(BX*1), Z20')
            for g in range(gates):
                a(f'\tVFMADD231PS Z{16 + g}, Z20, {acc(v, g)}')
    a(f'\tADDQ ${64 * gates}, SI')
    a('\tADDQ $4, BX')
    a('\tDECQ CX')
    a(f'\tJNZ {lbl}_k')
    a(f'{lbl}_epi:')
    for v in range(len(vrows)):
        for g in range(gates):
            canon(acc(v, g))
    if kind == 'LSTM':
        lstm_epilogue(vrows, acc, peep)
    else:
        gru_epilogue(vrows, acc)


def capture(f, *args, **kw):
    """The lines f(*args) emits, instead of emitting them."""
    global out
    saved, out = out, []
    f(*args, **kw)
    lines, out = out, saved
    return lines


def interleave(lanes):
    """Emits the lanes' lines round robin: independent dependency chains
    side by side, for the out-of-order core to overlap."""
    lanes = [l for l in lanes if l]
    i = 0
    while any(i < len(l) for l in lanes):
        for l in lanes:
            if i < len(l):
                a(l[i])
        i += 1


# Temporaries of the epilogue lanes (Z16-Z30, free after the chains), the
# x copy of lane 0's tanh, and each lane's mask and pointer register.
SETS = [[f'Z{16 + 5 * l + i}' for i in range(5)] for l in range(3)]
SETS6 = [[f'Z{16 + 6 * l + i}' for i in range(6)] for l in range(2)]
MASK = ['K1', 'K2', 'K3']
GP = ['R13', 'BX', 'CX']


def lstm_epilogue(vrows, acc, peep):
    """Finishes the block for every virtual row: peepholes, the gates'
    activations (three lanes), then per virtual row (a lane each) the cell
    update and the new state."""
    g = lambda v: [acc(v, q) for q in range(4)]  # i, o, f, c~
    if peep:
        a(f'\tMOVQ {ARGS["peep"]}(DI), R14')
        a('\tLEAQ (R14)(AX*2), R14')
        a('\tADDQ AX, R14')                       # the block's (i, o, f)
        for v, (r, j) in enumerate(vrows):
            pi, po, pf, pc = g(v)
            a(f'\tMOVQ {ARGS["c"] + 8 * r}(DI), R13')
            a(f'\tVMOVUPS {64 * j}(R13)(AX*1), Z31')
            a(f'\tVFMADD231PS {192 * j}(R14), Z31, {pi}')
            a(f'\tVFMADD231PS {128 + 192 * j}(R14), Z31, {pf}')
    lane0 = []
    sigs = []
    for v in range(len(vrows)):
        pi, po, pf, pc = g(v)
        lane0 += [f'\tVMOVAPS {pc}, Z31'] + capture(tanh, 'Z31', pc, *SETS[0], K=MASK[0])
        sigs += [pi, pf] + ([] if peep else [po])
    lanes = [lane0, [], []]
    for q, x in enumerate(sigs):
        l = 1 + q % 2
        lanes[l] += capture(sigmoid, x, x, *SETS[l][:4], K=MASK[l])
    interleave(lanes)
    lanes = [[], [], []]
    for v, (r, j) in enumerate(vrows):
        pi, po, pf, pc = g(v)
        l = v % 3
        T, G, K = SETS[l], GP[l], MASK[l]
        L = lanes[l]
        L += [f'\tMOVQ {ARGS["c"] + 8 * r}(DI), {G}',
              f'\tVMOVUPS {64 * j}({G})(AX*1), {T[0]}',     # c
              f'\tVMULPS {pc}, {pi}, {pi}',                 # i*c~
              f'\tVFMADD231PS {T[0]}, {pf}, {pi}',          # c' = FMA(f, c, i*c~)
              f'\tVMOVUPS {pi}, {64 * j}({G})(AX*1)']
        if peep:
            L += [f'\tVFMADD231PS {64 + 192 * j}(R14), {pi}, {po}']
            L += capture(sigmoid, po, po, *T[:4], K=K)
        L += capture(tanh, pi, pf, *T, K=K)
        L += [f'\tVMULPS {pf}, {po}, {po}',                 # o * tanh(c')
              f'\tMOVQ {ARGS["hout"] + 8 * r}(DI), {G}',
              f'\tVMOVUPS {po}, {64 * j}({G})(AX*1)']
    interleave(lanes)


def gru_epilogue(vrows, acc):
    """Finishes the block for every virtual row: z and r (three lanes),
    then per virtual row (two lanes) h~ and the new state."""
    lanes = [[], [], []]
    q = 0
    for v in range(len(vrows)):
        for x in (acc(v, 0), acc(v, 1)):
            l = q % 3
            lanes[l] += capture(sigmoid, x, x, *SETS[l][:4], K=MASK[l])
            q += 1
    interleave(lanes)
    lanes = [[], []]
    for v, (r, j) in enumerate(vrows):
        az, ar, ah = (acc(v, q) for q in range(3))
        l = v % 2
        T, G, K = SETS6[l], GP[l], MASK[l]
        L = lanes[l]
        L += [f'\tMOVQ {ARGS["pre"] + 8 * r}(DI), {G}',
              f'\tLEAQ ({G})(AX*2), {G}',
              f'\tADDQ AX, {G}',
              f'\tVMOVUPS {128 + 192 * j}({G}), {T[0]}',      # x·Wh + Wbh
              f'\tVFMADD231PS {ah}, {ar}, {T[0]}']            # FMA(r, h·Rh + Rbh, ·)
        L += capture(tanh, T[0], ar, *T[1:], K=K)            # h~
        L += [f'\tVMOVUPS {t("one")}, {T[1]}',
              f'\tVSUBPS {az}, {T[1]}, {T[1]}',                # 1-z
              f'\tVMULPS {ar}, {T[1]}, {T[1]}',                # (1-z)*h~
              f'\tVMOVUPS {64 * j}({HROW[r]})(AX*1), {T[2]}',  # h
              f'\tVFMADD231PS {T[2]}, {az}, {T[1]}',           # FMA(z, h, (1-z)*h~)
              f'\tMOVQ {ARGS["hout"] + 8 * r}(DI), {G}',
              f'\tVMOVUPS {T[1]}, {64 * j}({G})(AX*1)']
    interleave(lanes)


def main():
    a('// Code generated by gen_step.py; DO NOT EDIT.')
    a()
    a('#include "textflag.h"')
    a()
    for rows in (1, 2, 3, 4):
        step('LSTM', rows)
    for rows in (1, 2, 3, 4):
        step('LSTM', rows, peep=True)
    for rows in (1, 2, 3, 4):
        step('GRU', rows)
    sys.stdout.write('\n'.join(out))


if __name__ == '__main__':
    main()
