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
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peers_common as pc  # noqa: E402  (the timing method shared with bench/triton_peers.py)
from peers_common import copy_gbs, cold_sets, per_op_ms  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=4096)
    ap.add_argument("--quick", action="store_true", help="small sizes (a smoke run)")
    ap.add_argument("--json", help="also write the JSON line to this file")
    args = ap.parse_args()
    torch, = pc.require("torch_softmax.py")
    import torch.nn.functional as F
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
    line = json.dumps({"torch": rows_out, "device": torch.cuda.get_device_name(), "torch_version": torch.__version__,
                       "versions": pc.versions()})
    print(line)
    if args.json:
        with open(args.json, "w") as f:
            f.write(line + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
