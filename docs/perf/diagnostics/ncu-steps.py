"""Per kernel in an Nsight Compute source page (ncu --import R --page source --print-source sass --csv > src.csv):
the instructions executed on every step of every consumer warp (those whose count is STEP_COUNT, e.g. 1064960 for
d = 128 L = 8192 causal: 133,120 steps x 8 consumer warps; or STEP_COUNT*a for the kernels whose lines run on all
but a step or two a CTA, within 4%), by opcode (docs/perf-log.md, the seventeenth session). With several counts
(kernels of several shapes in one page) each kernel takes the one that its lines match most.
  python3 docs/perf/diagnostics/ncu-steps.py src.csv 1064960 2097152"""
import collections, csv, sys

rows = list(csv.reader(open(sys.argv[1], errors="replace")))
steps = [int(a) for a in sys.argv[2:]]
kernels, cur, head = [], None, None
for r in rows:
    if r and r[0] == "Kernel Name":
        cur = {"name": r[1], "rows": []}
        kernels.append(cur)
    elif r and r[0] == "Address":
        head = r
    elif cur is not None and head and len(r) >= len(head) - 2:
        cur["rows"].append(r)
ie = head.index("Instructions Executed")
def per_step(k, step):
    ops = collections.Counter()
    for r in k["rows"]:
        n = float(r[ie] or 0)
        if n and abs(n / step - 1) < 0.04:
            words = r[1].split()
            op = words[1] if words and words[0].startswith("@") else (words[0] if words else "?")
            ops[op.split(".")[0]] += n / step
    return ops


for k in kernels:
    total = sum(float(r[ie] or 0) for r in k["rows"])
    step = max(steps, key=lambda c: sum(per_step(k, c).values()) * c)
    ops = per_step(k, step)
    print(f"{k['name'][:90]} (steps x warps {step}): {total:.4g} instructions; per step per consumer warp "
          f"{sum(ops.values()):.0f}:", ", ".join(f"{o} {v:.0f}" for o, v in ops.most_common(14)))
