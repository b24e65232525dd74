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
a peer that fails is reported and not timed. Prints a table and, last, one JSON line {"peers": [...],
"versions": {...}} (peers_common.versions(); bench/record_peers.py reads it).

With --ladder BIN it first runs `BIN bench KERNEL --backend cuda --json` for each kernel, once per `fast`
candidate of vector add (KL_VECTOR_ADD_FAST) and of fused ReLU + dropout (KL_RELU_DROPOUT_FAST), the list
read from the binary's own refusal of an unknown name, the first candidate again at the end (run-to-run
spread), and prints each candidate's ratio beside the best peer's: issue 16's bars are vector add at least
the better of Triton's and torch's ratio, fused ReLU + dropout at least 0.95 of copy.

Usage: python3 bench/triton_peers.py [--quick] [--only vector-add,relu-dropout,softmax] [--ladder BIN]
                                     [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_common as pc  # noqa: E402

OPS = ("vector-add", "relu-dropout", "softmax")
P, SEED = 0.5, 1234


def row(op, impl, shape, ms, op_bytes, copy, sets, **extra):
    gbs = op_bytes / (ms * 1e-3) / 1e9
    r = {"op": op, "impl": impl, "shape": shape, "ms": ms, "gbs": gbs, "copy_gbs": copy, "ratio": gbs / copy,
         "sets": sets}
    r.update(extra)
    print(f"{op:<13} {impl:<30} {shape:<14} {ms:9.4f} {gbs:9.1f} {copy:10.1f} {gbs / copy:7.3f}  ({sets} set{'s' * (sets > 1)})")
    return r


def failed(op, impl, shape, why):
    print(f"{op:<13} {impl:<30} {shape:<14} NOT TIMED: {why}")
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
        peers = [("triton softmax_kernel", lambda x, o: tk.softmax(x, o))]
        if nw != 4:  # Triton's default num_warps is 4: the tutorial's rule differs from it from 2048 columns
            peers.append((f"triton softmax, num_warps={nw}", lambda x, o, nw=nw: tk.softmax(x, o, nw)))
        peers.append(("torch.softmax", lambda x, o: torch.softmax(x, dim=-1, out=o)))
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


LADDER = {"vector-add": ("KL_VECTOR_ADD_FAST", "fast"), "relu-dropout": ("KL_RELU_DROPOUT_FAST", "fused"),
          "softmax": (None, None)}


def candidates_of(binary, kernel, var):
    """The candidate names the binary accepts for `var`, from its one-line refusal of an unknown one."""
    env = dict(os.environ, **{var: "?"})
    p = subprocess.run([binary, "bench", kernel, "--backend", "cuda", "--quick"], env=env, capture_output=True,
                       text=True, timeout=120)
    text = p.stdout + p.stderr
    marker = "is out of range: allowed "
    if p.returncode != 2 or marker not in text:
        raise RuntimeError(f"{binary} did not refuse {var}=? with the candidate list (exit {p.returncode}): "
                           f"{text.strip().splitlines()[-1:] }")
    return text.split(marker, 1)[1].splitlines()[0].strip().split(", ")


def ladder_bench(binary, kernel, quick, var=None, candidate=None):
    env = dict(os.environ)
    if var:
        env[var] = candidate
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "bench.json")
        cmd = [binary, "bench", kernel, "--backend", "cuda", "--json", path] + (["--quick"] if quick else [])
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} exit {p.returncode}: {(p.stdout + p.stderr).strip()[-300:]}")
        with open(path) as f:
            rows = json.load(f)["rows"]
    for r in rows:
        r["candidate"] = candidate
    return rows


