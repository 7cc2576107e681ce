#!/usr/bin/env python3
"""Generates stepy_amd64.s (go generate ./kernel/rnn, or from this directory:
python3 gen_stepy.py > stepy_amd64.s).

The AVX2 (and FMA) level of the fused path, for CPUs without AVX-512:

  - stepLSTM{1,2,4}Y, stepLSTMP{1,2,4}Y and stepGRU{1,2,4}Y: gen_step.py's steps
    eight lanes wide, on the same panels and operands (stepArgs). A block of
    16 hidden units is two 8-lane halves. One row takes the whole block at
    once (eight chains side by side for an LSTM, six for a GRU); two rows
    share each panel load, an LSTM's in two passes of two gates (each pass
    reads whole cache lines of the panel), a GRU's in two passes of three
    gate halves; four rows, a gate a pass (one cache line of each panel row
    serves four rows: a step of many rows is bound by L2's bandwidth).
    Each lane's chain is the same sequence of FMAs as stepPortable's (one
    per k, k ascending), so the width changes nothing in the bits. The
    accumulators are canonicalised and spilled to the frame; the gate
    arithmetic then runs per (row, half) on 8 lanes: stepPortable's
    operations, with vmath's Sigmoid32 and Tanh32 as vecasm performs them
    on AVX2 (compares and blends where gen_step.py uses mask registers).
  - chainRows8Y: chainRows8Z's chains (eight rows, x packed step-major)
    on AVX2: four rows by 16 columns at a time (eight accumulators, two
    panel loads and four broadcasts a step).
"""

import sys

from gen_step import ARGS, TAB

# stepArgs fields past gen_step.py's: hb, the rows' h at the first block.
ARGS = dict(ARGS, hb=176)

out = []


def a(s=''):
    out.append(s)


def t(name):
    return f'{64 * TAB.index(name)}(R12)'


LT, GT, UNORD = 17, 30, 3


def exp_core(x, y, t1, t2, t3):
    """y = Exp32's polynomial and scaling of x (no range handling); x is
    kept unless t3 == x; clobbers t1-t3. vecasm's exp_core."""
    a(f'\tVMULPS {t("log2e")}, {x}, {t1}')
    a(f'\tVROUNDPS $0, {t1}, {t1}')
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


def sigmoid(x, t1, t2, t3, t4):
    """x = Sigmoid32(x) = 1 / (1 + Exp32(-x)) in place; clobbers t1-t4."""
    a(f'\tVXORPS {t("sign")}, {x}, {t4}')        # -x
    exp_core(t4, x, t1, t2, t3)
    a(f'\tVCMPPS ${LT}, {t("expMin")}, {t4}, {t1}')
    a(f'\tVANDNPS {x}, {t1}, {x}')               # 0 below expMin
    a(f'\tVCMPPS ${GT}, {t("expMax")}, {t4}, {t1}')
    a(f'\tVBLENDVPS {t1}, {t("inf")}, {x}, {x}')  # +Inf above expMax
    a(f'\tVCMPPS ${UNORD}, {t4}, {t4}, {t1}')
    a(f'\tVBLENDVPS {t1}, {t4}, {x}, {x}')        # NaN: -x
    a(f'\tVADDPS {t("one")}, {x}, {x}')
    a(f'\tVMOVUPS {t("one")}, {t1}')
    a(f'\tVDIVPS {x}, {t1}, {x}')


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
    a(f'\tVCMPPS ${GT}, {t("tanhBig")}, {t1}, {t5}')
    a(f'\tVBLENDVPS {t5}, {t4}, {y}, {y}')
    a(f'\tVCMPPS ${LT}, {t("tanhSmall")}, {t1}, {t5}')
    a(f'\tVBLENDVPS {t5}, {t3}, {y}, {y}')
    a(f'\tVCMPPS ${UNORD}, {x}, {x}, {t5}')
    a(f'\tVBLENDVPS {t5}, {x}, {y}, {y}')


HROW = ['R8', 'R9', 'R10', 'R11']


