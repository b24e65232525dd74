#!/usr/bin/env python3
"""Same-harness peers for rungs 1-3: the write-up's Triton kernels (bench/triton_kernels.py, BLOCK_SIZE 1024)
and PyTorch's ops, timed with the method of `kernel-ladder bench` (bench/peers_common.py: the timed runs
queued behind a GPU spin, CUDA events around each run, the median; buffer sets rotated past 4x the L2 where
the bench rotates them), at the sizes of `kernel-ladder bench vector-add|relu-dropout|softmax`, each row a
ratio against a device-to-device copy of the same bytes timed in the same run:

  vector-add     n = 2^26 fp32 (quick 2^20), 12 bytes per element; triton add_kernel, torch.add(x, y, out=)
                 5 warm-up runs, median of 30 (as the bench's vector-add rows)
  relu-dropout   n = 2^26 fp32 (quick 2^20), p = 0.5, 8 bytes per element; triton relu_dropout_kernel,
                 F.dropout(torch.relu(x), p, training=True); 3 warm-up runs, median of 50
  softmax        4096 rows (quick 64) x 1024 .. 32768 columns (quick 1024, 4096), 8 bytes per element,
                 cold sets; triton softmax_kernel (BLOCK_SIZE next_power_of_2(n_cols), Triton's default
                 num_warps, and a second row with the Triton tutorial's num_warps), torch.softmax(out=);
                 3 warm-up runs, median of 30

Every peer's output is checked once before it is timed (add: exact; softmax: within 1e-5 of torch's;
relu+dropout: survivors exactly relu(x) / (1 - p) to 1 ulp, the rest 0, drop rate within 1% of p);
a peer that fails is reported and not timed. Prints a table and, last, one JSON line {"peers": [...]}.

Usage: python3 bench/triton_peers.py [--quick] [--only vector-add,relu-dropout,softmax] [--json FILE]
"""
import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_common as pc  # noqa: E402

OPS = ("vector-add", "relu-dropout", "softmax")
P, SEED = 0.5, 1234


def row(op, impl, shape, ms, op_bytes, copy, sets, **extra):
    gbs = op_bytes / (ms * 1e-3) / 1e9
    r = {"op": op, "impl": impl, "shape": shape, "ms": ms, "gbs": gbs, "copy_gbs": copy, "ratio": gbs / copy,
         "sets": sets}
    r.update(extra)
    print(f"{op:<13} {impl:<26} {shape:<14} {ms:9.4f} {gbs:9.1f} {copy:10.1f} {gbs / copy:7.3f}  ({sets} set{'s' * (sets > 1)})")
    return r


def failed(op, impl, shape, why):
    print(f"{op:<13} {impl:<26} {shape:<14} NOT TIMED: {why}")
    return {"op": op, "impl": impl, "shape": shape, "error": why}


def vector_add_rows(torch, tk, quick):
    n = 1 << (20 if quick else 26)
    shape = f"n=2^{20 if quick else 26}"
    x, y = torch.randn(n, device="cuda"), torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    copy = pc.copy_gbs(4 * n)
    want = x + y
    rows = []
    for impl, fn in (("triton add_kernel", lambda: tk.vector_add(x, y, out)),
                     ("torch.add", lambda: torch.add(x, y, out=out))):
        out.fill_(float("nan"))
        fn()
        if not torch.equal(out, want):
            rows.append(failed("vector-add", impl, shape, "output differs from x + y"))
            continue
        rows.append(row("vector-add", impl, shape, pc.per_op_ms([fn], 5, 30), 12.0 * n, copy, 1))
    return rows


def dropout_ok(torch, x, out):
    """Survivors are relu(x) / (1 - p) to 1 ulp, the rest exactly 0, and the drop rate is p within 1%."""
    r = torch.relu(x)
    kept = out != 0
    scaled = r / (1 - P)
    close = torch.isclose(out[kept], scaled[kept], rtol=2.4e-7, atol=0).all().item()
    pos = r > 0  # a dropped element and a relu'd one are both 0: the rate is counted among x > 0
    rate = 1.0 - (kept & pos).sum().item() / max(1, pos.sum().item())
    return close and abs(rate - P) < 0.01, f"survivors match: {close}, drop rate among x > 0: {rate:.4f}"


