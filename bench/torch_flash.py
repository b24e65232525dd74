#!/usr/bin/env python3
"""Peer timings for `kernel-ladder bench flash-attention`: PyTorch's scaled_dot_product_attention on the
same shapes, with the flash backend (FlashAttention-2) and then the cuDNN backend forced in turn.

Shapes (as the ladder's bench_fast): bf16, d in {64, 128, 256}, L in {512, ..., 16384}, B*L = 16384,
H*d = 2048 (H = 32, 16, 8), causal and not, Lq = Lk = L (so PyTorch's top-left causal mask equals the ladder's
bottom-right one). Then grouped-query attention: d = 128, H = 16 query heads over Hkv = 2 kv heads,
L in {1024, 4096, 16384}, causal and not; k and v have Hkv heads and SDPA gets enable_gqa=True (torch
2.5 and later). Where a backend or an older torch refuses that, the script times SDPA on k and v
repeat_interleave'd to H heads (the repeat itself not timed) and says so in the row ("gqa_flash" /
"gqa_cudnn": "enable_gqa" or "repeat_interleave") and in the table. TFLOP/s count 4*B*H*L*L*d, halved
for causal. Each run is timed on its own with CUDA events after warm-up; the median is reported.
A backend that refuses a shape (e.g. one built without d = 256 kernels) is reported as refused: the
row's "<backend>_error" holds its message, the table reads "refused" and lists the messages under it.

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
GQA_KV_HEADS = 2            # the ladder's kGqaBenchKvHeads
GQA_LENGTHS = [1024, 4096, 16384]


def shapes(quick):
    lengths = [512] if quick else LENGTHS
    tokens = 1024 if quick else TOKENS
    for d in (64, 128, 256):
        for L in lengths:
            for causal in (False, True):
                yield dict(B=tokens // L, H=WIDTH // d, Hkv=None, L=L, d=d, causal=causal)
    for L in [512] if quick else GQA_LENGTHS:  # grouped-query attention, as the ladder's bench_fast
        for causal in (False, True):
            yield dict(B=tokens // L, H=WIDTH // 128, Hkv=GQA_KV_HEADS, L=L, d=128, causal=causal)


def flops(s):
    f = 4.0 * s["B"] * s["H"] * s["L"] * s["L"] * s["d"]
    return f * 0.5 if s["causal"] else f


def sdpa_call(s, backend):
    """The timed call for shape s and how it does grouped-query attention (None for multi-head)."""
    torch.manual_seed(0)
    hkv = s["Hkv"] or s["H"]
    q = torch.randn(s["B"], s["H"], s["L"], s["d"], device="cuda", dtype=torch.bfloat16)
    k, v = (torch.randn(s["B"], hkv, s["L"], s["d"], device="cuda", dtype=torch.bfloat16) for _ in range(2))
    scale = 1.0 / math.sqrt(s["d"])
    if not s["Hkv"]:
        return (lambda: F.scaled_dot_product_attention(q, k, v, is_causal=s["causal"], scale=scale)), None
    try:  # native GQA: k and v with Hkv heads
        with sdpa_kernel(backend):
            fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=s["causal"], scale=scale, enable_gqa=True)
            fn()
            torch.cuda.synchronize()
        return fn, "enable_gqa"
    except (TypeError, RuntimeError):  # torch < 2.5 (no enable_gqa) or this backend refuses it
        group = s["H"] // hkv
        kr, vr = k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)  # query head h: kv h // group
        return (lambda: F.scaled_dot_product_attention(q, kr, vr, is_causal=s["causal"], scale=scale)), "repeat_interleave"


def time_sdpa(s, backend, warmup, iters):
    fn, gqa = sdpa_call(s, backend)
    with sdpa_kernel(backend):
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
    return (ms[n // 2] if n % 2 else 0.5 * (ms[n // 2 - 1] + ms[n // 2])), gqa


SHAPE_RE = re.compile(r"(?:Hkv=(\d+)\s+)?L=(\d+)\s+d=(\d+)\s+(non-causal|causal)")


def ladder_rows(path):
    """(L, d, causal, Hkv or None) -> TFLOP/s of the ladder's fast variant, from its --json file (any nesting)."""
    with open(path) as f:
        doc = json.load(f)
    found = {}

    def walk(x):
        if isinstance(x, dict):
            if "shape" in x and "tflops" in x and x.get("variant", "fast") == "fast":
                m = SHAPE_RE.search(str(x["shape"]))
                if m:
                    hkv = int(m.group(1)) if m.group(1) else None
                    found[(int(m.group(2)), int(m.group(3)), m.group(4) == "causal", hkv)] = float(x["tflops"])
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
        hkv = f" Hkv={s['Hkv']}" if s["Hkv"] else ""
        r["shape"] = f"B={s['B']} H={s['H']}{hkv} L={s['L']} d={s['d']} {'causal' if s['causal'] else 'non-causal'} bf16"
        for name, backend in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                ms, gqa = time_sdpa(s, backend, args.warmup, args.iters)
                r[f"{name}_ms"] = ms
                if gqa:
                    r[f"gqa_{name}"] = gqa
                r[f"{name}_tflops"] = flops(s) / (ms * 1e-3) / 1e12
            except RuntimeError as e:  # backend not available for this shape / build
                r[f"{name}_error"] = str(e).splitlines()[0][:200]
                r[f"{name}_tflops"] = None
        lt = ladder.get((s["L"], s["d"], s["causal"], s["Hkv"]))
        r["ladder_tflops"] = lt
        for name in ("flash", "cudnn"):
            peer = r.get(f"{name}_tflops")
            r[f"ladder_over_{name}"] = (lt / peer) if (lt and peer) else None
        print(json.dumps(r), flush=True)
        results.append(r)
    if args.out:
        with open(args.out, "w") as f:
            json.dump(results, f, indent=1)

    def fmt(x, spec, refused=False):
        width = int(spec.split(".")[0])
        return format(x, spec) if x is not None else ("refused" if refused else "-").rjust(width)

    print()
    print(f"{'shape':50s} {'ladder':>8s} {'flash':>8s} {'cudnn':>8s} {'/flash':>7s} {'/cudnn':>7s}  (TFLOP/s)")
    for r in results:
        gqa = " ".join(f"{n}:{r[f'gqa_{n}']}" for n in ("flash", "cudnn") if r.get(f"gqa_{n}"))
        print(f"{r['shape']:50s} {fmt(r['ladder_tflops'], '8.1f')} "
              f"{fmt(r['flash_tflops'], '8.1f', 'flash_error' in r)} {fmt(r['cudnn_tflops'], '8.1f', 'cudnn_error' in r)} "
              f"{fmt(r['ladder_over_flash'], '7.2f')} {fmt(r['ladder_over_cudnn'], '7.2f')}"
              + (f"  GQA by {gqa}" if gqa else ""))
    refusals = [(n, r) for r in results for n in ("flash", "cudnn") if f"{n}_error" in r]
    if refusals:
        print()
        for n, r in refusals:
            print(f"refused by {n}: {r['shape']}: {r[f'{n}_error']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