def step(kind, rows, peep=False):
    """One step over every block for rows (1, 2 or 4) rows. Registers: DI
    p, R12 the table, DX the blocks left, AX the block's offset in bytes
    of 16 floats, R14 the block's panel, R8-R11 the rows' h (loaded for
    each pass), SI the panel row, CX and BX the chain's k, R11 and R13
    pointers of the gate arithmetic. The frame holds the spilled chains,
    then a block's panel in bytes."""
    gates = {'LSTM': 4, 'GRU': 3}[kind]
    name = f'step{kind}{"P" if peep else ""}{rows}Y'
    # The passes over a block's panel, each a list of accumulators (row,
    # half, gate). One row: the whole block at once. Two rows: an LSTM's
    # gates (i, o) then (f, c~), both halves (each pass reads whole cache
    # lines of the panel); a GRU's z and half of r, then the rest (four
    # cache lines read a panel row, not six).
    if rows == 1:
        passes = [[(0, hf, g) for hf in (0, 1) for g in range(gates)]]
    elif kind == 'LSTM' and rows == 2:
        passes = [[(r, hf, g) for r in range(rows) for hf in (0, 1) for g in gp]
                  for gp in ((0, 1), (2, 3))]
    elif rows == 2:
        passes = [[(r, hf, g) for r in range(rows) for hf, g in cols]
                  for cols in (((0, 0), (1, 0), (0, 1)), ((1, 1), (0, 2), (1, 2)))]
    else:
        # Four rows: a gate at a time, both halves (one cache line of each
        # panel row a pass, for every row).
        passes = [[(r, hf, g) for r in range(rows) for hf in (0, 1)]
                  for g in range(gates)]
    pb = rows * 2 * gates * 32  # the frame offset of a block's panel bytes
    a(f'// func {name}(p *stepArgs)')
    # Four rows' chains need more frame than a NOSPLIT function may take.
    a(f'TEXT ·{name}(SB), {"NOSPLIT, " if pb + 8 <= 640 else ""}${pb + 8}-8')
    a('\tMOVQ p+0(FP), DI')
    a(f'\tMOVQ {ARGS["panel"]}(DI), R14')
    a(f'\tMOVQ {ARGS["tab"]}(DI), R12')
    a(f'\tMOVQ {ARGS["nblk"]}(DI), DX')
    a(f'\tMOVQ {ARGS["k"]}(DI), CX')
    a(f'\tIMULQ ${gates * 64}, CX')
    a(f'\tMOVQ CX, {pb}(SP)')
    a('\tXORQ AX, AX')
    a('\tTESTQ DX, DX')
    a(f'\tJZ {name}_done')
    a(f'{name}_block:')
    for i, accs in enumerate(passes):
        chains_pass(kind, gates, accs, f'{name}_p{i}')
    for r in range(rows):
        if kind == 'LSTM':
            lstm_epilogue(r, peep)
        else:
            gru_epilogue(r)
    a(f'\tADDQ {pb}(SP), R14')
    a('\tADDQ $64, AX')
    a('\tDECQ DX')
    a(f'\tJNZ {name}_block')
    a(f'{name}_done:')
    a('\tVZEROUPPER')
    a('\tRET')
    a()


def slot(gates, r, hf, g):
    """The frame offset of the spilled chains of row r, half hf, gate g."""
    return 32 * ((r * 2 + hf) * gates + g)


def pre_ptr(reg, r, gates):
    """reg = row r's input chains of the block (pre + AX·gates)."""
    a(f'\tMOVQ {ARGS["pre"] + 8 * r}(DI), {reg}')
    if gates == 4:
        a(f'\tLEAQ ({reg})(AX*4), {reg}')
    else:
        a(f'\tLEAQ ({reg})(AX*2), {reg}')
        a(f'\tADDQ AX, {reg}')


def k_step(accs, acc, rows, gates, u):
    """One step of k of the accumulators' chains, u steps past SI and BX:
    one row, a broadcast and FMAs from the panel; more, each panel vector
    loaded once for every row."""
    d = 64 * gates * u
    if len(rows) == 1:
        a(f'\tVBROADCASTSS {4 * u}({HROW[rows[0]]})(BX*1), Y15')
        for (r, hf, g), y in acc.items():
            a(f'\tVFMADD231PS {d + 64 * g + 32 * hf}(SI), Y15, {y}')
        return
    cols = sorted({(hf, g) for _, hf, g in accs})
    preg = {c: f'Y{len(accs) + i}' for i, c in enumerate(cols)}
    assert len(accs) + len(cols) + len(rows) <= 16
    for (hf, g), y in preg.items():
        a(f'\tVMOVUPS {d + 64 * g + 32 * hf}(SI), {y}')
    for i, r in enumerate(rows):
        bc = f'Y{len(accs) + len(cols) + i}'
        a(f'\tVBROADCASTSS {4 * u}({HROW[r]})(BX*1), {bc}')
        for (rr, hf, g), y in acc.items():
            if rr == r:
                a(f'\tVFMADD231PS {preg[(hf, g)]}, {bc}, {y}')


