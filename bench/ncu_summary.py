#!/usr/bin/env python3
"""What Nsight Compute's source page says about one kernel, in a screenful: python3 bench/ncu_summary.py SASS_CSV [NAME]

SASS_CSV is `ncu -i REPORT --page source --csv --print-source sass` (bench/ncu_profile.sh writes it); NAME picks the
kernel whose name contains it where the report holds several (default: the first). Prints the warp-stall reasons
(share of all samples), the shared-memory wavefronts against the ideal per instruction (bank conflicts), the
instruction mix (executed, by opcode) and the instructions where the most samples stalled, with their top reason.
Samples that ncu files under no reason of the CSV (a wgmma waiting for the tensor cores, most often) count as
"unlisted"."""
import csv
import sys
from collections import Counter, defaultdict


def kernels(path):
    """[(name, header, rows)] of the report's kernels, in order."""
    out, cur = [], None
    with open(path, newline="") as f:
        for r in csv.reader(f):
            if r and r[0] == "Kernel Name":
                cur = [r[1] if len(r) > 1 else "", None, []]
                out.append(cur)
            elif r and r[0] == "Address" and cur is not None:
                cur[1] = r
            elif cur is not None and cur[1] is not None and r:
                cur[2].append(r)
    if not out:  # a single kernel's page has no "Kernel Name" row before its header
        with open(path, newline="") as f:
            rows = list(csv.reader(f))
        hdr = next((i for i, r in enumerate(rows) if r and r[0] == "Address"), None)
        if hdr is not None:
            out.append(["", rows[hdr], rows[hdr + 1:]])
    return out


def num(text):
    try:
        return float(text.replace(",", ""))
    except (ValueError, AttributeError):
        return 0.0


def opcode(source):
    words = [w for w in source.strip().split() if not w.startswith("@")]
    return words[0] if words else ""


def summarize(name, hdr, rows, out=sys.stdout):
    ix = {h: i for i, h in enumerate(hdr)}
    get = lambda r, h: num(r[ix[h]]) if h in ix and ix[h] < len(r) else 0.0
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(get(r, "Warp Stall Sampling (All Samples)") for r in rows)
    print(f"kernel: {name or '(one kernel)'}", file=out)
    print(f"instructions: {len(rows)} in the code, {sum(get(r, 'Instructions Executed') for r in rows):,.0f} warp-level "
          f"executed; {total:,.0f} stall samples", file=out)
    if total > 0:
        by_reason = {h: sum(get(r, h) for r in rows) for h in reasons}
        unlisted = total - sum(by_reason.values())
        parts = sorted(by_reason.items(), key=lambda kv: -kv[1])[:8]
        print("stalls: " + ", ".join(f"{h[6:]} {100 * v / total:.1f}%" for h, v in parts) +
              f", unlisted {100 * unlisted / total:.1f}%", file=out)
    wav, ideal = defaultdict(float), defaultdict(float)
    for r in rows:
        op = opcode(r[ix["Source"]])
        wav[op] += get(r, "L1 Wavefronts Shared")
        ideal[op] += get(r, "L1 Wavefronts Shared Ideal")
    shared = [(op, wav[op], ideal[op]) for op in wav if wav[op] > 0]
    if shared:
        print("shared memory (wavefronts / ideal): " + ", ".join(
            f"{op} {w:,.0f}/{i:,.0f}" + (f" ({w / i:.2f}x)" if i > 0 and w > i else "") for op, w, i in
            sorted(shared, key=lambda t: -t[1])[:8]), file=out)
    mix = Counter()
    for r in rows:
        mix[opcode(r[ix["Source"]]).split(".")[0]] += get(r, "Instructions Executed")
    print("mix: " + ", ".join(f"{op} {v / 1e6:.1f}M" for op, v in mix.most_common(14)), file=out)
    print("most stalled instructions (samples, share, top reason):", file=out)
    for r in sorted(rows, key=lambda r: -get(r, "Warp Stall Sampling (All Samples)"))[:12]:
        s = get(r, "Warp Stall Sampling (All Samples)")
        if s <= 0:
            break
        top = max(reasons, key=lambda h: get(r, h)) if reasons else ""
        top_v = get(r, top) if top else 0.0
        why = f"{top[6:]} {100 * top_v / s:.0f}%" if top_v > 0.2 * s else "unlisted"
        print(f"  {r[ix['Address']][-5:]} {s:8,.0f} {100 * s / total:5.1f}%  {why:18s} {r[ix['Source']].strip()[:70]}",
              file=out)


def main(argv):
    if len(argv) < 2 or len(argv) > 3:
        print(__doc__.strip().splitlines()[0], file=sys.stderr)
        return 2
    found = kernels(argv[1])
    if len(argv) == 3:
        found = [k for k in found if argv[2] in k[0]]
    if not found:
        print(f"ncu_summary.py: no kernel{' named like ' + argv[2] if len(argv) == 3 else ''} in {argv[1]}",
              file=sys.stderr)
        return 2
    summarize(*found[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
