#!/usr/bin/env python3
"""PyTorch peer for vouch's GPU benchmarks (issue 14).

Runs torchvision's ResNet-18/50 (and MobileNetV2) on one CUDA GPU in FP32
with TF32 off, channels_last, captured once per batch size into a CUDA
graph and replayed; prints latency per batch (median of --reps replays,
timed with CUDA events) and images/s. Weights are random (the speed of a
convolution does not depend on its values); nothing is downloaded.

It also measures what the determinism contract is about: the logits of
row 0 run alone vs. inside the batch, and how many of them differ.

Usage: python3 bench/gpu/torch_resnet.py [--models resnet18,resnet50] [--batches 1,32,256]
"""
import argparse
import statistics

import torch
import torchvision


def bench(model, batch, reps, warm):
    x = torch.randn(batch, 3, 224, 224, device="cuda").contiguous(memory_format=torch.channels_last)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s), torch.no_grad():
        for _ in range(warm):
            model(x)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g), torch.no_grad():
        y = model(x)
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
    return statistics.median(times), x, y


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default="resnet18,resnet50,mobilenet_v2")
    ap.add_argument("--batches", default="1,32,256")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warm", type=int, default=5)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}, cudnn {torch.backends.cudnn.version()}, TF32 off, channels_last, CUDA graphs")
    for name in a.models.split(","):
        model = getattr(torchvision.models, name)(weights=None).cuda().eval().to(memory_format=torch.channels_last)
        alone = None
        for batch in [int(b) for b in a.batches.split(",")]:
            ms, x, y = bench(model, batch, a.reps, a.warm)
            line = f"torch {name:13s} batch {batch:4d}: {ms:8.3f} ms  {batch / ms * 1e3:9.1f} img/s"
            if batch == 1:
                alone = (x.clone(), y.clone())
            elif alone is not None:
                # Row 0 of this batch is a fresh input: run the batch again
                # with the batch-1 input as its row 0 and compare.
                with torch.no_grad():
                    xb = x.clone()
                    xb[0] = alone[0][0]
                    yb = model(xb)
                    y1 = model(alone[0])
                d = (yb[0] != y1[0]).sum().item()
                line += f"  row 0 alone vs in batch: {d} of {y1.shape[1]} logits differ"
            print(line, flush=True)


if __name__ == "__main__":
    main()