def chains_pass(kind, gates, accs, lbl):
    """The chains of the accumulators accs ((row, half, gate) each, in
    Y0, Y1, ...) over the block's panel (R14), from the input chains (a
    GRU's h~ chain from Rbh), canonicalised and spilled to their slots.
    One row: each step of k is one broadcast and FMAs from the panel; more
    rows share each panel vector (loaded once into a register)."""
    acc = {x: f'Y{i}' for i, x in enumerate(accs)}
    rows = sorted({r for r, _, _ in accs})
    for r in rows:
        a(f'\tMOVQ {ARGS["h"] + 8 * r}(DI), {HROW[r]}')
    for r in rows:
        pre_ptr('R13', r, gates)
        for (rr, hf, g), y in acc.items():
            if rr == r and not (kind == 'GRU' and g == 2):
                a(f'\tVMOVUPS {64 * g + 32 * hf}(R13), {y}')
    if kind == 'GRU' and any(g == 2 for _, _, g in accs):
        a(f'\tMOVQ {ARGS["rbh"]}(DI), R13')
        for (r, hf, g), y in acc.items():
            if g == 2:
                a(f'\tVMOVUPS {32 * hf}(R13)(AX*1), {y}')
    a('\tMOVQ R14, SI')
    a(f'\tMOVQ {ARGS["k"]}(DI), CX')
    a('\tXORQ BX, BX')
    a('\tSHRQ $1, CX')
    a(f'\tJZ {lbl}_odd')
    a(f'{lbl}_k:')                          # two steps of k a round
    k_step(accs, acc, rows, gates, 0)
    k_step(accs, acc, rows, gates, 1)
    a(f'\tADDQ ${128 * gates}, SI')
    a('\tADDQ $8, BX')
    a('\tDECQ CX')
    a(f'\tJNZ {lbl}_k')
    a(f'{lbl}_odd:')
    a(f'\tTESTQ $1, {ARGS["k"]}(DI)')
    a(f'\tJZ {lbl}_epi')
    k_step(accs, acc, rows, gates, 0)
    a(f'{lbl}_epi:')
    for (r, hf, g), y in acc.items():
        a(f'\tVCMPPS ${UNORD}, {y}, {y}, Y15')
        a(f'\tVBLENDVPS Y15, {t("canon")}, {y}, {y}')
        a(f'\tVMOVUPS {y}, {slot(gates, r, hf, g)}(SP)')


def capture(f, *args):
    """The lines f(*args) emits, instead of emitting them."""
    global out
    saved, out = out, []
    f(*args)
    lines, out = out, saved
    return lines


def par(*lanes):
    """Emits the lanes (lists of lines) round robin: independent
    dependency chains side by side, for the out-of-order core to overlap.
    Only when each operation issues changes."""
    lanes = [l for l in lanes if l]
    for i in range(max(len(l) for l in lanes)):
        for l in lanes:
            if i < len(l):
                a(l[i])


SIG = [['Y0', 'Y1', 'Y2', 'Y3', 'Y4'], ['Y5', 'Y6', 'Y7', 'Y8', 'Y9'],
       ['Y10', 'Y11', 'Y12', 'Y13', 'Y14']]
TANH = [['Y0', 'Y1', 'Y2', 'Y3', 'Y4', 'Y5', 'Y6'],
        ['Y7', 'Y8', 'Y9', 'Y10', 'Y11', 'Y12', 'Y13']]


def sig_lane(mem, regs):
    """mem = Sigmoid32(mem), in registers regs (x, then four temporaries)."""
    x = regs[0]
    return [f'\tVMOVUPS {mem}, {x}'] + capture(sigmoid, *regs) + [f'\tVMOVUPS {x}, {mem}']


def tanh_lane(src, dst, regs, pre=(), post=()):
    """dst = Tanh32(src), in registers regs (x, y, then five
    temporaries): pre's lines after x is loaded, post's before y is
    stored (each formatted with x and y)."""
    x, y = regs[0], regs[1]
    L = [f'\tVMOVUPS {src}, {x}'] + [l.format(x=x, y=y) for l in pre]
    L += capture(tanh, x, y, *regs[2:])
    L += [l.format(x=x, y=y) for l in post]
    return L + [f'\tVMOVUPS {y}, {dst}']


