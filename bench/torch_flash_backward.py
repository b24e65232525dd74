#!/usr/bin/env python3
"""Peer timings for `kernel-ladder bench flash-attention-backward`: the backward of PyTorch's
scaled_dot_product_attention on the same shapes, with the flash backend (FlashAttention-2) and then the
cuDNN backend forced in turn (torch.nn.attention.sdpa_kernel).

Shapes (as the ladder's bench_fast, and bench/torch_flash.py's): bf16, d in {64, 128}, L in {512, ..., 16384},
B*L = 16384, H*d = 2048, causal and not, Lq = Lk = L (so PyTorch's top-left causal mask equals the ladder's
bottom-right one). What is timed: the backward alone, the gradients of loss = sum(dO * O) with respect to
q, k, v (torch.autograd.grad(O, (q, k, v), dO), i.e. loss.backward() without the elementwise backward of the
loss itself and without accumulating into .grad); the forward runs once, before, and its graph is kept.
The ladder times its backward the same way: the forward's O and L computed first, then preprocess + main
kernel + dQ conversion per timed call. TFLOP/s count 2.5 x the forward's 4*B*H*L*L*d (the FlashAttention
papers' convention), halved for causal. Each call is timed on its own with CUDA events after warm-up, queued
behind a GPU spin as `kernel-ladder bench` does; the median is reported (bench/torch_flash.py's method).

Usage (on the GPU machine, in the same run as the ladder's bench):
  kernel-ladder bench flash-attention-backward --backend cuda --json ladder_bw.json
  python3 bench/torch_flash_backward.py --ladder-json ladder_bw.json [--out peer_bw.json] [--quick]
Prints one JSON object per shape, then a table: the ladder's fast backward (dQ by atomics, the default, and
the deterministic mode), PyTorch flash, cuDNN, and the ratios ladder (atomic) / peer.
"""
import argparse
import json
import math
import os
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_flash import flops as forward_flops  # noqa: E402  (the forward's count, halved for causal)
from torch_flash import shapes  # noqa: E402  (the same shape list as the forward's peers)


def flops(s):
    return 2.5 * forward_flops(s)


def median(xs):
    xs = sorted(xs)
    n = len(xs)
    return xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])


def time_calls(fn, warmup, iters):
    """Median ms of fn() timed on its own with CUDA events, as bench/torch_flash.py times the forward."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(iters)]
    torch.cuda._sleep(20_000_000)  # queue behind ~10 ms of GPU spin, as `kernel-ladder bench` does
    for i in range(iters):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    return median([a.elapsed_time(b) for a, b in zip(starts, ends)])


def time_sdpa_backward(s, backend, warmup, iters):
    torch.manual_seed(0)
    q, k, v = (torch.randn(s["B"], s["H"], s["L"], s["d"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    scale = 1.0 / math.sqrt(s["d"])
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=s["causal"], scale=scale)
        dout = torch.randn_like(out)
        fn = lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)
        return time_calls(fn, warmup, iters)


SHAPE_RE = re.compile(r"L=(\d+)\s+d=(\d+)\s+(non-causal|causal).*dq=(atomic|deterministic)")


def ladder_rows(path):
    """(L, d, causal, mode) -> TFLOP/s of the ladder's fast backward, from its `bench --json` file."""
    with open(path) as f:
        doc = json.load(f)
    found = {}

    def walk(x):
        if isinstance(x, dict):
            if (x.get("kernel") == "flash-attention-backward" and x.get("variant") == "fast" and "shape" in x
                    and "tflops" in x):
                m = SHAPE_RE.search(str(x["shape"]))
                if m:
                    found[(int(m.group(1)), int(m.group(2)), m.group(3) == "causal", m.group(4))] = float(x["tflops"])
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    return found


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ladder-json", "--json", dest="ladder_json", help="the ladder's `bench --json` output")
    ap.add_argument("--out", help="write all results as one JSON list here")
    ap.add_argument("--quick", action="store_true", help="L = 512 only (B*L = 1024)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=30)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_flash_backward.py: no CUDA device", file=sys.stderr)
        return 2
    ladder = ladder_rows(args.ladder_json) if args.ladder_json else {}
    if args.ladder_json and not ladder:
        print(f"torch_flash_backward.py: no flash-attention-backward fast rows in {args.ladder_json}", file=sys.stderr)
    print(f"# torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    results = []
    for s in shapes(args.quick):
        r = dict(s)
        r["shape"] = f"B={s['B']} H={s['H']} L={s['L']} d={s['d']} {'causal' if s['causal'] else 'non-causal'} bf16"
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                ms = time_sdpa_backward(s, backend, args.warmup, args.iters)
                r[f"{name}_ms"] = ms
                r[f"{name}_tflops"] = flops(s) / (ms * 1e-3) / 1e12
            except RuntimeError as e:  # backend not available for this shape / build
                r[f"{name}_error"] = str(e).splitlines()[0][:200]
                r[f"{name}_tflops"] = None
            torch.cuda.empty_cache()
        key = (s["L"], s["d"], s["causal"])
        r["ladder_tflops"] = ladder.get(key + ("atomic",))
        r["ladder_det_tflops"] = ladder.get(key + ("deterministic",))
        for name in ("flash", "cudnn"):
            peer, lt = r.get(f"{name}_tflops"), r["ladder_tflops"]
            r[f"ladder_over_{name}"] = (lt / peer) if (lt and peer) else None
        print(json.dumps(r), flush=True)
        results.append(r)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)

    def fmt(x, spec):
        return format(x, spec) if x is not None else "-".rjust(int(spec.split(".")[0]))

    print()
    print(f"{'shape (backward)':44s} {'ladder':>8s} {'det':>8s} {'flash':>8s} {'cudnn':>8s} {'/flash':>7s} {'/cudnn':>7s}"
          "  (TFLOP/s, 2.5x the forward's FLOPs)")
    for r in results:
        print(f"{r['shape']:44s} {fmt(r['ladder_tflops'], '8.1f')} {fmt(r['ladder_det_tflops'], '8.1f')} "
              f"{fmt(r['flash_tflops'], '8.1f')} {fmt(r['cudnn_tflops'], '8.1f')} "
              f"{fmt(r['ladder_over_flash'], '7.2f')} {fmt(r['ladder_over_cudnn'], '7.2f')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
