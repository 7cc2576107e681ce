#!/usr/bin/env python3
"""Generates gemmz_amd64.s and gemmz_amd64.go (go generate ./kernel/amd64):
the AVX-512 GEMM microkernels GemmZ{MR}x16 and GemmZ{MR}x32. Plain Go
assembly; this script only saves typing the unrolled steps.

Each kernel computes an MR x 16 (one zmm per row) or MR x 32 (two) tile of
C, every output the chain acc = FMA(A[i,kk], B[kk,j], acc) over kk
ascending from +0 (or from the float32 parked in C when Load is 1): the
same chains as Sgemm6x16 and its portable twin, only more of them at a
time. A's rows are read in place (row i at A + i*LDA, step kk at +kk),
B's step kk at B + kk*LDB (a packed 16-column panel, LDB = 16, or B read
in place), the second 16 columns at + BOff. The final store is
amd64.Store's: canon(acc) (a NaN lane as 0x7fc00000), + Bias[i], + R,
+ R2, then the clamp (VMAXPS Lo, VMINPS Hi) when Clamp, in that order,
each with the accumulator as the first operand."""

L = []
a = L.append
G = []
g = G.append

MAX16 = 16  # rows of the 16-column kernels
MAX32 = 14  # rows of the 32-column kernels (28 accumulators)

# Args field offsets (GemmZArgs; gemmz_amd64.go checks them).
OFF = dict(K=0, A=8, LDA=16, B=24, LDB=32, BOff=40, C=48, LDC=56, Load=64,
           Bias=72, R=80, LDR=88, R2=96, LDR2=104, Lo=112, Hi=116, Mask=120,
           Clamp=124, PF=128)

# Row pointers: rows 4p..4p+3 at PTR[p] + {0, S, 2S, S3} (S = LDA*4 in
# R10, S3 = 3S in R11).
PTR = ['SI', 'AX', 'BX', 'R12']


