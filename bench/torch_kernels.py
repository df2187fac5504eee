#!/usr/bin/env python3
"""Where the same-net PyTorch peer spends a training iteration, kernel by kernel.

    bench/torch_kernels.py PEER.py NET.prototxt --batch B --input C,H,W [--mode bf16cl] [--steps 10]

PEER.py is the peer script of gpu_vs_pytorch.sh (.bench/torch_from_prototxt.py):
its net builder is imported, the net is trained as the peer trains it (SGD,
momentum 0.9, the same autocast and memory format), and --steps iterations
after the warm-up run under torch.profiler.  Prints the GPU time per
iteration of each convolution call by direction and input shape (the
cuDNN calls PyTorch makes), then the 25 costliest kernels.  Compare with
`cortado time --precision=...`'s per-layer table of the same prototxt.
"""
import argparse
import importlib.util
import sys

import torch
from torch.profiler import ProfilerActivity, profile


def load_peer(path):
    spec = importlib.util.spec_from_file_location("peer", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("peer")
    ap.add_argument("prototxt")
    ap.add_argument("--batch", type=int, required=True)
    ap.add_argument("--input", required=True)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--mode", default="bf16cl")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=10)
    a = ap.parse_args()
    peer = load_peer(a.peer)
    dev = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    tf32 = a.mode.startswith("tf32")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    amp, cl = a.mode.startswith("bf16"), a.mode.endswith("cl")
    torch.manual_seed(0)
    shape = [int(v) for v in a.input.split(",")]
    x = torch.randn(a.batch, *shape, device=dev)
    if cl:
        x = x.to(memory_format=torch.channels_last)
    y = torch.randint(0, a.classes, (a.batch,), device=dev)
    net = peer.CaffeNet(peer.parse_prototxt(open(a.prototxt).read())).to(dev)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
        net(x, y)
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
            loss = net(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    for _ in range(a.warmup):
        step()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(a.steps):
            step()
        torch.cuda.synchronize()
    n = a.steps

    def dev_us(e):
        return getattr(e, "device_time_total", None) or getattr(e, "cuda_time_total", 0.0)

    rows = []
    for e in prof.key_averages(group_by_input_shape=True):
        if e.key in ("aten::cudnn_convolution", "aten::convolution_backward"):
            rows.append((dev_us(e) / n / 1e3, e.key, str(e.input_shapes)[:110]))
    total_conv = sum(r[0] for r in rows)
    print("convolution calls, GPU ms per iteration (%d iterations):" % n)
    for ms, key, shp in sorted(rows, reverse=True):
        print("  %8.3f  %-28s %s" % (ms, key, shp))
    print("  %8.3f  all convolution calls" % total_conv)
    kern = [e for e in prof.key_averages() if e.device_type == torch.autograd.DeviceType.CUDA]
    kern.sort(key=lambda e: -dev_us(e))
    print("costliest kernels, GPU ms per iteration:")
    for e in kern[:25]:
        print("  %8.3f  x%-4d %s" % (dev_us(e) / n / 1e3, e.count // n, e.key[:120]))
    print("  %8.3f  all kernels" % (sum(dev_us(e) for e in kern) / n / 1e3))


if __name__ == "__main__":
    sys.exit(main())