def relu_dropout_rows(torch, F, tk, quick):
    n = 1 << (20 if quick else 26)
    shape = f"n=2^{20 if quick else 26} p={P}"
    x = torch.randn(n, device="cuda")
    out = torch.empty_like(x)
    copy = pc.copy_gbs(4 * n)
    rows = []
    holder = {}

    def torch_fn():
        holder["out"] = F.dropout(torch.relu(x), p=P, training=True)
    for impl, fn, get in (("triton relu_dropout_kernel", lambda: tk.relu_dropout(x, out, P, SEED), lambda: out),
                          ("torch relu + F.dropout", torch_fn, lambda: holder["out"])):
        out.fill_(float("nan"))
        fn()
        ok, why = dropout_ok(torch, x, get())
        if not ok:
            rows.append(failed("relu-dropout", impl, shape, why))
            continue
        rows.append(row("relu-dropout", impl, shape, pc.per_op_ms([fn], 3, 50), 8.0 * n, copy, 1))
    return rows


def softmax_rows(torch, tk, quick):
    rows_n = 64 if quick else 4096
    widths = [1024, 4096] if quick else [1024, 2048, 4096, 8192, 16384, 32768]
    rows = []
    for n in widths:
        N = rows_n * n
        shape = f"{rows_n}x{n}"
        sets = pc.cold_sets(2 * N * 4)
        xs = [torch.randn(rows_n, n, device="cuda") for _ in range(sets)]
        outs = [torch.empty_like(x) for x in xs]
        copy = pc.copy_gbs(N * 4, sets)
        want = torch.softmax(xs[0], dim=-1)
        nw = tk.tutorial_num_warps(n)
        peers = [("triton softmax_kernel", lambda x, o: tk.softmax(x, o)),
                 (f"triton softmax, num_warps={nw}", lambda x, o, nw=nw: tk.softmax(x, o, nw)),
                 ("torch.softmax", lambda x, o: torch.softmax(x, dim=-1, out=o))]
        for impl, fn in peers:
            try:
                outs[0].fill_(float("nan"))
                fn(xs[0], outs[0])
                torch.cuda.synchronize()
            except Exception as e:  # a Triton compile or launch failure at one width: say so, time the rest
                rows.append(failed("softmax", impl, shape, f"{type(e).__name__}: {str(e).splitlines()[0][:160]}"))
                continue
            if not torch.allclose(outs[0], want, rtol=1e-4, atol=1e-5):
                rows.append(failed("softmax", impl, shape, "output differs from torch.softmax"))
                continue
            ms = pc.per_op_ms([lambda x=x, o=o, fn=fn: fn(x, o) for x, o in zip(xs, outs)], 3, 30)
            rows.append(row("softmax", impl, shape, ms, 8.0 * N, copy, sets))
        del xs, outs
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the sizes of `kernel-ladder bench --quick`")
    ap.add_argument("--only", default=",".join(OPS), help="comma-separated subset of " + ", ".join(OPS))
    ap.add_argument("--json", help="also write the JSON line to this file")
    args = ap.parse_args()
    only = [s for s in args.only.split(",") if s]
    bad = [s for s in only if s not in OPS]
    if bad or not only:
        print(f"triton_peers.py: --only={args.only} is out of range: allowed a comma-separated subset of "
              f"{', '.join(OPS)}", file=sys.stderr)
        return 2
    torch, triton = pc.require("triton_peers.py", ("torch", "triton"))
    import torch.nn.functional as F
    import triton_kernels as tk
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}")
    print(f"{'op':<13} {'impl':<26} {'shape':<14} {'ms':>9} {'GB/s':>9} {'copy GB/s':>10} {'ratio':>7}")
    rows = []
    if "vector-add" in only:
        rows += vector_add_rows(torch, tk, args.quick)
    if "relu-dropout" in only:
        rows += relu_dropout_rows(torch, F, tk, args.quick)
    if "softmax" in only:
        rows += softmax_rows(torch, tk, args.quick)
    line = json.dumps({"peers": rows, "device": torch.cuda.get_device_name(), "torch_version": torch.__version__,
                       "triton_version": triton.__version__, "quick": args.quick})
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
