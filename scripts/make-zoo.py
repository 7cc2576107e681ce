#!/usr/bin/python3
"""make-zoo.py exports the model zoo of issue 16: architectures outside the
five shared models, each with a PyTorch reference output, laid out like
../shared/models (and the ONNX backend test suite):

    ZOO/<name>/model.onnx
    ZOO/<name>/test_data_set_0/input_<i>.pb, output_<i>.pb   (onnx.TensorProto)

`vouch bench --zoo ZOO --peer ort` runs every one of them against ONNX Runtime
and checks vouch's output against the reference (docs/benchmarks.md).

Weights are seeded random; the reference outputs are computed in float64
and rounded to float32. BatchNorm statistics are made realistic: every BN
gets a random affine (gamma in [0.5, 1.5), beta ~ N(0, 0.1)), then the model
runs a few forward passes in train mode on random data with cumulative
averaging (momentum=None), so running_mean/var are the statistics of the
activations the network really produces, and eval-mode activations stay in a
sane range however deep the net. Exports use eval mode; pre-activation BN
stays a BatchNormalization node.

Every BatchNorm that reads a convolution's output alone is folded into that
convolution here, before the export, in float64 and rounded to float32 once
(fold_conv_bn); the reference is then computed in float64 from exactly those
float32 weights, so it is the exact value of the model in the file. (Left to
torch.onnx.export, the fold is done in float32, and the file's weights are
not the weights the reference was computed from: on resnet50 that alone
moved the output by up to 7.5e-6, 0.6 of the tolerance.)

Needs Debian's python3-torch (1.13), python3-torchvision (0.14) and
python3-onnx. Run from anywhere, one export at a time (the machine is shared):

    nice -n 10 /usr/bin/python3 scripts/make-zoo.py [--out /work/zoo] [--only a,b] [--list] [--force] [--dynamic-batch]

Exports are at batch 1 with every shape static; --dynamic-batch makes the
batch dimension dynamic (what `vouch bench --zoo DIR --batch 8` needs for
models whose Reshapes would otherwise bake in batch 1: BERT, GPT, ViT,
ShuffleNet, Swin).

A model whose directory already holds model.onnx and its outputs is skipped
(unless --force). A model that fails to export is reported and skipped; the
script exits non-zero at the end if any did. The zoo never goes into git.
"""
import argparse
import copy
import math
import os
import sys
import time
import traceback

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
import torchvision.models as tvm
import torchvision.models.segmentation as tvs
from onnx import numpy_helper

SEED = 16
OPSET = 13


# --- recurrent, 1-D, tabular and transformer models written here -----------

class RNNSeq(nn.Module):
    """A recurrent layer stack over a batch-first sequence; returns the full
    output sequence (every step's hidden state, both directions)."""

    def __init__(self, kind, inp, hidden, layers, bidir):
        super().__init__()
        cls = {"lstm": nn.LSTM, "gru": nn.GRU}[kind]
        self.rnn = cls(inp, hidden, num_layers=layers, bidirectional=bidir, batch_first=True)

    def forward(self, x):
        y, _ = self.rnn(x)
        return y


class RNNClassifier(nn.Module):
    """Embedding-free sequence classifier: LSTM, then a linear head on the
    last step (a common text/time-series shape)."""

    def __init__(self, inp, hidden, classes):
        super().__init__()
        self.rnn = nn.LSTM(inp, hidden, num_layers=1, batch_first=True)
        self.fc = nn.Linear(hidden, classes)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class ECGNet(nn.Module):
    """1-D CNN over a 12-lead ECG strip (Conv1d+BN+ReLU+MaxPool blocks)."""

    def __init__(self, leads=12, classes=5):
        super().__init__()
        chans = [leads, 32, 64, 128, 128, 256]
        layers = []
        for a, b in zip(chans, chans[1:]):
            layers += [nn.Conv1d(a, b, 7, padding=3), nn.BatchNorm1d(b), nn.ReLU(), nn.MaxPool1d(2)]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(256, classes)

    def forward(self, x):
        return self.head(self.body(x).mean(dim=2))


