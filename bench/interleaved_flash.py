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

--backward: the backward instead, on bench/torch_flash_backward.py's shapes (multi-head): the ladder's (dQ by
atomics, and the deterministic mode where it runs other launches: d = 64 and 128) and cuDNN's, timed in turn the
same way (ladder, deterministic, cuDNN, then back). The ladder's side gets O and L from PyTorch's flash forward
(its logsumexp is the ladder's L), cuDNN's its own forward; each times the backward alone, as the two scripts do.

PyTorch's flash backend is timed in the same turn (its figure is the record's "flash" column): where it refuses a
shape, the row says so (flash_error) and the other sides are timed as before; not with --paths.

--paths P1,P2,...: the forward's ladder side once per KL_FLASH_FAST_PATH value (each a kernel the bench can name,
or auto), all timed in turn with cuDNN: which kernel a shape's default should be, each against cuDNN in the same
clock state. --shapes PART,...: only the shapes whose row name holds one of the parts (e.g. 'd=64 causal'), as
KL_FLASH_BENCH_SHAPES does for the bench; a part that names no shape is refused.

Usage (on the GPU machine):
  python3 bench/interleaved_flash.py --lib build-cuda/libkl_ladder_c.so [--backward | --paths P1,P2,...]
                                     [--shapes PART,...] [--out FILE] [--quick] [--rounds N]
Prints one JSON object per shape, then a table (ladder / cuDNN; with --backward the deterministic mode too) and a
summary line: shapes at 1.0x or more, under 0.95x, the geometric mean. --out writes {"versions": ..., "quick": ...,
"method": ..., "rows": [...]}, which bench/record_peers.py takes as --interleaved (--interleaved-backward). Without
the library, torch or a device: one line, exit 2.
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
    try:
        bwd, bwd_name, accum = lib.kl_flash_backward_bf16, lib.kl_flash_backward_path, lib.kl_flash_backward_accum_floats
    except AttributeError as e:
        print(f"{SCRIPT}: --lib {path} has no backward ({e}); build it again from this tree", file=sys.stderr)
        sys.exit(2)
    bwd.argtypes = [ctypes.c_void_p] * 11 + [ctypes.c_int] * 7 + [ctypes.c_char_p, ctypes.c_int]
    bwd_name.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]
    accum.argtypes = [ctypes.c_int] * 4
    bwd.restype = bwd_name.restype = ctypes.c_int
    accum.restype = ctypes.c_longlong
    return lib


def shape_args(s):
    return (s["B"], s["H"], s["Hkv"] or 0, s["L"], s["d"], 1 if s["causal"] else 0)


def on_path(path, fn):
    """fn with KL_FLASH_FAST_PATH=path while it runs (None: the environment as it is)."""
    if path is None:
        return fn()
    os.environ["KL_FLASH_FAST_PATH"] = path
    try:
        return fn()
    finally:
        del os.environ["KL_FLASH_FAST_PATH"]


def ladder_call(lib, s, torch, path=None):
    """The timed call of the ladder's forward at shape s (path: a KL_FLASH_FAST_PATH value, or None), and the name
    of its kernel."""
    hkv = s["Hkv"] or s["H"]
    q = torch.rand(s["B"], s["H"], s["L"], s["d"], device="cuda", dtype=torch.bfloat16)
    k, v = (torch.rand(s["B"], hkv, s["L"], s["d"], device="cuda", dtype=torch.bfloat16) for _ in range(2))
    o = torch.empty_like(q)
    message = ctypes.create_string_buffer(512)
    if on_path(path, lambda: lib.kl_flash_forward_path(*shape_args(s), message, len(message))) != 0:
        raise RuntimeError(message.value.decode())
    kernel = message.value.decode()
    tensors = (q, k, v, o)  # alive as long as the call is
    ptrs = tuple(t.data_ptr() for t in tensors)

    def run(keep=tensors):
        if on_path(path, lambda: lib.kl_flash_forward_bf16(*ptrs, *shape_args(s), message, len(message))) != 0:
            raise RuntimeError(message.value.decode())
    return run, kernel


def ladder_backward_sides(lib, s, torch, q, k, v, dout):
    """The timed calls of the ladder's backward at shape s ({"ladder": atomic dQ, "ladder_det": the deterministic
    mode, d = 64 and 128 only}), on q, k, v, dout (bf16, [B, H, L, d]) with O and L from PyTorch's flash forward;
    and the name of its main kernel."""
    B, H, L, d = s["B"], s["H"], s["L"], s["d"]
    scale = 1.0 / math.sqrt(d)
    fwd = torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, s["causal"], False, scale=scale)
    o, lse = fwd[0].contiguous(), fwd[1].float().contiguous()
    dq, dk, dv = (torch.empty_like(q) for _ in range(3))
    drow = torch.empty(B * H * L, device="cuda", dtype=torch.float32)
    accum = torch.empty(max(4, lib.kl_flash_backward_accum_floats(B, H, L, d)), device="cuda", dtype=torch.float32)
    message = ctypes.create_string_buffer(512)
    if lib.kl_flash_backward_path(d, message, len(message)) != 0:
        raise RuntimeError(message.value.decode())
    kernel = message.value.decode()
    tensors = (q, k, v, o, dout, lse, dq, dk, dv, drow, accum)  # alive as long as the calls are
    ptrs = tuple(t.data_ptr() for t in tensors)

    def call(deterministic):
        def run(keep=tensors):
            if lib.kl_flash_backward_bf16(*ptrs, B, H, 0, L, d, 1 if s["causal"] else 0, deterministic, message,
                                          len(message)) != 0:
                raise RuntimeError(message.value.decode())
        return run
    sides = {"ladder": call(0)}
    if d != 256:  # at d = 256 both modes run the same launches (the dQ pass)
        sides["ladder_det"] = call(1)
    return sides, kernel