def lstm_epilogue(r, peep):
    """Row r's gate arithmetic for both halves of the block, from its
    spilled chains: stepPortable's operations, the halves' (and the
    gates') independent activations side by side. The spilled slots take
    the activations in place; R11 points at the row's c lanes, R13 at
    the block's peepholes."""
    S = lambda hf, g: f'{slot(4, r, hf, g)}(SP)'  # g: i, o, f, c~
    a(f'\tMOVQ {ARGS["c"] + 8 * r}(DI), R11')
    a('\tADDQ AX, R11')
    C = lambda hf: f'{32 * hf}(R11)'
    if peep:
        a(f'\tMOVQ {ARGS["peep"]}(DI), R13')
        a('\tLEAQ (R13)(AX*2), R13')
        a('\tADDQ AX, R13')                       # the block's (i, o, f)
        for hf in (0, 1):
            a(f'\tVMOVUPS {C(hf)}, Y15')
            for g, po in ((0, 0), (2, 128)):      # FMA(Pi, c, i), FMA(Pf, c, f)
                a(f'\tVMOVUPS {S(hf, g)}, Y{g}')
                a(f'\tVFMADD231PS {po + 32 * hf}(R13), Y15, Y{g}')
                a(f'\tVMOVUPS Y{g}, {S(hf, g)}')
    sigs = [(0, 0), (1, 0), (0, 2), (1, 2)] + ([] if peep else [(0, 1), (1, 1)])
    for q in range(0, len(sigs), 3):
        par(*[sig_lane(S(*x), SIG[l]) for l, x in enumerate(sigs[q:q + 3])])
    par(*[tanh_lane(S(hf, 3), S(hf, 3), TANH[hf]) for hf in (0, 1)])
    for hf in (0, 1):
        a(f'\tVMOVUPS {S(hf, 0)}, Y{hf}')
        a(f'\tVMULPS {S(hf, 3)}, Y{hf}, Y{hf}')       # i*c~
        a(f'\tVMOVUPS {S(hf, 2)}, Y{2 + hf}')
        a(f'\tVFMADD132PS {C(hf)}, Y{hf}, Y{2 + hf}')  # c' = FMA(f, c, i*c~)
        a(f'\tVMOVUPS Y{2 + hf}, {C(hf)}')
        if peep:
            a(f'\tVMOVUPS {S(hf, 1)}, Y{4 + hf}')
            a(f'\tVFMADD231PS {64 + 32 * hf}(R13), Y{2 + hf}, Y{4 + hf}')  # FMA(Po, c', o)
            a(f'\tVMOVUPS Y{4 + hf}, {S(hf, 1)}')
    if peep:
        par(*[sig_lane(S(hf, 1), SIG[hf]) for hf in (0, 1)])
    a(f'\tMOVQ {ARGS["hout"] + 8 * r}(DI), R13')
    a('\tADDQ AX, R13')
    par(*[tanh_lane(C(hf), f'{32 * hf}(R13)', TANH[hf],
                    post=[f'\tVMULPS {S(hf, 1)}, {{y}}, {{y}}'])  # o * tanh(c')
          for hf in (0, 1)])


def gru_epilogue(r):
    """Row r's gate arithmetic for both halves of the block, from its
    spilled chains (z, r, h·Rh + Rbh): stepPortable's operations, the
    halves' independent activations side by side."""
    S = lambda hf, g: f'{slot(3, r, hf, g)}(SP)'
    sigs = [(0, 0), (1, 0), (0, 1), (1, 1)]
    for q in range(0, len(sigs), 3):
        par(*[sig_lane(S(*x), SIG[l]) for l, x in enumerate(sigs[q:q + 3])])
    pre_ptr('R13', r, 3)
    a(f'\tMOVQ {ARGS["hb"] + 8 * r}(DI), R11')
    a('\tADDQ AX, R11')
    lanes = []
    for hf in (0, 1):
        T = TANH[hf]
        pre = [f'\tVMOVUPS {S(hf, 2)}, {T[2]}',
               f'\tVFMADD132PS {S(hf, 1)}, {{x}}, {T[2]}',  # FMA(r, h·Rh + Rbh, x·Wh + Wbh)
               f'\tVMOVAPS {T[2]}, {{x}}']
        post = [f'\tVMOVUPS {t("one")}, {T[2]}',
                f'\tVSUBPS {S(hf, 0)}, {T[2]}, {T[2]}',    # 1-z
                f'\tVMULPS {{y}}, {T[2]}, {T[2]}',          # (1-z)*h~
                f'\tVMOVUPS {S(hf, 0)}, {{y}}',
                f'\tVFMADD132PS {32 * hf}(R11), {T[2]}, {{y}}']  # FMA(z, h, (1-z)*h~)
        lanes.append(tanh_lane(f'{128 + 32 * hf}(R13)', S(hf, 2), T, pre, post))
    par(*lanes)
    a(f'\tMOVQ {ARGS["hout"] + 8 * r}(DI), R11')
    for hf in (0, 1):
        a(f'\tVMOVUPS {S(hf, 2)}, Y0')
        a(f'\tVMOVUPS Y0, {32 * hf}(R11)(AX*1)')