def arow(i, disp):
    p, r = PTR[i // 4], i % 4
    d = f'{disp}' if disp else ''
    return [f'{d}({p})', f'{d}({p})(R10*1)', f'{d}({p})(R10*2)', f'{d}({p})(R11*1)'][r]


def kernel(mr, nz):
    name = f'GemmZ{mr}x{16*nz}'
    p = name.lower()
    acc = lambda i, c: i * nz + c
    last = nz - 1  # the masked zmm column of each row
    a(f'// func {name}(p *GemmZArgs)')
    a(f'TEXT ·{name}(SB), NOSPLIT, $0-8')
    a('\tMOVQ p+0(FP), DX')
    a(f'\tMOVL {OFF["Mask"]}(DX), AX')
    a('\tKMOVW AX, K1')
    for r in range(mr * nz):
        a(f'\tVPXORD Z{r}, Z{r}, Z{r}')
    a(f'\tCMPQ {OFF["Load"]}(DX), $0')
    a(f'\tJEQ {p}go')
    a(f'\tMOVQ {OFF["C"]}(DX), DI')
    a(f'\tMOVQ {OFF["LDC"]}(DX), R8')
    a('\tSHLQ $2, R8')
    for i in range(mr):
        for c in range(nz):
            if c == last:
                a(f'\tVMOVUPS {64*c}(DI), K1, Z{acc(i, c)}')
            else:
                a(f'\tVMOVUPS {64*c}(DI), Z{acc(i, c)}')
        if i < mr - 1:
            a('\tADDQ R8, DI')
    a(f'{p}go:')
    a(f'\tMOVQ {OFF["K"]}(DX), CX')
    a(f'\tMOVQ {OFF["B"]}(DX), DI')
    a(f'\tMOVQ {OFF["LDB"]}(DX), R8')
    a('\tSHLQ $2, R8')
    if nz == 2:
        a(f'\tMOVQ {OFF["BOff"]}(DX), R9')
        a('\tSHLQ $2, R9')
    a(f'\tMOVQ {OFF["LDA"]}(DX), R10')
    a('\tSHLQ $2, R10')
    a('\tLEAQ (R10)(R10*2), R11')
    a(f'\tMOVQ {OFF["A"]}(DX), SI')
    np = (mr + 3) // 4
    for q in range(1, np):
        a(f'\tLEAQ ({PTR[q-1]})(R10*4), {PTR[q]}')

    def step(u, pf=False):
        if pf:
            a(f'\tPREFETCHT1 {64*u}(R13)')
        if nz == 2:
            a('\tVMOVUPS (DI), Z28')
            a('\tVMOVUPS (DI)(R9*1), Z29')
            a('\tADDQ R8, DI')
            for i in range(mr):
                bc = 'Z30' if i % 2 == 0 else 'Z31'
                a(f'\tVBROADCASTSS {arow(i, 4*u)}, {bc}')
                a(f'\tVFMADD231PS Z28, {bc}, Z{acc(i, 0)}')
                a(f'\tVFMADD231PS Z29, {bc}, Z{acc(i, 1)}')
        else:
            bz = 'Z28' if u % 2 == 0 else 'Z29'
            a(f'\tVMOVUPS (DI), {bz}')
            a('\tADDQ R8, DI')
            for i in range(mr):
                a(f'\tVFMADD231PS.BCST {arow(i, 4*u)}, {bz}, Z{acc(i, 0)}')

    def advance(n):
        for q in range(np):
            a(f'\tADDQ ${4*n}, {PTR[q]}')

    # With PF (not nil) each step also prefetches a line of PF into L2.
    a(f'\tMOVQ {OFF["PF"]}(DX), R13')
    a('\tTESTQ R13, R13')
    a(f'\tJEQ {p}loop4')
    a(f'{p}loop4pf:')
    a('\tCMPQ CX, $4')
    a(f'\tJLT {p}tail')
    for u in range(4):
        step(u, True)
    advance(4)
    a('\tADDQ $256, R13')
    a('\tSUBQ $4, CX')
    a(f'\tJMP {p}loop4pf')
    a(f'{p}loop4:')
    a('\tCMPQ CX, $4')
    a(f'\tJLT {p}tail')
    for u in range(4):
        step(u)
    advance(4)
    a('\tSUBQ $4, CX')
    a(f'\tJMP {p}loop4')
    a(f'{p}tail:')
    a('\tTESTQ CX, CX')
    a(f'\tJEQ {p}done')
    step(0)
    advance(1)
    a('\tDECQ CX')
    a(f'\tJMP {p}tail')
    a(f'{p}done:')
    # canon: NaN lanes become 0x7fc00000 (Z30).
    a('\tMOVL $0x7fc00000, AX')
    a('\tVPBROADCASTD AX, Z30')
    for r in range(mr * nz):
        a(f'\tVCMPPS $3, Z{r}, Z{r}, K2')
        a(f'\tVMOVAPS Z30, K2, Z{r}')
    # + Bias[i] (the accumulator the first operand).
    a(f'\tMOVQ {OFF["Bias"]}(DX), AX')
    a('\tTESTQ AX, AX')
    a(f'\tJEQ {p}nobias')
    for i in range(mr):
        for c in range(nz):
            a(f'\tVADDPS.BCST {4*i}(AX), Z{acc(i, c)}, Z{acc(i, c)}')
    a(f'{p}nobias:')
    # + R, then + R2: masked loads in the last column (lanes past the
    # tile's columns are neither read nor stored).
    for fld, ld in (('R', 'LDR'), ('R2', 'LDR2')):
        a(f'\tMOVQ {OFF[fld]}(DX), AX')
        a('\tTESTQ AX, AX')
        a(f'\tJEQ {p}no{fld.lower()}')
        a(f'\tMOVQ {OFF[ld]}(DX), BX')
        a('\tSHLQ $2, BX')
        for i in range(mr):
            for c in range(nz):
                r = acc(i, c)
                if c == last:
                    a(f'\tVADDPS {64*c}(AX), Z{r}, K1, Z{r}')
                else:
                    a(f'\tVADDPS {64*c}(AX), Z{r}, Z{r}')
            if i < mr - 1:
                a('\tADDQ BX, AX')
        a(f'{p}no{fld.lower()}:')
    a(f'\tCMPB {OFF["Clamp"]}(DX), $0')
    a(f'\tJEQ {p}noclamp')
    a(f'\tVBROADCASTSS {OFF["Lo"]}(DX), Z28')
    a(f'\tVBROADCASTSS {OFF["Hi"]}(DX), Z29')
    for r in range(mr * nz):
        a(f'\tVMAXPS Z{r}, Z28, Z{r}')
        a(f'\tVMINPS Z{r}, Z29, Z{r}')
    a(f'{p}noclamp:')
    a(f'\tMOVQ {OFF["C"]}(DX), DI')
    a(f'\tMOVQ {OFF["LDC"]}(DX), R8')
    a('\tSHLQ $2, R8')
    for i in range(mr):
        for c in range(nz):
            if c == last:
                a(f'\tVMOVUPS Z{acc(i, c)}, K1, {64*c}(DI)')
            else:
                a(f'\tVMOVUPS Z{acc(i, c)}, {64*c}(DI)')
        if i < mr - 1:
            a('\tADDQ R8, DI')
    a('\tVZEROUPPER')
    a('\tRET\n')


a('// Code generated by gen_gemmz.py; DO NOT EDIT.\n')
a('#include "textflag.h"\n')
for mr in range(1, MAX16 + 1):
    kernel(mr, 1)
for mr in range(1, MAX32 + 1):
    kernel(mr, 2)

with open('gemmz_amd64.s', 'w') as f:
    f.write('\n'.join(L).rstrip('\n') + '\n')

g('// Code generated by gen_gemmz.py; DO NOT EDIT.')
g('')
g('package amd64')
g('')
g('import "unsafe"')
g('')
g('''// GemmZArgs is one tile of an AVX-512 GEMM microkernel (GemmZ16 and
// GemmZ32): its operands and its final store (the field offsets are fixed:
// the assembly reads them). Strides are in floats.
//
// The tile's rows are MR (the kernel's), its columns 16 (GemmZ16) or 32
// (GemmZ32). Output (i, j) is the chain acc = FMA(A[i*LDA+kk],
// B[kk*LDB+j'], acc) over kk < K ascending, from +0 when Load is 0 and
// from C[i*LDC+j] when Load is 1, where j' = j for j < 16 and
// BOff + j - 16 for the second 16 columns. The value stored at
// C[i*LDC+j] is canon(acc) (a NaN as the canonical quiet NaN 0x7fc00000),
// then + Bias[i] when Bias is not nil, then + R[i*LDR+j] when R is not
// nil, then + R2[i*LDR2+j] when R2 is not nil, then, when Clamp,
// v = Lo > v ? Lo : v and v = Hi < v ? Hi : v: amd64.Store's operations
// (and Epi's for R2), each with v the first operand.
//
// Mask selects the valid columns of the last 16 (bit j for column j, or
// 16+j in GemmZ32): C and the residuals are read and written there only
// where its bit is set (1<<16-1 for a full tile). B is read in full (16
// or 32 floats a step), A and Bias for the MR rows only. When PF is not
// nil, step kk also prefetches the 64 bytes at PF + 64*kk into L2 (a hint:
// nothing there is read or changes the results).
type GemmZArgs struct {
	K     int      // 0
	A     *float32 // 8
	LDA   int      // 16
	B     *float32 // 24
	LDB   int      // 32
	BOff  int      // 40
	C     *float32 // 48
	LDC   int      // 56
	Load  int      // 64
	Bias  *float32 // 72
	R     *float32 // 80
	LDR   int      // 88
	R2    *float32 // 96
	LDR2  int      // 104
	Lo    float32  // 112
	Hi    float32  // 116
	Mask  uint32   // 120
	Clamp bool     // 124
	PF    *float32 // 128
}''')
g('')
g('// The assembly reads GemmZArgs at these offsets: a compile error here')
g('// means the layout moved.')
g('var _ = [1]struct{}{}[unsafe.Offsetof(GemmZArgs{}.Clamp)-%d]' % OFF['Clamp'])
g('var _ = [1]struct{}{}[unsafe.Offsetof(GemmZArgs{}.Lo)-%d]' % OFF['Lo'])
g('var _ = [1]struct{}{}[unsafe.Offsetof(GemmZArgs{}.R2)-%d]' % OFF['R2'])
g('var _ = [1]struct{}{}[unsafe.Offsetof(GemmZArgs{}.PF)-%d]' % OFF['PF'])
g('')
g(f'// GemmZMax16 and GemmZMax32 are the most rows of GemmZ16 and GemmZ32.')
g(f'const (\n\tGemmZMax16 = {MAX16}\n\tGemmZMax32 = {MAX32}\n)')
for nz, mx in ((1, MAX16), (2, MAX32)):
    w = 16 * nz
    g('')
    g(f'// GemmZ{w} runs the MR x {w} kernel, GemmZ{{MR}}x{w}, on the tile p')
    g(f'// (see GemmZArgs), 1 <= MR <= GemmZMax{w}; only valid where EnabledZ.')
    g(f'func GemmZ{w}(mr int, p *GemmZArgs) {{')
    g('\tswitch mr {')
    for mr in range(1, mx + 1):
        g(f'\tcase {mr}:')
        g(f'\t\tGemmZ{mr}x{w}(p)')
    g('\tdefault:')
    g(f'\t\tpanic("amd64: GemmZ{w}: bad row count")')
    g('\t}')
    g('}')
for nz, mx in ((1, MAX16), (2, MAX32)):
    for mr in range(1, mx + 1):
        g('')
        g('//go:noescape')
        g(f'func GemmZ{mr}x{16*nz}(p *GemmZArgs)')

with open('gemmz_amd64.go', 'w') as f:
    f.write('\n'.join(G) + '\n')
