#!/usr/bin/env python3
"""Peer timings for `kernel-ladder bench flash-attention`: PyTorch's scaled_dot_product_attention on the
same shapes, with the flash backend (FlashAttention-2) and then the cuDNN backend forced in turn.

Shapes (as the ladder's bench_fast): bf16, d in {64, 128}, L in {512, ..., 16384}, B*L = 16384,
H*d = 2048, causal and not, Lq = Lk = L (so PyTorch's top-left causal mask equals the ladder's
bottom-right one). TFLOP/s count 4*B*H*L*L*d, halved for causal. Each run is timed on its own with CUDA
events after warm-up; the median is reported.

Usage (on the GPU machine, in the same run as the ladder's bench):
  kernel-ladder bench flash-attention --json ladder.json
  python3 bench/torch_flash.py --ladder-json ladder.json [--out peer.json] [--quick]
Prints one JSON object per shape, then a table with the ladder/peer ratios.
"""
import argparse
import json
import math
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

LENGTHS = [512, 1024, 2048, 4096, 8192, 16384]
TOKENS = 16384  # B * L
WIDTH = 2048    # H * d


def shapes(quick):
    lengths = [512] if quick else LENGTHS
    tokens = 1024 if quick else TOKENS
    for d in (64, 128):
        for L in lengths:
            for causal in (False, True):
                yield dict(B=tokens // L, H=WIDTH // d, L=L, d=d, causal=causal)


def flops(s):
    f = 4.0 * s["B"] * s["H"] * s["L"] * s["L"] * s["d"]
    return f * 0.5 if s["causal"] else f


def time_sdpa(s, backend, warmup, iters):
    torch.manual_seed(0)
    q, k, v = (torch.randn(s["B"], s["H"], s["L"], s["d"], device="cuda", dtype=torch.bfloat16) for _ in range(3))
    scale = 1.0 / math.sqrt(s["d"])
    with sdpa_kernel(backend):
        fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=s["causal"], scale=scale)
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
    ms = sorted(a.elapsed_time(b) for a, b in zip(starts, ends))
    n = len(ms)
    return ms[n // 2] if n % 2 else 0.5 * (ms[n // 2 - 1] + ms[n // 2])


SHAPE_RE = re.compile(r"L=(\d+)\s+d=(\d+)\s+(non-causal|causal)")


def ladder_rows(path):
    """(L, d, causal) -> TFLOP/s of the ladder's fast variant, from its --json file (any nesting)."""
    with open(path) as f:
        doc = json.load(f)
    found = {}

    def walk(x):
        if isinstance(x, dict):
            if "shape" in x and "tflops" in x and x.get("variant", "fast") == "fast":
                m = SHAPE_RE.search(str(x["shape"]))
                if m:
                    found[(int(m.group(1)), int(m.group(2)), m.group(3) == "causal")] = float(x["tflops"])
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
        print("torch_flash.py: no CUDA device", file=sys.stderr)
        return 2
    ladder = ladder_rows(args.ladder_json) if args.ladder_json else {}
    print(f"# torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, {torch.cuda.get_device_name()}")
    results = []
    for s in shapes(args.quick):
        r = dict(s)
        r["shape"] = f"B={s['B']} H={s['H']} L={s['L']} d={s['d']} {'causal' if s['causal'] else 'non-causal'} bf16"
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                ms = time_sdpa(s, backend, args.warmup, args.iters)
                r[f"{name}_ms"] = ms
                r[f"{name}_tflops"] = flops(s) / (ms * 1e-3) / 1e12
            except RuntimeError as e:  # backend not available for this shape / build
                r[f"{name}_error"] = str(e).splitlines()[0][:200]
                r[f"{name}_tflops"] = None
        lt = ladder.get((s["L"], s["d"], s["causal"]))
        r["ladder_tflops"] = lt
        for name in ("flash", "cudnn"):
            peer = r.get(f"{name}_tflops")
            r[f"ladder_over_{name}"] = (lt / peer) if (lt and peer) else None
        print(json.dumps(r), flush=True)
        results.append(r)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)

    def fmt(x, spec):
        return format(x, spec) if x is not None else "-".rjust(int(spec.split(".")[0]))

    print()
    print(f"{'shape':44s} {'ladder':>8s} {'flash':>8s} {'cudnn':>8s} {'/flash':>7s} {'/cudnn':>7s}  (TFLOP/s)")
    for r in results:
        print(f"{r['shape']:44s} {fmt(r['ladder_tflops'], '8.1f')} {fmt(r['flash_tflops'], '8.1f')} "
              f"{fmt(r['cudnn_tflops'], '8.1f')} {fmt(r['ladder_over_flash'], '7.2f')} {fmt(r['ladder_over_cudnn'], '7.2f')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
