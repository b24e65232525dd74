#!/usr/bin/env python3
"""The ladder's fast forward and PyTorch's cuDNN attention timed in one process, shape by shape, in turn.

`bench/gpu_session.sh bench` times the ladder's rows in `kernel-ladder bench` and the peers afterwards in
bench/torch_flash.py: two processes, minutes apart. These kernels hold an H100 at its 700 W power cap under
sustained load (docs/perf-log.md, 2026-12-06: the SM clock 1.4-1.74 GHz there against 1.98 GHz for a short row
after idle), so a row's figure depends on what ran before it, and the two sides of a ratio may have met
different clocks. Here both sides of each shape are timed back to back, in the order ladder, cuDNN, cuDNN,
ladder (and again, --rounds), each timing as `kernel-ladder bench` times (bench/peers_common.time_ms: the spin,
events, the median of 30 after 5 warm-up runs); a side's figure is the mean of its timings, and each row shows
them all, so their spread is in view.

The ladder's side is libkl_ladder_c.so (bench/ladder_c_api.cpp, built with the CUDA backend:
build-cuda/libkl_ladder_c.so), loaded by ctypes: the kernel `kernel-ladder bench flash-attention` times
(KL_FLASH_FAST_PATH, else the by-shape default), on PyTorch's own tensors and default stream. The shapes are
bench/torch_flash.py's (the ladder's bench's), inputs uniform random, bf16, scale 1/sqrt(d).

Usage (on the GPU machine):
  python3 bench/interleaved_flash.py --lib build-cuda/libkl_ladder_c.so [--out FILE] [--quick] [--rounds N]
Prints one JSON object per shape, then a table (ladder / cuDNN) and a summary line: shapes at 1.0x or more,
under 0.95x, the geometric mean. --out writes {"versions": ..., "rows": [...]}. Without the library, torch or a
device: one line, exit 2.
"""
import argparse
import ctypes
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_common as pc  # noqa: E402

SCRIPT = "interleaved_flash.py"


def load_ladder(path):
    """The C ABI of bench/ladder_c_api.cpp, or exit 2 with one line."""
    try:
        lib = ctypes.CDLL(path)
        fwd, name = lib.kl_flash_forward_bf16, lib.kl_flash_forward_path
    except (OSError, AttributeError) as e:
        print(f"{SCRIPT}: cannot load --lib {path} ({e}); build it with the cuda preset "
              f"(build-cuda/libkl_ladder_c.so)", file=sys.stderr)
        sys.exit(2)
    fwd.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 6 + [ctypes.c_char_p, ctypes.c_int]
    name.argtypes = [ctypes.c_int] * 6 + [ctypes.c_char_p, ctypes.c_int]
    fwd.restype = name.restype = ctypes.c_int
    return lib


def shape_args(s):
    return (s["B"], s["H"], s["Hkv"] or 0, s["L"], s["d"], 1 if s["causal"] else 0)


def ladder_call(lib, s, torch):
    """The timed call of the ladder's forward at shape s, and the name of its kernel."""
    hkv = s["Hkv"] or s["H"]
    q = torch.rand(s["B"], s["H"], s["L"], s["d"], device="cuda", dtype=torch.bfloat16)
    k, v = (torch.rand(s["B"], hkv, s["L"], s["d"], device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o = torch.empty_like(q)
    message = ctypes.create_string_buffer(512)
    if lib.kl_flash_forward_path(*shape_args(s), message, len(message)) != 0:
        raise RuntimeError(message.value.decode())
    kernel = message.value.decode()
    tensors = (q, k, v, o)  # alive as long as the call is
    ptrs = tuple(t.data_ptr() for t in tensors)

    def run(keep=tensors):
        if lib.kl_flash_forward_bf16(*ptrs, *shape_args(s), message, len(message)) != 0:
            raise RuntimeError(message.value.decode())
    return run, kernel


def interleaved_row(s, sides, rounds, flops):
    """Times each side of `sides` ({name: fn}, two) in the order A B B A per round; the row's figures."""
    names = list(sides)
    runs = {n: [] for n in names}
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            runs[n].append(pc.time_ms(sides[n]))
    row = {}
    for n in names:
        ms = sum(runs[n]) / len(runs[n])
        row[f"{n}_ms"] = ms
        row[f"{n}_runs_ms"] = runs[n]
        row[f"{n}_tflops"] = flops / (ms * 1e-3) / 1e12
    return row


def summary(rows):
    ratios = [r["ladder_over_cudnn"] for r in rows if r.get("ladder_over_cudnn")]
    if not ratios:
        return "no shape timed on both sides"
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    return (f"ladder / cuDNN, timed in turn: 1.0x or more at {sum(x >= 1.0 for x in ratios)} of {len(ratios)} "
            f"shapes, under 0.95x at {sum(x < 0.95 for x in ratios)}, from {min(ratios):.3f}x to "
            f"{max(ratios):.3f}x, geometric mean {geo:.3f}x")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libkl_ladder_c.so (the cuda preset builds build-cuda/...)")
    ap.add_argument("--out", help="write {versions, rows} as one JSON object here")
    ap.add_argument("--quick", action="store_true", help="L = 512 only (B*L = 1024)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of A B (then B A): each side timed this often")
    args = ap.parse_args()
    if not 1 <= args.rounds <= 20:
        print(f"{SCRIPT}: --rounds={args.rounds} is out of range: allowed [1, 20]", file=sys.stderr)
        sys.exit(2)
    lib = load_ladder(args.lib)
    (torch,) = pc.require(SCRIPT)
    import torch_flash as tf  # the shapes and the SDPA call (imports torch)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    versions = tf.start(SCRIPT)
    rows = []
    for s in tf.shapes(args.quick):
        row = dict(s)
        row["shape"] = tf.shape_text(s)
        try:
            ladder, row["kernel"] = ladder_call(lib, s, torch)
            cudnn_fn, gqa = tf.sdpa_call(s, SDPBackend.CUDNN_ATTENTION)

            def cudnn(fn=cudnn_fn):
                with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                    fn()
            row.update(interleaved_row(s, {"ladder": ladder, "cudnn": cudnn}, args.rounds, tf.flops(s)))
            if gqa:
                row["gqa_cudnn"] = gqa
            row["ladder_over_cudnn"] = row["cudnn_ms"] / row["ladder_ms"]
        except RuntimeError as e:  # a side that refuses the shape: its one line, the row without a ratio
            row["error"] = str(e).splitlines()[0][:200]
        print(json.dumps(row), flush=True)
        rows.append(row)
        torch.cuda.empty_cache()
    print(f"\n{'shape':46} {'kernel':28} {'ladder':>8} {'cuDNN':>8} {'ratio':>6}  runs (ms: ladder; cuDNN)")
    for r in rows:
        if "error" in r:
            print(f"{r['shape']:46} refused: {r['error']}")
            continue
        runs = " ".join(f"{x:.4f}" for x in r["ladder_runs_ms"]) + "; " + " ".join(f"{x:.4f}" for x in r["cudnn_runs_ms"])
        print(f"{r['shape']:46} {r['kernel']:28} {r['ladder_tflops']:8.1f} {r['cudnn_tflops']:8.1f} "
              f"{r['ladder_over_cudnn']:6.3f}  {runs}")
    print(summary(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"versions": versions, "rows": rows, "method": "interleaved: " + pc.HARNESS}, f, indent=1)


if __name__ == "__main__":
    main()
