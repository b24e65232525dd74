#!/usr/bin/env python3
"""Ratios of bench/ab_builds.sh's runs: python3 bench/ab_ratios.py OUT

OUT holds ab_<tree><pass>.json (tree 1, 2, 3; pass a, b), each `kernel-ladder bench --json`'s output. For each tree
after the first, each row's TFLOP/s over the tree before it (B / A, C / B; and C / A, for two alternatives to A),
each tree's figure the mean of its two passes, then the geometric mean, minimum and maximum by variant, head
dimension and dQ mode (the shape's d= and dq= words) and over every row. Rows pair up by shape whatever kernel ran
(a row whose trees picked different kernels says which: "wgmma-persistent -> wgmma-persistent-q2-late"). Rows a
pass lacks (a tree that failed, a call cut short) are left out and counted."""
import math
import sys
from collections import defaultdict

from bench_json import walk_rows


def split_path(shape):
    """(the shape without the kernel's name, that name or ""): a bench row's shape ends with the fast path that ran
    ("... bf16 wgmma-persistent", "... dq=atomic wgmma-tma"), which a tree that picks another kernel changes."""
    words = shape.split()
    if words and (words[-1].startswith("wgmma") or words[-1].startswith("mma")):
        return " ".join(words[:-1]), words[-1]
    return shape, ""


def rows(path):
    """{(shape, variant): (TFLOP/s, the kernel's name)} of the rows in `path` that have a figure, the shape without
    the kernel's name (rows of trees that pick different kernels pair up); None when the file is missing or unread."""
    try:
        found = walk_rows(path, lambda r: "shape" in r and r.get("tflops"))
    except (OSError, ValueError):
        return None
    out = {}
    for r in found:
        shape, kernel = split_path(r["shape"])
        out[(shape, r.get("variant", ""))] = (r["tflops"], kernel)
    return out


def group_of(key):
    shape, variant = key
    return " ".join([variant] + [w for w in shape.split() if w.startswith("d=") or w.startswith("dq=")])


def summary(label, ratios):
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    return f"{label:34s} {len(ratios):3d} rows: geometric mean {g:.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}"


def compare(out, base, cand):
    """Prints tree `cand` against tree `base`; returns False when no row is in all four passes."""
    passes = (("Aa", base), ("Ab", base), ("Ba", cand), ("Bb", cand))
    runs = {p: rows(f"{out}/ab_{t}{p[-1]}.json") for p, t in passes}
    missing = [f"ab_{t}{p[-1]}.json" for p, t in passes if runs[p] is None]
    if missing:
        print(f"tree {cand} / tree {base}: no results in {', '.join(missing)}")
    have = [r for r in runs.values() if r is not None]
    if len(have) < 4:
        return False
    keys = [k for k in runs["Aa"] if all(k in r for r in have)]
    left = len(set().union(*have)) - len(keys)
    print(f"tree {cand} / tree {base}")
    print(f"{'shape':72s} {'base':>8s} {'cand':>8s}  ratio  (base a, b; cand a, b)")
    by_group = defaultdict(list)
    for k in keys:
        (aa, ka), (ab, _), (ba, kb), (bb, _) = (runs[p][k] for p in ("Aa", "Ab", "Ba", "Bb"))
        ta, tb = (aa + ab) / 2, (ba + bb) / 2
        by_group[group_of(k)].append(tb / ta)
        label = (k[1] + " " + k[0] + (" " + ka if ka else ""))[:72]
        picked = f" {ka} -> {kb}" if ka != kb else ""
        print(f"{label:72s} {ta:8.1f} {tb:8.1f} {tb / ta:6.3f}  ({aa:.1f} {ab:.1f}; {ba:.1f} {bb:.1f}){picked}")
    if not keys:
        print("no rows in common: see ab_*.txt")
        return False
    for g in sorted(by_group):
        print(summary(g, by_group[g]))
    print(summary("every row", [x for v in by_group.values() for x in v]))
    if left:
        print(f"{left} rows not in all four passes, left out")
    print()
    return True


def main():
    if len(sys.argv) != 2:
        print("usage: ab_ratios.py OUT", file=sys.stderr)
        return 2
    out = sys.argv[1]
    trees = sorted({int(t) for t in "123" for p in "ab" if rows(f"{out}/ab_{t}{p}.json") is not None})
    if len(trees) < 2:
        print(f"fewer than two trees with results in {out}")
        return 1
    pairs = [(t - 1, t) for t in range(2, max(trees) + 1)] + ([(1, 3)] if max(trees) == 3 else [])
    ok = [compare(out, a, b) for a, b in pairs]
    return 0 if any(ok) else 1


if __name__ == "__main__":
    sys.exit(main())