def backward_row(lib, s, rounds, torch):
    """One --backward row: the ladder's backward (both modes) and cuDNN's (bench/torch_flash_backward.py's call),
    timed in turn on the same inputs."""
    import torch_flash_backward as tfb
    from torch.nn.attention import SDPBackend
    cudnn_fn, (q, k, v, dout) = tfb.sdpa_backward_call(s, SDPBackend.CUDNN_ATTENTION)
    sides, kernel = ladder_backward_sides(lib, s, torch, q.detach(), k.detach(), v.detach(), dout.contiguous())
    sides["cudnn"] = in_backend(SDPBackend.CUDNN_ATTENTION, cudnn_fn)
    row = {"kernel": kernel}
    flash_side(sides, row, lambda: tfb.sdpa_backward_call(s, SDPBackend.FLASH_ATTENTION)[0])
    row.update(interleaved_row(sides, rounds, tfb.flops(s)))
    if "ladder_det_ms" in row:
        row["det_over_ladder"] = row["ladder_ms"] / row["ladder_det_ms"]
    return row


def forward_row(lib, s, rounds, torch, paths):
    """One forward row: the ladder's kernel (or each of `paths`, KL_FLASH_FAST_PATH values) and cuDNN's, in turn."""
    import torch_flash as tf
    from torch.nn.attention import SDPBackend
    row, sides = {}, {}
    for path in paths or [None]:
        name = f"ladder@{path}" if path else "ladder"
        sides[name], row[f"{name}_kernel" if path else "kernel"] = ladder_call(lib, s, torch, path)
    cudnn_fn, gqa = tf.sdpa_call(s, SDPBackend.CUDNN_ATTENTION)
    sides["cudnn"] = in_backend(SDPBackend.CUDNN_ATTENTION, cudnn_fn)
    if not paths:
        flash_side(sides, row, lambda: tf.sdpa_call(s, SDPBackend.FLASH_ATTENTION)[0])
    row.update(interleaved_row(sides, rounds, tf.flops(s)))
    if gqa:
        row["gqa_cudnn"] = gqa
    return row


def in_backend(backend, fn):
    """fn as a call that runs it inside sdpa_kernel(backend) each time (PyTorch's SDPA with that backend forced)."""
    from torch.nn.attention import sdpa_kernel

    def call():
        with sdpa_kernel(backend):
            fn()
    return call


def flash_side(sides, row, make):
    """Adds PyTorch's flash backend to `sides` ("flash": make() is its call, run once here inside sdpa_kernel), or
    its refusal's first line to row["flash_error"]."""
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel
    try:
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            fn = make()
            fn()
            torch.cuda.synchronize()
    except RuntimeError as e:  # the backend does not take this shape (head dim, grouped queries) in this build
        row["flash_error"] = str(e).splitlines()[0][:200]
        return
    sides["flash"] = in_backend(SDPBackend.FLASH_ATTENTION, fn)


def interleaved_row(sides, rounds, flops):
    """Times each side of `sides` ({name: fn}) in their order, then the reverse, round after round (A B B A, or
    A B C C B A); the row's figures."""
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


def print_table(rows, backward):
    sides = ("ladder", "ladder_det", "cudnn", "flash") if backward else ("ladder", "cudnn", "flash")
    head = "ladder     det   cuDNN  flash  ratio  det/at" if backward else "ladder   cuDNN  flash  ratio"
    print(f"\n{'shape':46} {'kernel':26} {head}  runs (ms: " + "; ".join(sides) + ")")
    for r in rows:
        if "error" in r:
            print(f"{r['shape']:46} refused: {r['error']}")
            continue
        runs = "; ".join(" ".join(f"{x:.4f}" for x in r[f"{n}_runs_ms"]) for n in sides if f"{n}_runs_ms" in r)
        det = f"{r['ladder_det_tflops']:7.1f} " if "ladder_det_tflops" in r else "      - "
        flash = f"{r['flash_tflops']:6.1f}" if "flash_tflops" in r else "     -"
        tail = f"  {r['det_over_ladder']:6.3f}" if "det_over_ladder" in r else ("       -" if backward else "")
        print(f"{r['shape']:46} {r['kernel']:26} {r['ladder_tflops']:6.1f} {det if backward else ''}"
              f"{r['cudnn_tflops']:7.1f} {flash} {r['ladder_over_cudnn']:6.3f}{tail}  {runs}")