class Res1d(nn.Module):
    def __init__(self, c, k, dil):
        super().__init__()
        p = dil * (k - 1) // 2
        self.c1 = nn.Conv1d(c, c, k, padding=p, dilation=dil)
        self.b1 = nn.BatchNorm1d(c)
        self.c2 = nn.Conv1d(c, c, k, padding=p, dilation=dil)
        self.b2 = nn.BatchNorm1d(c)

    def forward(self, x):
        return F.relu(x + self.b2(self.c2(F.relu(self.b1(self.c1(x))))))


class TCN(nn.Module):
    """Residual dilated 1-D CNN (a temporal convolutional network) over an
    audio-like signal, strided stem."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv1d(1, 64, 15, stride=4, padding=7), nn.BatchNorm1d(64), nn.ReLU())
        self.blocks = nn.Sequential(*[Res1d(64, 3, d) for d in (1, 2, 4, 8, 16, 1, 2, 4)])
        self.head = nn.Linear(64, 10)

    def forward(self, x):
        return self.head(self.blocks(self.stem(x)).mean(dim=2))


class DWConv1d(nn.Module):
    """Depthwise-separable 1-D CNN (keyword spotting style)."""

    def __init__(self):
        super().__init__()
        layers = [nn.Conv1d(40, 128, 5, padding=2), nn.BatchNorm1d(128), nn.ReLU()]
        for _ in range(4):
            layers += [nn.Conv1d(128, 128, 9, padding=4, groups=128), nn.BatchNorm1d(128), nn.ReLU(),
                       nn.Conv1d(128, 128, 1), nn.BatchNorm1d(128), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(128, 12)

    def forward(self, x):
        return self.head(self.body(x).mean(dim=2))


class MLP(nn.Module):
    def __init__(self, dims, bn=False):
        super().__init__()
        layers = []
        for a, b in zip(dims[:-2], dims[1:-1]):
            layers.append(nn.Linear(a, b))
            if bn:
                layers.append(nn.BatchNorm1d(b))
            layers.append(nn.ReLU())
        layers.append(nn.Linear(dims[-2], dims[-1]))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return torch.softmax(self.net(x), dim=1)


class Attention(nn.Module):
    def __init__(self, d, heads, causal):
        super().__init__()
        self.h, self.dk, self.causal = heads, d // heads, causal
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, d)

    def forward(self, x, mask):
        b, s, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q = q.reshape(b, s, self.h, self.dk).transpose(1, 2)
        k = k.reshape(b, s, self.h, self.dk).transpose(1, 2)
        v = v.reshape(b, s, self.h, self.dk).transpose(1, 2)
        att = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.dk) + mask
        y = torch.matmul(torch.softmax(att, dim=-1), v)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class Block(nn.Module):
    def __init__(self, d, heads, ff, causal, pre_norm):
        super().__init__()
        self.att = Attention(d, heads, causal)
        self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.ff1, self.ff2 = nn.Linear(d, ff), nn.Linear(ff, d)
        self.pre = pre_norm

    def forward(self, x, mask):
        if self.pre:
            x = x + self.att(self.n1(x), mask)
            return x + self.ff2(F.gelu(self.ff1(self.n2(x))))
        x = self.n1(x + self.att(x, mask))
        return self.n2(x + self.ff2(F.gelu(self.ff1(x))))


class BERT(nn.Module):
    """A BERT-base-size encoder (post-norm, GELU, padding mask) with a
    classification head on the first token."""

    def __init__(self, vocab=30522, d=768, layers=12, heads=12, ff=3072, maxlen=512, classes=2):
        super().__init__()
        self.tok, self.pos, self.typ = nn.Embedding(vocab, d), nn.Embedding(maxlen, d), nn.Embedding(2, d)
        self.norm = nn.LayerNorm(d)
        self.blocks = nn.ModuleList([Block(d, heads, ff, False, False) for _ in range(layers)])
        self.head = nn.Linear(d, classes)

    def forward(self, input_ids, attention_mask):
        s = input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.norm(self.tok(input_ids) + self.pos(pos) + self.typ(torch.zeros_like(input_ids)))
        mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        for b in self.blocks:
            x = b(x, mask)
        return torch.softmax(self.head(torch.tanh(x[:, 0])), dim=-1)


class GPT(nn.Module):
    """A causal (GPT-2-style, pre-norm) decoder returning next-token logits
    for every position."""

    def __init__(self, vocab=8192, d=512, layers=6, heads=8, ff=2048, maxlen=256):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(maxlen, d)
        self.blocks = nn.ModuleList([Block(d, heads, ff, True, True) for _ in range(layers)])
        self.norm = nn.LayerNorm(d)
        self.lm = nn.Linear(d, vocab, bias=False)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = self.tok(input_ids) + self.pos(pos)
        mask = torch.triu(torch.full((s, s), -10000.0), diagonal=1)
        for b in self.blocks:
            x = b(x, mask)
        return self.lm(self.norm(x))


class UNet(nn.Module):
    """A small U-Net (Conv+BN+ReLU, MaxPool down, ConvTranspose up, Concat skips)."""

    def __init__(self, c=16, classes=2):
        super().__init__()

        def dbl(a, b):
            return nn.Sequential(nn.Conv2d(a, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU(),
                                 nn.Conv2d(b, b, 3, padding=1), nn.BatchNorm2d(b), nn.ReLU())
        self.d1, self.d2, self.d3, self.d4 = dbl(3, c), dbl(c, 2 * c), dbl(2 * c, 4 * c), dbl(4 * c, 8 * c)
        self.u3, self.c3 = nn.ConvTranspose2d(8 * c, 4 * c, 2, stride=2), dbl(8 * c, 4 * c)
        self.u2, self.c2 = nn.ConvTranspose2d(4 * c, 2 * c, 2, stride=2), dbl(4 * c, 2 * c)
        self.u1, self.c1 = nn.ConvTranspose2d(2 * c, c, 2, stride=2), dbl(2 * c, c)
        self.out = nn.Conv2d(c, classes, 1)

    def forward(self, x):
        x1 = self.d1(x)
        x2 = self.d2(F.max_pool2d(x1, 2))
        x3 = self.d3(F.max_pool2d(x2, 2))
        x4 = self.d4(F.max_pool2d(x3, 2))
        y = self.c3(torch.cat([self.u3(x4), x3], 1))
        y = self.c2(torch.cat([self.u2(y), x2], 1))
        y = self.c1(torch.cat([self.u1(y), x1], 1))
        return self.out(y)


class SegOut(nn.Module):
    """torchvision's segmentation models return a dict; export its 'out'."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        return self.m(x)["out"]


