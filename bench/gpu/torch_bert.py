"""bench/gpu/torch_bert.py: issue 19's BERT-base peer on the GPU machine.

Exports scripts/make-zoo.py's bert_base (the same module, seed and opset as
the zoo, a dynamic batch axis) to OUT/bert_base/model.onnx when asked, and
times the PyTorch model on the GPU at the given batches (seq 128): FP32 with
TF32 off and FP16, eager and CUDA graphs, median of 30 replays; and counts
how many of row 0's outputs change when it runs in the batch instead of
alone (PyTorch's batch invariance, the figure issue 19 sets vouch beside).
make-zoo.py is loaded for its model classes only; where the onnx package or
torchvision is missing, stand-ins keep its imports working (its own export
path, which needs onnx, is not used).
"""
import argparse
import importlib.util
import os
import sys
import time
import types

import numpy as np
import torch


class StandIn(types.ModuleType):
    """A missing module: every attribute is this stand-in (make-zoo.py's
    table names torchvision's constructors without calling them)."""

    def __getattr__(self, name):
        return self

    def __call__(self, *a, **k):
        return self


def load_zoo():
    for name in ("onnx", "onnx.numpy_helper", "torchvision", "torchvision.models", "torchvision.models.segmentation"):
        try:
            __import__(name)
        except ImportError:
            sys.modules[name] = StandIn(name)
    path = os.environ.get("MAKE_ZOO") or os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "make-zoo.py")
    spec = importlib.util.spec_from_file_location("make_zoo", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class WithHidden(torch.nn.Module):
    """make-zoo.py's BERT.forward, also returning the last encoder state."""

    def __init__(self, bert):
        super().__init__()
        self.b = bert

    def forward(self, input_ids, attention_mask):
        m = self.b
        s = input_ids.shape[1]
        pos = torch.arange(s, device=input_ids.device).unsqueeze(0)
        x = m.norm(m.tok(input_ids) + m.pos(pos) + m.typ(torch.zeros_like(input_ids)))
        mask = (1.0 - attention_mask[:, None, None, :].to(torch.float32)) * -10000.0
        for blk in m.blocks:
            x = blk(x, mask)
        return torch.softmax(m.head(torch.tanh(x[:, 0])), dim=-1), x


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--export", default="", help="directory for bert_base/model.onnx and inputs")
    ap.add_argument("--batches", default="1,64")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--dtypes", default="fp32,fp16", help="which of fp32 (TF32 off) and fp16 (autocast) to time")
    ap.add_argument("--hidden", action="store_true",
                    help="the model also returns the last encoder state (output \"hidden\", batch x 128 x 768): "
                         "batch invariance counted over 98,304 values a row, not 2")
    a = ap.parse_args()
    zoo = load_zoo()
    torch.manual_seed(zoo.SEED)
    model = zoo.BERT().eval()
    if a.hidden:
        model = WithHidden(model).eval()
    batches = [int(b) for b in a.batches.split(",")]
    if a.export:
        d = os.path.join(a.export, "bert_base")
        os.makedirs(d, exist_ok=True)
        x = (torch.randint(0, 30522, (1, 128)), torch.ones(1, 128, dtype=torch.int64))
        t0 = time.time()
        outs = ["output", "hidden"] if a.hidden else ["output"]
        kw = dict(opset_version=14, input_names=["input_ids", "attention_mask"], output_names=outs,
                  do_constant_folding=True, dynamic_axes={n: {0: "batch"} for n in ["input_ids", "attention_mask"] + outs})
        # Written beside, then renamed: a reader waiting for the file
        # (bert.sh FAST=1 starts the GPU check meanwhile) never sees half.
        tmp = d + "/model.onnx.tmp"
        try:
            torch.onnx.export(model, x, tmp, dynamo=False, **kw)
        except TypeError:
            torch.onnx.export(model, x, tmp, **kw)
        os.replace(tmp, d + "/model.onnx")
        rng = np.random.default_rng(0)
        for b in batches:
            ids = rng.integers(0, 30522, size=(b, 128), dtype=np.int64)
            mask = np.ones((b, 128), dtype=np.int64)
            mask[:, 100:] = 0  # padded tails: the mask's -10000 takes part
            np.save(f"{d}/ids{b}.npy", ids)
            np.save(f"{d}/mask{b}.npy", mask)
        print(f"exported bert_base in {time.time() - t0:.1f} s, {os.path.getsize(d + '/model.onnx')} bytes", flush=True)
    if not a.time:
        return
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    dev = torch.device("cuda")
    m = model.to(dev)
    for dtype in [{"fp32": torch.float32, "fp16": torch.float16}[d] for d in a.dtypes.split(",")]:
        # FP16 is autocast's (the model computes its mask in float32).
        for b in batches:
            ids = torch.randint(0, 30522, (b, 128), device=dev)
            mask = torch.ones(b, 128, dtype=torch.int64, device=dev)
            with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16, enabled=dtype == torch.float16, cache_enabled=False):
                for _ in range(3):
                    m(ids, mask)
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for _ in range(2):
                        m(ids, mask)
                torch.cuda.current_stream().wait_stream(s)
                with torch.cuda.graph(g):
                    out = m(ids, mask)
                ts = []
                for _ in range(30):
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    g.replay()
                    e1.record()
                    torch.cuda.synchronize()
                    ts.append(e0.elapsed_time(e1))
                ms = float(np.median(ts))
                alone = m(ids[:1], mask[:1])
                outs, alones = (out, alone) if isinstance(out, tuple) else ((out,), (alone,))
                diffs = [f"{int((x.float() != o[:1].float()).sum())} of {x.numel()}" for x, o in zip(alones, outs)]
            print(f"torch bert_base {str(dtype).split('.')[-1]} batch {b}: {ms:.3f} ms ({b / ms * 1e3:.0f} seq/s, CUDA graph); "
                  f"row 0 alone vs in the batch: {' and '.join(diffs)} outputs differ", flush=True)


if __name__ == "__main__":
    main()
