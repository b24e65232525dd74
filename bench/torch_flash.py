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
Prints one JSON object per shape, then a table with the ladder/peer ratios. --out writes
{"versions": {device, driver, cuda, torch, cudnn, triton, harness}, "rows": [...]} (bench/record_peers.py
reads it). The loop over shapes and backends (peer_rows) is shared with bench/torch_flash_backward.py.
"""
import argparse
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_common as pc  # noqa: E402  (the timing method: the spin, events, the median)
from bench_json import SHAPE_RE, shape_key, walk_rows  # noqa: E402  (the ladder's bench --json rows)

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
    """Median ms of the forward at shape s with `backend` forced, and how it did grouped-query attention."""
    fn, gqa = sdpa_call(s, backend)
    with sdpa_kernel(backend):
        ms = pc.time_ms(fn, warmup, iters)
    return ms, ({"gqa": gqa} if gqa else {})


def shape_text(s):
    hkv = f" Hkv={s['Hkv']}" if s.get("Hkv") else ""
    return f"B={s['B']} H={s['H']}{hkv} L={s['L']} d={s['d']} {'causal' if s['causal'] else 'non-causal'} bf16"


BACKENDS = (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION))


def peer_rows(shape_list, time_backend, flops_of, ladder_of, free_between=False):
    """The loop both SDPA peer scripts run (this one and bench/torch_flash_backward.py). For each shape s:
    each backend of BACKENDS timed by time_backend(s, backend) -> (ms, extra) (extra's keys are stored as
    KEY_<backend>), TFLOP/s = flops_of(s) / time; a backend that refuses the shape (RuntimeError) is stored
    as <backend>_error with <backend>_tflops None; then ladder_of(s) -> {"ladder_tflops": ..., ...} (the
    ladder's figures from its `bench --json`, None where it has none) and the ratios ladder_over_<backend>.
    Prints one JSON object per shape as it is done; returns the rows."""
    results = []
    for s in shape_list:
        r = dict(s)
        r["shape"] = shape_text(s)
        for name, backend in BACKENDS:
            try:
                ms, extra = time_backend(s, backend)
                r[f"{name}_ms"] = ms
                r.update({f"{k}_{name}": v for k, v in extra.items()})
                r[f"{name}_tflops"] = flops_of(s) / (ms * 1e-3) / 1e12
            except RuntimeError as e:  # backend not available for this shape / build
                r[f"{name}_error"] = str(e).splitlines()[0][:200]
                r[f"{name}_tflops"] = None
            if free_between:
                torch.cuda.empty_cache()
        r.update(ladder_of(s))
        lt = r.get("ladder_tflops")
        for name, _ in BACKENDS:
            peer = r.get(f"{name}_tflops")
            r[f"ladder_over_{name}"] = (lt / peer) if (lt and peer) else None
        print(json.dumps(r), flush=True)
        results.append(r)
    return results


def ladder_rows(path):
    """(L, d, causal, Hkv or None) -> TFLOP/s of the ladder's fast variant, from its --json file (any nesting)."""
    found = {}
    for x in walk_rows(path, lambda x: "shape" in x and "tflops" in x and x.get("variant", "fast") == "fast"
                       and x.get("kernel", "flash-attention") == "flash-attention"):
        m = SHAPE_RE.search(str(x["shape"]))
        if m:
            found[shape_key(m)] = float(x["tflops"])
    return found


def common_args(description):
    """The options both SDPA peer scripts take."""
    ap = argparse.ArgumentParser(description=description, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ladder-json", "--json", dest="ladder_json", help="the ladder's `bench --json` output")
    ap.add_argument("--out", help="write the versions and all results as one JSON object {versions, rows} here")
    ap.add_argument("--quick", action="store_true", help="L = 512 only (B*L = 1024)")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--iters", type=int, default=30)
    return ap


def start(script):
    """Checks for a device, prints the versions line; returns the versions (peers_common.versions())."""
    if not torch.cuda.is_available():
        print(f"{script}: no CUDA device", file=sys.stderr)
        sys.exit(2)
    pc.torch = torch
    v = pc.versions()
    print(f"# torch {v['torch']}, cuDNN {v['cudnn']}, CUDA {v['cuda']}, driver {v['driver']}, {v['device']}")
    return v


def write_out(path, versions, results):
    if path:
        with open(path, "w") as f:
            json.dump({"versions": versions, "rows": results}, f, indent=1)


def fmt(x, spec, refused=False):
    width = int(spec.split(".")[0])
    return format(x, spec) if x is not None else ("refused" if refused else "-").rjust(width)


def main():
    args = common_args(__doc__).parse_args()
    versions = start("torch_flash.py")
    ladder = ladder_rows(args.ladder_json) if args.ladder_json else {}
    results = peer_rows(shapes(args.quick), lambda s, b: time_sdpa(s, b, args.warmup, args.iters), flops,
                        lambda s: {"ladder_tflops": ladder.get((s["L"], s["d"], s["causal"], s["Hkv"]))})
    write_out(args.out, versions, results)

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
