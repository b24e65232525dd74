#!/usr/bin/env python3
"""Per-kernel forward table: the ladder's `bench flash-attention` rows timed with
KL_FLASH_FAST_BENCH_PATHS (each shape once per kernel, back to back, the kernel's name at the end of the
shape) against the cuDNN and flash figures bench/torch_flash.py measured in the same session.

  python3 bench/fwd_paths_table.py --ladder-json fa.json --peer-json peer.json [--md table.md]

Prints, per shape, each kernel's TFLOP/s and its ratio to cuDNN, and each candidate's ratio to the
default (wgmma, whatever order the run listed the kernels in); then per candidate the geometric mean of
that ratio by head dimension and length.
"""
import argparse
import json
import math
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_json as bj  # noqa: E402  (torch-free; torch_flash.py reads the same JSON with it)

# A fast row's shape as KL_FLASH_FAST_BENCH_PATHS names it: SHAPE_RE's groups, then the kernel's name.
ROW_RE = re.compile(bj.SHAPE_RE.pattern + r"\s+bf16\s+(\S+)")


def ladder(path):
    rows, order = {}, []
    for x in bj.walk_rows(path, lambda x: "shape" in x and "tflops" in x and x.get("variant") == "fast"):
        m = ROW_RE.search(str(x["shape"]))
        if m:
            rows.setdefault(bj.shape_key(m), {})[m.group(5)] = float(x["tflops"])
            if m.group(5) not in order:
                order.append(m.group(5))
    return rows, order


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ladder-json", required=True)
    ap.add_argument("--peer-json", required=True, help="bench/torch_flash.py --out")
    ap.add_argument("--md", help="also write the table as markdown here")
    args = ap.parse_args()
    rows, paths = ladder(args.ladder_json)
    with open(args.peer_json) as f:
        doc = json.load(f)  # {versions, rows} (torch_flash.py --out), or the older plain list of rows
    peers = {(r["L"], r["d"], r["causal"], r["Hkv"]): r for r in (doc["rows"] if isinstance(doc, dict) else doc)}
    if "wgmma" in paths:  # the default first, whatever order the run listed the kernels in
        paths = ["wgmma"] + [p for p in paths if p != "wgmma"]
    base = paths[0] if paths else None
    head = ["d", "L", "mask", "Hkv"] + paths + ["cuDNN", "flash"] + [f"{p}/cuDNN" for p in paths] + \
           [f"{p}/{base}" for p in paths[1:]]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    ratios = {p: {} for p in paths[1:]}
    for key in sorted(rows, key=lambda k: (k[3] or 0, k[1], k[0], k[2])):
        L, d, causal, hkv = key
        r, peer = rows[key], peers.get(key, {})
        cud, fl = peer.get("cudnn_tflops"), peer.get("flash_tflops")
        cells = [str(d), str(L), "causal" if causal else "non-causal", str(hkv or "")]
        cells += [f"{r[p]:.1f}" if p in r else "-" for p in paths]
        cells += [f"{cud:.1f}" if cud else "-", f"{fl:.1f}" if fl else "-"]
        cells += [f"{r[p] / cud:.2f}" if (p in r and cud) else "-" for p in paths]
        for p in paths[1:]:
            if p in r and base in r:
                ratios[p].setdefault((d, L), []).append(r[p] / r[base])
                cells.append(f"{r[p] / r[base]:.3f}")
            else:
                cells.append("-")
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    for p in paths[1:]:
        gm = {k: math.exp(sum(map(math.log, v)) / len(v)) for k, v in sorted(ratios[p].items())}
        lines.append(f"{p} / {base}, geometric mean over masks (and GQA rows) by d, L: " +
                     ", ".join(f"d={d} L={L}: {g:.3f}" for (d, L), g in gm.items()))
    text = "\n".join(lines)
    print(text)
    if args.md:
        with open(args.md, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