def ladder_rows(binary, only, quick):
    print(f"{'ours':<13} {'variant':<12} {'candidate':<14} {'shape':<22} {'ms':>9} {'GB/s':>9} {'ratio':>7}  baseline")
    out = []
    for kernel in only:
        var, timed = LADDER[kernel]
        try:
            cands = candidates_of(binary, kernel, var) if var else [None]
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            print(f"{kernel:<13} NOT RUN: {e}")
            continue
        runs = cands + cands[:1] if len(cands) > 1 else cands  # the first again last: the run-to-run spread
        for c in runs:
            try:
                rows = ladder_bench(binary, kernel, quick, var, c)
            except (RuntimeError, subprocess.TimeoutExpired) as e:
                print(f"{kernel:<13} {'-':<12} {c or '-':<14} NOT RUN: {e}")
                continue
            for r in rows:
                if timed is None or r["variant"] == timed:
                    print(f"{kernel:<13} {r['variant']:<12} {c or '-':<14} {r['shape']:<22} {r['ms']:9.4f} "
                          f"{r['gbs']:9.1f} {r['ratio']:7.3f}  {r['baseline']}")
            out += rows
    return out


def verdicts(ladder, peers):
    """Issue 16's two bars, read off this run."""
    lines = []
    for kernel, timed, bar_text in (("vector-add", "fast", None), ("relu-dropout", "fused", 0.95)):
        ours = [r for r in ladder if r["kernel"] == kernel and r["variant"] == timed]
        theirs = [r for r in peers if r["op"] == kernel and "ratio" in r]
        if not ours:
            continue
        best = max(ours, key=lambda r: r["ratio"])
        if bar_text is None:
            if not theirs:
                continue
            peer = max(theirs, key=lambda r: r["ratio"])
            bar, what = peer["ratio"], f"{peer['impl']} {peer['ratio']:.3f}"
        else:
            bar, what = bar_text, f"{bar_text:.3f}"
        spread = [r["ratio"] for r in ours if r["candidate"] == ours[0]["candidate"]]
        lines.append(f"{kernel}: best candidate {best['candidate']} {best['ratio']:.3f} of copy; bar {what}: "
                     f"{'met' if best['ratio'] >= bar else 'NOT met'} (candidate {ours[0]['candidate']} read "
                     f"{', '.join(f'{v:.3f}' for v in spread)} first and last)")
    return lines


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="the sizes of `kernel-ladder bench --quick`")
    ap.add_argument("--only", default=",".join(OPS), help="comma-separated subset of " + ", ".join(OPS))
    ap.add_argument("--ladder", metavar="BIN", help="also run BIN's bench for every fast candidate first")
    ap.add_argument("--json", help="also write the JSON line to this file")
    args = ap.parse_args()
    only = [s for s in args.only.split(",") if s]
    bad = [s for s in only if s not in OPS]
    if bad or not only:
        print(f"triton_peers.py: --only={args.only} is out of range: allowed a comma-separated subset of "
              f"{', '.join(OPS)}", file=sys.stderr)
        return 2
    if args.ladder and not os.access(args.ladder, os.X_OK):
        print(f"triton_peers.py: --ladder={args.ladder} is not an executable file", file=sys.stderr)
        return 2
    torch, triton = pc.require("triton_peers.py", ("torch", "triton"))
    import torch.nn.functional as F
    import triton_kernels as tk
    torch.manual_seed(0)
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}  triton {triton.__version__}")
    ladder = ladder_rows(args.ladder, only, args.quick) if args.ladder else []
    print(f"{'op':<13} {'impl':<30} {'shape':<14} {'ms':>9} {'GB/s':>9} {'copy GB/s':>10} {'ratio':>7}")
    rows = []
    if "vector-add" in only:
        rows += vector_add_rows(torch, tk, args.quick)
    if "relu-dropout" in only:
        rows += relu_dropout_rows(torch, F, tk, args.quick)
    if "softmax" in only:
        rows += softmax_rows(torch, tk, args.quick)
    for v in verdicts(ladder, rows):
        print(v)
    line = json.dumps({"peers": rows, "ladder": ladder, "device": torch.cuda.get_device_name(), "torch_version": torch.__version__,
                       "triton_version": triton.__version__, "quick": args.quick, "versions": pc.versions(triton)})
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
