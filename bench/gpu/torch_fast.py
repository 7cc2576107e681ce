#!/usr/bin/env python3
"""PyTorch FP16 peer for vouch's fast mode (issue 19).

torchvision's ResNet-50 (random weights, seed 0; nothing downloaded) in
FP16, channels_last, cuDNN benchmark mode, captured once per batch size
into a CUDA graph and replayed: median latency of --reps replays timed
with CUDA events, and images/s. Then the batch-invariance count the issue
compares with vouch's 0: row 0 run alone vs the same row inside a batch
of --inv-batch (the other rows random), how many of its logits differ and
by how much at most.

Usage: python3 bench/gpu/torch_fast.py [--batches 1,256] [--inv-batch 64]
"""
import argparse
import statistics

import torch
import torchvision


def bench(model, batch, reps, warm):
    x = torch.randn(batch, 3, 224, 224, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(warm):
            model(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        model(x)
    for _ in range(warm):
        g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batches", default="1,256")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warm", type=int, default=5)
    ap.add_argument("--inv-batch", type=int, default=64)
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, cudnn {torch.backends.cudnn.version()}, FP16, channels_last, CUDA graphs")
    model = getattr(torchvision.models, a.model)(weights=None).cuda().eval().half().to(memory_format=torch.channels_last)
    for batch in [int(b) for b in a.batches.split(",")]:
        ms = bench(model, batch, a.reps, a.warm)
        print(f"torch fp16 {a.model} batch {batch:4d}: {ms:8.3f} ms  {batch / ms * 1e3:9.1f} img/s", flush=True)
    with torch.no_grad():
        x1 = torch.randn(1, 3, 224, 224, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
        xb = torch.randn(a.inv_batch, 3, 224, 224, device="cuda", dtype=torch.half).contiguous(memory_format=torch.channels_last)
        xb[0] = x1[0]
        y1 = model(x1)[0].float()
        yb = model(xb)[0].float()
        y2 = model(x1)[0].float()
    d = (y1 != yb).sum().item()
    r = (y1 != y2).sum().item()
    print(f"torch fp16 {a.model} row 0 alone vs in a batch of {a.inv_batch}: {d} of {y1.numel()} logits differ, max |diff| {(y1 - yb).abs().max().item():.4g}; alone twice: {r} differ", flush=True)


if __name__ == "__main__":
    main()