def print_paths_table(rows, paths):
    print(f"\n{'shape':46} " + " ".join(f"{p[:24]:>24} ratio" for p in paths) + "   cuDNN  (TFLOP/s)")
    for r in rows:
        if "error" in r:
            print(f"{r['shape']:46} refused: {r['error']}")
            continue
        cells = " ".join(f"{r[f'ladder@{p}_tflops']:24.1f} {r[f'ladder@{p}_over_cudnn']:5.3f}" for p in paths)
        print(f"{r['shape']:46} {cells} {r['cudnn_tflops']:7.1f}")


def summary(rows, key="ladder_over_cudnn"):
    ratios = [r[key] for r in rows if r.get(key)]
    if not ratios:
        return "no shape timed on both sides"
    geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
    line = (f"ladder / cuDNN, timed in turn: 1.0x or more at {sum(x >= 1.0 for x in ratios)} of {len(ratios)} "
            f"shapes, under 0.95x at {sum(x < 0.95 for x in ratios)}, from {min(ratios):.3f}x to "
            f"{max(ratios):.3f}x, geometric mean {geo:.3f}x")
    det = [r["det_over_ladder"] for r in rows if r.get("det_over_ladder")]
    if det:
        line += (f"; deterministic / atomic from {min(det):.3f}x to {max(det):.3f}x, within 10% at "
                 f"{sum(x >= 0.9 for x in det)} of {len(det)}")
    return line


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, help="libkl_ladder_c.so (the cuda preset builds build-cuda/...)")
    ap.add_argument("--out", help="write {versions, rows} as one JSON object here")
    ap.add_argument("--quick", action="store_true", help="L = 512 only (B*L = 1024)")
    ap.add_argument("--rounds", type=int, default=2, help="rounds of A B (then B A): each side timed this often")
    ap.add_argument("--backward", action="store_true", help="the backward instead of the forward")
    ap.add_argument("--paths", help="the forward's ladder side once per KL_FLASH_FAST_PATH value (comma-separated)")
    ap.add_argument("--shapes", help="only the shapes whose row name holds one of these parts (comma-separated)")
    args = ap.parse_args()
    if not 1 <= args.rounds <= 20:
        print(f"{SCRIPT}: --rounds={args.rounds} is out of range: allowed [1, 20]", file=sys.stderr)
        sys.exit(2)
    paths = [x for x in args.paths.split(",") if x] if args.paths else []
    if args.paths is not None and (args.backward or not paths):
        print(f"{SCRIPT}: --paths={args.paths} is out of range: allowed one or more KL_FLASH_FAST_PATH values, "
              f"forward only (not with --backward)", file=sys.stderr)
        sys.exit(2)
    lib = load_ladder(args.lib)
    (torch,) = pc.require(SCRIPT)
    import torch_flash as tf  # the shapes and the SDPA call (imports torch)
    versions = tf.start(SCRIPT)
    shapes = [s for s in tf.shapes(args.quick) if not (args.backward and s["Hkv"])]  # backward: multi-head only
    if args.shapes:
        parts = [x for x in args.shapes.split(",") if x]
        missing = [x for x in parts if not any(x in tf.shape_text(s) for s in shapes)]
        if missing or not parts:
            print(f"{SCRIPT}: --shapes part '{missing[0] if missing else ''}' names no shape: allowed parts of "
                  f"these rows' names, e.g. '{tf.shape_text(shapes[0])}'", file=sys.stderr)
            sys.exit(2)
        shapes = [s for s in shapes if any(x in tf.shape_text(s) for x in parts)]
    rows = []
    for s in shapes:
        row = dict(s)
        row["shape"] = tf.shape_text(s)
        try:
            if args.backward:
                row.update(backward_row(lib, s, args.rounds, torch))
            else:
                row.update(forward_row(lib, s, args.rounds, torch, paths))
            # Each ladder side against cuDNN (the deterministic mode against the default instead: det_over_ladder).
            for name in [k[:-3] for k in list(row) if k.startswith("ladder") and k.endswith("_ms")
                         and not k.endswith("_runs_ms") and k != "ladder_det_ms"]:
                row[f"{name}_over_cudnn"] = row["cudnn_ms"] / row[f"{name}_ms"]
        except RuntimeError as e:  # a side that refuses the shape: its one line, the row without a ratio
            row["error"] = str(e).splitlines()[0][:200]
        print(json.dumps(row), flush=True)
        rows.append(row)
        torch.cuda.empty_cache()
    if paths:
        print_paths_table(rows, paths)
        for path in paths:
            print(f"ladder@{path}: " + summary(rows, f"ladder@{path}_over_cudnn"))
    else:
        print_table(rows, args.backward)
        print(summary(rows))
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"versions": versions, "quick": args.quick, "backward": args.backward, "rows": rows,
                       "method": "interleaved: " + pc.HARNESS}, f, indent=1)


if __name__ == "__main__":
    main()
