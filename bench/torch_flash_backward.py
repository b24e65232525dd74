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
behind a GPU spin as `kernel-ladder bench` does; the median is reported (bench/peers_common.py's time_ms;
the loop over shapes and backends is bench/torch_flash.py's peer_rows).

Usage (on the GPU machine, in the same run as the ladder's bench):
  kernel-ladder bench flash-attention-backward --backend cuda --json ladder_bw.json
  python3 bench/torch_flash_backward.py --ladder-json ladder_bw.json [--out peer_bw.json] [--quick]
Prints one JSON object per shape, then a table: the ladder's fast backward (dQ by atomics, the default, and
the deterministic mode), PyTorch flash, cuDNN, and the ratios ladder (atomic) / peer.
"""
import math
import os
import re
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_common as pc  # noqa: E402  (the timing method: the spin, events, the median)
import torch_flash as tf  # noqa: E402  (the forward's shapes, FLOP count, shape loop and options)
from bench_json import walk_rows  # noqa: E402  (the ladder's bench --json rows)


def flops(s):
    return 2.5 * tf.flops(s)


def sdpa_backward_call(s, backend):
    """The backward alone at shape s with `backend` forced, as a call to time inside sdpa_kernel(backend) (the
    forward run once, here, its graph kept), and the tensors it differentiates at: (q, k, v, dout)."""
    torch.manual_seed(0)
    q, k, v = (torch.randn(s["B"], s["H"], s["L"], s["d"], device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    scale = 1.0 / math.sqrt(s["d"])
    with sdpa_kernel(backend):
        out = F.scaled_dot_product_attention(q, k, v, is_causal=s["causal"], scale=scale)
    dout = torch.randn_like(out)
    return (lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True)), (q, k, v, dout)


def time_sdpa_backward(s, backend, warmup, iters):
    """Median ms of the backward alone at shape s with `backend` forced (the forward once, before)."""
    fn, _ = sdpa_backward_call(s, backend)
    with sdpa_kernel(backend):
        return pc.time_ms(fn, warmup, iters), {}


SHAPE_RE = re.compile(r"L=(\d+)\s+d=(\d+)\s+(non-causal|causal).*dq=(atomic|deterministic)")


def ladder_rows(path):
    """(L, d, causal, mode) -> TFLOP/s of the ladder's fast backward, from its `bench --json` file."""
    found = {}
    for x in walk_rows(path, lambda x: x.get("kernel") == "flash-attention-backward" and x.get("variant") == "fast"
                          and "shape" in x and "tflops" in x):
        m = SHAPE_RE.search(str(x["shape"]))
        if m:
            found[(int(m.group(1)), int(m.group(2)), m.group(3) == "causal", m.group(4))] = float(x["tflops"])
    return found


def main():
    args = tf.common_args(__doc__).parse_args()
    versions = tf.start("torch_flash_backward.py")
    ladder = ladder_rows(args.ladder_json) if args.ladder_json else {}
    if args.ladder_json and not ladder:
        print(f"torch_flash_backward.py: no flash-attention-backward fast rows in {args.ladder_json}", file=sys.stderr)

    def ladder_of(s):
        key = (s["L"], s["d"], s["causal"])
        det = ladder.get(key + ("deterministic",))
        # The default mode: dQ by atomics; at d = 256 the bench's one row (both modes run the dQ pass there).
        return {"ladder_tflops": ladder.get(key + ("atomic",), det), "ladder_det_tflops": det}

    mha = [s for s in tf.shapes(args.quick) if not s["Hkv"]]  # the ladder's backward: multi-head attention only
    results = tf.peer_rows(mha, lambda s, b: time_sdpa_backward(s, b, args.warmup, args.iters), flops,
                                       ladder_of, free_between=True)
    tf.write_out(args.out, versions, results)

    fmt = tf.fmt
    print()
    print(f"{'shape (backward)':44s} {'ladder':>8s} {'det':>8s} {'flash':>8s} {'cudnn':>8s} {'/flash':>7s} {'/cudnn':>7s}"
          "  (TFLOP/s, 2.5x the forward's FLOPs)")
    for r in results:
        print(f"{r['shape']:44s} {fmt(r['ladder_tflops'], '8.1f')} {fmt(r['ladder_det_tflops'], '8.1f')} "
              f"{fmt(r['flash_tflops'], '8.1f', 'flash_error' in r)} {fmt(r['cudnn_tflops'], '8.1f', 'cudnn_error' in r)} "
              f"{fmt(r['ladder_over_flash'], '7.2f')} {fmt(r['ladder_over_cudnn'], '7.2f')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