class Logits(nn.Module):
    """Inception/GoogLeNet return named tuples in train mode; eval gives a tensor."""

    def __init__(self, m):
        super().__init__()
        self.m = m

    def forward(self, x):
        y = self.m(x)
        return y if torch.is_tensor(y) else y[0]


# --- the zoo ---------------------------------------------------------------

def img(h=224, w=None):
    return [torch.randn(1, 3, h, w or h)]


def tv(fn, **kw):
    return lambda: fn(weights=None, **kw)


def seg(fn):
    return lambda: SegOut(fn(weights=None, weights_backbone=None, aux_loss=None) if fn is not tvs.lraspp_mobilenet_v3_large
                          else fn(weights=None, weights_backbone=None))


def ids(vocab, s):
    return torch.randint(0, vocab, (1, s), generator=torch.Generator().manual_seed(SEED))


# name: (constructor, inputs, input names, opset)
ZOO = {
    # classification, 224x224 (inception_v3 at its native 299)
    "resnet50": (tv(tvm.resnet50), img, None, OPSET),
    "resnext50_32x4d": (tv(tvm.resnext50_32x4d), img, None, OPSET),
    "wide_resnet50_2": (tv(tvm.wide_resnet50_2), img, None, OPSET),
    "vgg11": (tv(tvm.vgg11), img, None, OPSET),
    "vgg11_bn": (tv(tvm.vgg11_bn), img, None, OPSET),
    "alexnet": (tv(tvm.alexnet), img, None, OPSET),
    "densenet121": (tv(tvm.densenet121), img, None, OPSET),
    "googlenet": (lambda: Logits(tvm.googlenet(weights=None, aux_logits=False, init_weights=True)), img, None, OPSET),
    "inception_v3": (lambda: Logits(tvm.inception_v3(weights=None, aux_logits=False, init_weights=True)), lambda: img(299), None, OPSET),
    "squeezenet1_0": (tv(tvm.squeezenet1_0), img, None, OPSET),
    "squeezenet1_1": (tv(tvm.squeezenet1_1), img, None, OPSET),
    "shufflenet_v2_x1_0": (tv(tvm.shufflenet_v2_x1_0), img, None, OPSET),
    "mobilenet_v3_small": (tv(tvm.mobilenet_v3_small), img, None, OPSET),
    "mobilenet_v3_large": (tv(tvm.mobilenet_v3_large), img, None, OPSET),
    "mnasnet1_0": (tv(tvm.mnasnet1_0), img, None, OPSET),
    "efficientnet_b0": (tv(tvm.efficientnet_b0), img, None, OPSET),
    "regnet_x_400mf": (tv(tvm.regnet_x_400mf), img, None, OPSET),
    "regnet_y_400mf": (tv(tvm.regnet_y_400mf), img, None, OPSET),
    "convnext_tiny": (tv(tvm.convnext_tiny), img, None, OPSET),
    "vit_b_16": (tv(tvm.vit_b_16), img, None, 14),
    "swin_t": (tv(tvm.swin_t), img, None, 14),
    # segmentation, smaller inputs
    "fcn_resnet50": (seg(tvs.fcn_resnet50), lambda: img(160), None, OPSET),
    "deeplabv3_mobilenet_v3_large": (seg(tvs.deeplabv3_mobilenet_v3_large), lambda: img(224), None, OPSET),
    "lraspp_mobilenet_v3_large": (seg(tvs.lraspp_mobilenet_v3_large), lambda: img(224), None, OPSET),
    "unet_small": (lambda: UNet(), lambda: img(128), None, OPSET),
    # recurrent: batch 1, 32 steps
    "lstm_64x128": (lambda: RNNSeq("lstm", 64, 128, 1, False), lambda: [torch.randn(1, 32, 64)], None, OPSET),
    "lstm2_128x256": (lambda: RNNSeq("lstm", 128, 256, 2, False), lambda: [torch.randn(1, 32, 128)], None, OPSET),
    "bilstm_64x128": (lambda: RNNSeq("lstm", 64, 128, 1, True), lambda: [torch.randn(1, 32, 64)], None, OPSET),
    "bilstm2_256x512": (lambda: RNNSeq("lstm", 256, 512, 2, True), lambda: [torch.randn(1, 32, 256)], None, OPSET),
    "gru_64x128": (lambda: RNNSeq("gru", 64, 128, 1, False), lambda: [torch.randn(1, 32, 64)], None, OPSET),
    "bigru2_128x256": (lambda: RNNSeq("gru", 128, 256, 2, True), lambda: [torch.randn(1, 32, 128)], None, OPSET),
    "lstm_classifier": (lambda: RNNClassifier(40, 256, 10), lambda: [torch.randn(1, 100, 40)], None, OPSET),
    # 1-D CNNs
    "ecg_cnn1d": (lambda: ECGNet(), lambda: [torch.randn(1, 12, 2048)], None, OPSET),
    "tcn1d": (lambda: TCN(), lambda: [torch.randn(1, 1, 16000)], None, OPSET),
    "kws_dwconv1d": (lambda: DWConv1d(), lambda: [torch.randn(1, 40, 98)], None, OPSET),
    # transformers
    "bert_base": (lambda: BERT(), lambda: [ids(30522, 128), torch.ones(1, 128, dtype=torch.int64)], ["input_ids", "attention_mask"], 14),
    "gpt_decoder": (lambda: GPT(), lambda: [ids(8192, 64)], ["input_ids"], 14),
    # tabular
    "mlp_tabular": (lambda: MLP([64, 256, 256, 128, 2]), lambda: [torch.randn(1, 64)], None, OPSET),
    "mlp_tabular_bn": (lambda: MLP([200, 512, 512, 256, 10], bn=True), lambda: [torch.randn(1, 200)], None, OPSET),
}


