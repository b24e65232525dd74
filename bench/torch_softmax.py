#!/usr/bin/env python3
"""PyTorch baselines for rungs 2 and 3, timed like `kernel-ladder bench` (CUDA events, median after
warm-up, copy bandwidth measured in the same run, buffers rotated so that no launch is timed from the
L2 cache), the timed runs queued behind a GPU spin so that Python's launch overhead is not timed:

  softmax:      torch.softmax(x, dim=-1), x fp32 [4096, n_cols], n_cols in 1024 .. 32768
  relu-dropout: F.dropout(torch.relu(x), p=0.5) at 2^26 fp32 elements

GB/s counts the bytes the operation must move (softmax: read + write, 8 bytes per element; relu+dropout:
8 bytes per element), the copy baseline is a device-to-device copy of the same bytes (read + write).
Prints a table and, last, one JSON line ({"torch": [...]}) for the lead to compare with
`kernel-ladder bench softmax --json` / `bench relu-dropout --json`.

Usage: python3 bench/torch_softmax.py [--rows 4096] [--quick] [--json FILE]
"""
import argparse
import json
import statistics
import sys

import torch
import torch.nn.functional as F


def time_ms(fn, warmup=5, iters=30):
    """Median of `iters` event-timed runs of fn, queued behind a ~10 ms spin on the GPU (as `kernel-ladder
    bench` does), so the interpreter's launch overhead never falls inside a timed interval."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    torch.cuda._sleep(20_000_000)  # 2e7 GPU cycles: ~10 ms at the H200's 1.98 GHz
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def cold_sets(bytes_per_set):
    """As `kernel-ladder bench` does: rotate through enough (input, output) sets to span 4x the L2, so a
    shape that fits the cache is not timed from it."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 60 << 20)
    return max(1, -(-4 * l2 // bytes_per_set))


def per_op_ms(fns, warmup=5, iters=30):
    """Median time of one op, rotating through `fns` (one per buffer set), each run timed on its own."""
    state = {"k": 0}

    def step():
        fns[state["k"]]()
        state["k"] = (state["k"] + 1) % len(fns)
    return time_ms(step, warmup, iters)


def copy_gbs(nbytes, sets=1):
    pairs = []
    for _ in range(sets):
        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(1)
        pairs.append((src, torch.empty_like(src)))
    ms = per_op_ms([lambda s=s, d=d: d.copy_(s) for s, d in pairs])
    return 2.0 * nbytes / (ms * 1e-3) / 1e9


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--json", help="also write the JSON line to this file")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("torch_softmax.py: no CUDA device; this script runs on the GPU machine only", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    rows_out = []
    widths = [1024, 4096] if args.quick else [1024, 2048, 4096, 8192, 16384, 32768]
    rows = 64 if args.quick else args.rows
    print(f"device: {torch.cuda.get_device_name()}  torch {torch.__version__}")
    print(f"{'op':<14} {'shape':<16} {'ms':>9} {'GB/s':>9} {'copy GB/s':>10} {'ratio':>7}")
    for n in widths:
        nbytes = rows * n * 4
        sets = cold_sets(2 * nbytes)
        xs = [torch.randn(rows, n, device="cuda", dtype=torch.float32) for _ in range(sets)]
        outs = [torch.empty_like(x) for x in xs]
        ms = per_op_ms([lambda x=x, o=o: torch.softmax(x, dim=-1, out=o) for x, o in zip(xs, outs)])
        gbs = 2.0 * nbytes / (ms * 1e-3) / 1e9
        copy = copy_gbs(nbytes, sets)
        rows_out.append({"op": "softmax", "shape": f"{rows}x{n}", "ms": ms, "gbs": gbs, "copy_gbs": copy,
                         "ratio": gbs / copy, "sets": sets})
        print(f"{'softmax':<14} {rows}x{n:<11} {ms:9.4f} {gbs:9.1f} {copy:10.1f} {gbs / copy:7.3f}  ({sets} sets)")
        del xs, outs
    n = (1 << 20) if args.quick else (1 << 26)
    x = torch.randn(n, device="cuda", dtype=torch.float32)
    ms = per_op_ms([lambda: F.dropout(torch.relu(x), p=0.5, training=True)])
    gbs = 8.0 * n / (ms * 1e-3) / 1e9
    copy = copy_gbs(n * 4)
    rows_out.append({"op": "relu+dropout", "shape": f"n={n}", "ms": ms, "gbs": gbs, "copy_gbs": copy,
                     "ratio": gbs / copy})
    print(f"{'relu+dropout':<14} {'n=' + str(n):<16} {ms:9.4f} {gbs:9.1f} {copy:10.1f} {gbs / copy:7.3f}")
    line = json.dumps({"torch": rows_out, "device": torch.cuda.get_device_name(), "torch_version": torch.__version__})
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