def chain_rows8():
    """chainRows8Y: rows 0-3 then 4-7 of each 16 columns."""
    a('// func chainRows8Y(k int, xp *float32, b *float32, ldb int, y *float32, ldy int, n int)')
    a('// chainRows8Z\'s chains on AVX2 and FMA: for rows r < 8 and columns')
    a('// j < n (n a multiple of 16), y[r*ldy+j] = the chain acc =')
    a('// FMA(xp[kk*8+r], b[kk*ldb+j], acc) over kk < k ascending from the')
    a('// float32 in y[r*ldy+j], then canon (a NaN becomes 0x7fc00000).')
    a('TEXT ·chainRows8Y(SB), NOSPLIT, $0-56')
    a('\tMOVQ k+0(FP), CX')
    a('\tMOVQ xp+8(FP), SI')
    a('\tMOVQ b+16(FP), DX')
    a('\tMOVQ ldb+24(FP), R8')
    a('\tSHLQ $2, R8')
    a('\tMOVQ y+32(FP), DI')
    a('\tMOVQ ldy+40(FP), R9')
    a('\tSHLQ $2, R9')
    a('\tMOVQ n+48(FP), R10')
    a('\tMOVL $0x7fc00000, AX')
    a('\tMOVQ AX, X15')
    a('\tVPBROADCASTD X15, Y15')
    a('c8cols:')
    a('\tCMPQ R10, $16')
    a('\tJL c8done')
    for half in (0, 1):
        # R12: row 4·half's y, R13: row 4·half + 2's.
        a('\tMOVQ DI, R12')
        if half:
            a('\tLEAQ (R12)(R9*4), R12')
        a('\tLEAQ (R12)(R9*2), R13')
        rowp = ['(R12)', '(R12)(R9*1)', '(R13)', '(R13)(R9*1)']
        for q in range(4):
            base = rowp[q]
            a(f'\tVMOVUPS {base}, Y{2 * q}')
            a(f'\tVMOVUPS 32{base}, Y{2 * q + 1}')
        a('\tMOVQ DX, R14')
        a(f'\tLEAQ {16 * half}(SI), AX')
        a('\tMOVQ CX, R11')
        a('\tTESTQ R11, R11')
        a(f'\tJZ c8s{half}')
        a(f'c8l{half}:')
        a('\tVMOVUPS (R14), Y8')
        a('\tVMOVUPS 32(R14), Y9')
        for q in range(4):
            a(f'\tVBROADCASTSS {4 * q}(AX), Y{10 + q}')
            a(f'\tVFMADD231PS Y8, Y{10 + q}, Y{2 * q}')
            a(f'\tVFMADD231PS Y9, Y{10 + q}, Y{2 * q + 1}')
        a('\tADDQ $32, AX')
        a('\tADDQ R8, R14')
        a('\tDECQ R11')
        a(f'\tJNZ c8l{half}')
        a(f'c8s{half}:')
        for q in range(4):
            base = rowp[q]
            for i in (0, 1):
                x = f'Y{2 * q + i}'
                a(f'\tVCMPPS $3, {x}, {x}, Y14')
                a(f'\tVBLENDVPS Y14, Y15, {x}, {x}')
                a(f'\tVMOVUPS {x}, {32 * i}{base}')
    a('\tADDQ $64, DI')
    a('\tADDQ $64, DX')
    a('\tSUBQ $16, R10')
    a('\tJMP c8cols')
    a('c8done:')
    a('\tVZEROUPPER')
    a('\tRET')
    a()


def main():
    a('// Code generated by gen_stepy.py; DO NOT EDIT.')
    a()
    a('#include "textflag.h"')
    a()
    for rows in (1, 2, 4):
        step('LSTM', rows)
    for rows in (1, 2, 4):
        step('LSTM', rows, peep=True)
    for rows in (1, 2, 4):
        step('GRU', rows)
    chain_rows8()
    sys.stdout.write('\n'.join(out))


if __name__ == '__main__':
    main()