def realistic_bn(model, inputs):
    """Randomises every BatchNorm's affine and gives it the running
    statistics of the activations the model produces (train-mode passes on
    random data like the inputs, cumulative averages)."""
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not bns:
        return
    with torch.no_grad():
        for m in bns:
            if m.affine:
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0.0, 0.1)
            m.reset_running_stats()
            m.momentum = None
    model.train()
    with torch.no_grad():
        for _ in range(3):
            batch = [torch.cat([torch.randn_like(x) for _ in range(4)]) if x.is_floating_point() else x.repeat(4, *[1] * (x.dim() - 1))
                     for x in inputs]
            model(*batch)


def fold_conv_bn(model, inputs):
    """Folds every BatchNorm whose input is a convolution's output (seen in
    one eval-mode pass with forward hooks) into that convolution: the scale
    gamma/sqrt(var+eps) and the shifted bias in float64, the products
    rounded to float32 once; the BatchNorm becomes an identity module.
    A convolution or BatchNorm that runs more than once is left alone.
    Returns the number of pairs folded. The caller checks the folded model
    against the unfolded one in float64 (a conv output that something else
    also read would show as a large difference)."""
    convs = [m for m in model.modules() if isinstance(m, nn.modules.conv._ConvNd)
             and not isinstance(m, nn.modules.conv._ConvTransposeNd)]
    bns = [m for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]
    if not convs or not bns:
        return 0
    made, calls, pairs = {}, {}, []

    def conv_hook(m, i, o):
        calls[m] = calls.get(m, 0) + 1
        made[id(o)] = (m, o)  # o kept alive so its id stays unique

    def bn_hook(m, i, o):
        calls[m] = calls.get(m, 0) + 1
        src = made.get(id(i[0]))
        if src is not None and src[1] is i[0]:
            pairs.append((src[0], m))

    hooks = [c.register_forward_hook(conv_hook) for c in convs] + [b.register_forward_hook(bn_hook) for b in bns]
    model.eval()
    try:
        with torch.no_grad():
            model(*inputs)
    finally:
        for h in hooks:
            h.remove()
    folded = {}
    for c, b in pairs:
        if calls[c] != 1 or calls[b] != 1 or c in folded or not b.track_running_stats:
            continue
        w = c.weight.detach().double()
        bias = c.bias.detach().double() if c.bias is not None else torch.zeros(w.shape[0], dtype=torch.float64)
        s = torch.rsqrt(b.running_var.double() + b.eps)
        if b.affine:
            s = b.weight.detach().double() * s
        shift = b.bias.detach().double() if b.affine else torch.zeros_like(s)
        with torch.no_grad():
            c.weight.copy_((w * s.reshape(-1, *[1] * (w.dim() - 1))).float())
            c.bias = nn.Parameter(((bias - b.running_mean.double()) * s + shift).float())
        folded[c] = b
    # Replace the folded BatchNorms by identities (wherever they sit).
    gone = set(id(b) for b in folded.values())
    for parent in list(model.modules()):
        for n, ch in list(parent.named_children()):
            if id(ch) in gone:
                setattr(parent, n, nn.Identity())
    return len(folded)


