#!/usr/bin/env bash
# Two builds of the project timed in one GPU call, each in the exact form it would ship (no switches):
#   bench/ab_builds.sh DIR_A DIR_B [RUNG]        (RUNG: a `kernel-ladder bench` rung, default flash-attention)
# DIR_A and DIR_B are source trees already built with the cuda preset (DIR/build-cuda/kernel-ladder); a tree for
# another commit comes from `git archive REV | tar -x -C .devrun/NAME` on the CPU machine, carried with the call.
# Runs `bench RUNG --backend cuda --json` four times, A B B A (each first once, each last once), and prints per row
# B / A from the mean of each build's two runs, then the geometric mean, minimum and maximum over the rows. Logs
# into $OUT (default ./gpu-out): ab_{A1,B1,B2,A2}.json, ab_ratios.txt.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: $0 DIR_A DIR_B [RUNG]" >&2; exit 2; }
a=$1 b=$2 rung=${3:-flash-attention}
out=${OUT:-gpu-out}
mkdir -p "$out"
for d in "$a" "$b"; do
  [ -x "$d/build-cuda/kernel-ladder" ] || { echo "$0: no $d/build-cuda/kernel-ladder (build it with the cuda preset)" >&2; exit 2; }
done
for run in A1 B1 B2 A2; do
  dir=$a; [[ $run == B* ]] && dir=$b
  timeout 300 "$dir/build-cuda/kernel-ladder" bench "$rung" --backend cuda --json "$out/ab_$run.json" \
    > "$out/ab_$run.txt" 2>&1
  echo "bench $run ($dir) rc=$?"
done
python3 - "$out" <<'PY' | tee "$out/ab_ratios.txt"
import json, math, sys
out = sys.argv[1]
def rows(run):
    try:
        doc = json.load(open(f"{out}/ab_{run}.json"))
    except (OSError, ValueError):
        return {}
    return {(r["shape"], r.get("variant", "")): r["tflops"] for r in doc.get("rows", []) if r.get("tflops")}
a1, b1, b2, a2 = (rows(r) for r in ("A1", "B1", "B2", "A2"))
ratios = []
print(f"{'shape':72s} {'A':>8s} {'B':>8s}    B/A  (A1 A2 B1 B2)")
for k in a1:
    if k in a2 and k in b1 and k in b2:
        ta, tb = (a1[k] + a2[k]) / 2, (b1[k] + b2[k]) / 2
        ratios.append(tb / ta)
        print(f"{(k[1] + ' ' + k[0])[:72]:72s} {ta:8.1f} {tb:8.1f} {tb / ta:6.3f}  ({a1[k]:.1f} {a2[k]:.1f} {b1[k]:.1f} {b2[k]:.1f})")
if ratios:
    g = math.exp(sum(map(math.log, ratios)) / len(ratios))
    print(f"B/A over {len(ratios)} rows: geometric mean {g:.3f}, min {min(ratios):.3f}, max {max(ratios):.3f}")
else:
    print("no rows in common: see ab_*.txt")
PY