def write_pb(path, array, name):
    t = numpy_helper.from_array(np.ascontiguousarray(array), name)
    with open(path, "wb") as f:
        f.write(t.SerializeToString())


def export(name, out, force, dynamic_batch=False):
    ctor, make_inputs, in_names, opset = ZOO[name]
    d = os.path.join(out, name)
    onnx_path = os.path.join(d, "model.onnx")
    ref = os.path.join(d, "test_data_set_0", "output_0.pb")
    if not force and os.path.exists(onnx_path) and os.path.exists(ref):
        print(f"{name}: present, skipped")
        return True
    torch.manual_seed(SEED)
    model = ctor()
    # A weight matrix initialised to zero (ViT's classification head) would
    # make the output a constant that any engine matches: draw it instead.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() >= 2 and not p.any():
                p.normal_(0.0, 0.02)
    inputs = make_inputs()
    realistic_bn(model, inputs)
    model.eval()
    wide = [x.double() if x.is_floating_point() else x for x in inputs]

    def ref64(m):
        m64 = copy.deepcopy(m).double()
        with torch.no_grad():
            return m64(*wide)
    # Conv+BN folded here (float64, rounded once), so that the file's
    # weights are the model's float32 weights: torch.onnx.export finds
    # nothing left to fold, and the reference below is the exact value of
    # the model in the file.
    y_unfolded = ref64(model)
    folded = fold_conv_bn(model, inputs)
    # The reference is computed in float64 (a copy of the model, the
    # float32 inputs widened) and rounded once: the exact value to float32
    # precision, so that a deep net's check measures the engine's rounding,
    # not PyTorch's float32 rounding as well.
    y = ref64(model)
    if folded:
        # The fold's rounding moves the output by float32 rounding of the
        # weights; a wrong fold (a conv output read by more than its BN)
        # by far more.
        for a, b in zip(*[list(t) if isinstance(t, (tuple, list)) else [t] for t in (y, y_unfolded)]):
            rel = ((a - b).abs().max() / b.abs().max().clamp_min(1e-30)).item()
            if rel > 1e-4:
                raise RuntimeError(f"Conv+BN fold changed the output by {rel:.2e} (relative): a wrong fold")
    del y_unfolded
    outs = [o.float() for o in (list(y) if isinstance(y, (tuple, list)) else [y])]
    in_names = in_names or [f"input_{i}" if len(inputs) > 1 else "input" for i in range(len(inputs))]
    out_names = ["output" if len(outs) == 1 else f"output_{i}" for i in range(len(outs))]
    os.makedirs(os.path.join(d, "test_data_set_0"), exist_ok=True)
    tmp = onnx_path + ".tmp"
    t0 = time.time()
    # Not under no_grad: nn.MultiheadAttention's eval-mode fast path (a
    # fused op with no ONNX export) is off while gradients are enabled.
    dyn = {n: {0: "batch"} for n in in_names + out_names} if dynamic_batch else None
    torch.onnx.export(model, tuple(inputs), tmp, opset_version=opset, input_names=in_names,
                      output_names=out_names, do_constant_folding=True, dynamic_axes=dyn)
    onnx.checker.check_model(tmp)
    g = onnx.load(tmp).graph
    nodes = len(g.node)
    # The file's convolution weights must be the model's own (the exporter
    # folded nothing into them), or the reference is not the file's value.
    own = {p.detach().numpy().tobytes() for m in model.modules()
           if isinstance(m, nn.modules.conv._ConvNd) for p in m.parameters()}
    inits = {t.name: t for t in g.initializer}
    for n in g.node:
        for v in n.input[1:3] if n.op_type == "Conv" else []:
            if v in inits and numpy_helper.to_array(inits[v]).tobytes() not in own:
                raise RuntimeError(f"Conv {n.name}: initializer {v} is not one of the model's weights "
                                   "(the exporter changed it: the reference would not be the file's value)")
    for i, x in enumerate(inputs):
        write_pb(os.path.join(d, "test_data_set_0", f"input_{i}.pb"), x.numpy(), in_names[i])
    for i, o in enumerate(outs):
        write_pb(os.path.join(d, "test_data_set_0", f"output_{i}.pb"), o.numpy(), out_names[i])
    os.replace(tmp, onnx_path)
    params = sum(p.numel() for p in model.parameters())
    print(f"{name}: {nodes} nodes, {params / 1e6:.2f} M parameters, {folded} Conv+BN folded, opset {opset}, "
          f"inputs {[tuple(x.shape) for x in inputs]}, exported in {time.time() - t0:.1f} s", flush=True)
    return True


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="/work/zoo")
    ap.add_argument("--only", default="", help="comma-separated model names")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--dynamic-batch", action="store_true",
                    help="export the first dimension of every input and output as dynamic (for --batch 8: "
                         "a batch-1 export bakes the batch into its Reshape shapes)")
    a = ap.parse_args()
    if a.list:
        print("\n".join(ZOO))
        return 0
    torch.set_num_threads(1)
    names = [n for n in a.only.split(",") if n] or list(ZOO)
    failed = []
    for n in names:
        if n not in ZOO:
            print(f"make-zoo: unknown model {n!r} (see --list)", file=sys.stderr)
            return 2
        try:
            export(n, a.out, a.force, a.dynamic_batch)
        except Exception as e:  # report and go on: one model's export failure is not the zoo's
            traceback.print_exc()
            print(f"{n}: FAILED: {type(e).__name__}: {e}", file=sys.stderr, flush=True)
            failed.append(n)
    print(f"make-zoo: {len(names) - len(failed)} of {len(names)} exported to {a.out}" +
          (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
