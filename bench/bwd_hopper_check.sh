#!/usr/bin/env bash
# The backward's wgmma main kernel on an H100/H200, after `cmake --preset cuda && cmake --build --preset cuda`:
#   1. the backward-fast tests (every main kernel: the Wgmma* and WgmmaTma* tests run only where the sm_90a code
#      loads),
#   2. a `run flash-attention-backward --variant fast` smoke per path (KL_FLASH_BWD_PATH=mma|wgmma|wgmma-tma),
#      both dQ modes, causal and not, Lq != Lk with tails, bf16 and fp16, d 64 and 128, against teaching,
#   3. `bench flash-attention-backward --backend cuda` once per path (--json each; KL_BWD_BENCH_PATHS, default
#      "wgmma wgmma-tma"), then a table of the paths' TFLOP/s per shape with each candidate / wgmma
#      (from the JSON files, no torch needed),
#   4. where python3 imports torch (and KL_BWD_PEERS is not 0): bench/torch_flash_backward.py once, against the
#      last path's JSON (bwd_peers.txt: PyTorch's flash and cuDNN timed in this run), and every path's TFLOP/s
#      over that run's cuDNN (bwd_cudnn.txt).
# Logs into $OUT (default ./gpu-out): bwd_summary.txt (read this first), bwd_ctest.log, bwd_smoke.txt,
# bwd_bench_PATH.{txt,json}, bwd_paths.txt. Steps 1-3 took about 1 minute on the H200 with two paths; with
# three and the peers, expect 2 to 4. KL_BWD_SKIP="tests smoke" leaves those steps out.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
bin=${KL_BIN:-./build-cuda/kernel-ladder}
sum="$out/bwd_summary.txt"
log() { echo "== $*" | tee -a "$sum"; }

log "$(date -u) $(nvidia-smi -L 2>&1 | head -1)"
skip=" ${KL_BWD_SKIP:-} "
if [[ "$skip" != *" tests "* ]]; then
log "ctest -R FlashAttentionBackwardFast"
timeout 170 ctest --preset cuda -R FlashAttentionBackwardFast -j4 --timeout 160 --output-on-failure -V \
  > "$out/bwd_ctest.log" 2>&1
echo "ctest rc=$?" | tee -a "$sum"
grep -E "tests passed|tests failed|Total Test time|\(Failed\)|\(Timeout\)|Not Run|\*\*\*Skipped|wgmma backward on this device" \
  "$out/bwd_ctest.log" | tee -a "$sum"
grep -E "^\S*: Failure|Expected|Which is|error" "$out/bwd_ctest.log" | head -40 >> "$sum"
fi

if [[ "$skip" != *" smoke "* ]]; then
log "run smoke (fast, every path, against teaching on CUDA; rel = relative norm error)"
tmp=$(mktemp -d)
# float32 C-order .npy files without numpy: "gen DIR B H Lq Lk d" writes q, k, v, do (uniform in [-1, 1]);
# "cmp DIR PATH" prints the relative norm error of PATH_{dq,dk,dv}.npy against t_{dq,dk,dv}.npy.
cat > "$tmp/npy.py" <<'EOF'
import array, ast, math, random, struct, sys

def save(path, shape, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{n}, " for n in shape)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        array.array("f", values).tofile(f)

def load(path):
    with open(path, "rb") as f:
        data = f.read()
    major = data[6]
    hl = 10 if major == 1 else 12
    n = struct.unpack("<H", data[8:10])[0] if major == 1 else struct.unpack("<I", data[8:12])[0]
    meta = ast.literal_eval(data[hl:hl + n].decode("latin1"))
    assert meta["descr"] == "<f4" and not meta["fortran_order"], meta
    a = array.array("f")
    a.frombytes(data[hl + n:])
    return a

if sys.argv[1] == "gen":
    t, B, H, Lq, Lk, d = sys.argv[2], *map(int, sys.argv[3:])
    rng = random.Random(B * 1000003 + Lq * 1009 + Lk * 13 + d)
    for name, L in (("q", Lq), ("k", Lk), ("v", Lk), ("do", Lq)):
        save(f"{t}/{name}.npy", (B, H, L, d), [rng.uniform(-1, 1) for _ in range(B * H * L * d)])
else:
    t, p = sys.argv[2], sys.argv[3]
    out = []
    for n in ("dq", "dk", "dv"):
        ref, got = load(f"{t}/t_{n}.npy"), load(f"{t}/{p}_{n}.npy")
        num = sum((float(g) - float(r)) ** 2 for g, r in zip(got, ref))
        den = sum(float(r) ** 2 for r in ref)
        bad = sum(1 for g in got if not math.isfinite(g))
        out.append(f"{n} {math.sqrt(num / den) if den > 0 else math.sqrt(num):.2e}" + (f" ({bad} not finite!)" if bad else ""))
    print(" ".join(out))
EOF
smoke() {  # B H Lq Lk d causal dtype deterministic
  local B=$1 H=$2 Lq=$3 Lk=$4 d=$5 causal=$6 dtype=$7 det=$8
  python3 "$tmp/npy.py" gen "$tmp" "$B" "$H" "$Lq" "$Lk" "$d" || return 1
  local ins="--in q=$tmp/q.npy --in k=$tmp/k.npy --in v=$tmp/v.npy --in do=$tmp/do.npy"
  local path line
  line="B=$B H=$H Lq=$Lq Lk=$Lk d=$d causal=$causal $dtype det=$det:"
  if ! "$bin" run flash-attention-backward --backend cuda --variant teaching $ins --set causal="$causal" \
      --out dq="$tmp/t_dq.npy" --out dk="$tmp/t_dk.npy" --out dv="$tmp/t_dv.npy" > "$tmp/log" 2>&1; then
    echo "$line teaching FAILED ($(head -c 300 "$tmp/log" | tr "\n" " "))" | tee -a "$out/bwd_smoke.txt" "$sum"
    return 1
  fi
  local paths="mma wgmma wgmma-tma"
  for path in $paths; do
    if ! KL_FLASH_BWD_PATH=$path timeout 60 "$bin" run flash-attention-backward --backend cuda --variant fast $ins \
        --set causal="$causal" --set dtype="$dtype" --set deterministic="$det" \
        --out dq="$tmp/${path}_dq.npy" --out dk="$tmp/${path}_dk.npy" --out dv="$tmp/${path}_dv.npy" > "$tmp/log" 2>&1; then
      line="$line $path FAILED ($(head -c 300 "$tmp/log" | tr "\n" " "))"
      continue
    fi
    line="$line $path $(python3 "$tmp/npy.py" cmp "$tmp" "$path")"
  done
  echo "$line" | tee -a "$out/bwd_smoke.txt" "$sum"
}
# d 64 and 128 only: the teaching backward, the reference here, stops at d = 128 (the D256 tests check the d = 256
# kernels against the float64 backward).
for d in 128 64; do
  smoke 2 3 300 517 "$d" 0 bf16 0
  smoke 2 3 517 300 "$d" 1 bf16 0
  smoke 1 2 1000 1000 "$d" 1 fp16 0
  smoke 1 2 333 129 "$d" 1 bf16 1
done
rm -rf "$tmp"
echo "(against the float32 teaching variant on unrounded inputs: bf16 rel about 1e-2 or below, fp16 about 2e-3; the wgmma paths should read like mma)" | tee -a "$sum"
fi

# Candidates (docs/perf-log.md): a path named NAME-SUFFIX runs NAME with SUFFIX's switch at 1, from the table below
# (none now; suffixes combine, NAME-a-b sets both). KL_BWD_BENCH_BASE (default wgmma): the path the side-by-side
# table divides by.
declare -A switch_of=()
paths=${KL_BWD_BENCH_PATHS:-wgmma wgmma-tma}
for path in $paths; do
  real=$path envs=()
  for suffix in "${!switch_of[@]}"; do
    [[ $real == *-$suffix || $real == *-$suffix-* ]] && real=${real/-$suffix/} && envs+=("${switch_of[$suffix]}=1")
  done
  log "bench flash-attention-backward, KL_FLASH_BWD_PATH=$real ${envs[*]}"
  env "${envs[@]}" KL_FLASH_BWD_PATH=$real timeout 180 "$bin" \
    bench flash-attention-backward --backend cuda \
    --json "$out/bwd_bench_$path.json" > "$out/bwd_bench_$path.txt" 2>&1
  echo "bench rc=$?" | tee -a "$sum"
  grep -E "fast" "$out/bwd_bench_$path.txt" | tee -a "$sum"
done
base=${KL_BWD_BENCH_BASE:-wgmma}
log "the paths side by side (TFLOP/s, bf16; PATH/$base > 1: the candidate is faster)"
python3 - "$out" "$base" $paths <<'EOF' 2>&1 | tee "$out/bwd_paths.txt" | tee -a "$sum"
import json, os, re, sys
out = sys.argv[1]
def rows(path):
    f = f"{out}/bwd_bench_{path}.json"
    if not os.path.exists(f):
        return {}
    got = {}
    try:
        doc = json.load(open(f))
    except ValueError:
        return {}
    for r in doc.get("rows", []):
        if r.get("variant") != "fast":
            continue
        got[re.sub(r" (mma\.sync|wgmma-tma|wgmma|wgmma-d256)$", "", r["shape"])] = r["tflops"]
    return got
import math
bname, paths = sys.argv[2], sys.argv[3:]
t = {p: rows(p) for p in paths}
base = t.get(bname) or {}
print(f"{'shape':60s} " + " ".join(f"{p:>10s}" for p in paths) + " " + " ".join(f"{p + '/' + bname:>16s}" for p in paths if p != bname))
for key in next((t[p] for p in paths if t[p]), {}):
    cells = " ".join(f"{t[p][key]:10.1f}" if t[p].get(key) else "         -" for p in paths)
    ratios = " ".join(f"{t[p][key] / base[key]:16.3f}" if t[p].get(key) and base.get(key) else "               -"
                      for p in paths if p != bname)
    print(f"{key:60s} {cells} {ratios}")
for p in paths:  # one line per candidate and dQ mode for a script to read: its geometric-mean speed-up
    for mode in ("atomic", "deterministic"):
        r = [t[p][k] / base[k] for k in base if p != bname and t[p].get(k) and f"dq={mode}" in k]
        if r:
            print(f"{p}/{bname} geometric mean over the dq={mode} rows: {math.exp(sum(map(math.log, r)) / len(r)):.3f}"
                  f" (min {min(r):.3f}, max {max(r):.3f})")
EOF
if [ "${KL_BWD_PEERS:-1}" != 0 ] && python3 -c "import torch" 2>/dev/null; then
  last=${paths##* }
  log "peers: bench/torch_flash_backward.py --ladder-json bwd_bench_$last.json"
  timeout 200 python3 bench/torch_flash_backward.py --ladder-json "$out/bwd_bench_$last.json" \
    --out "$out/bwd_peers.json" > "$out/bwd_peers.txt" 2>&1
  echo "peers rc=$?" | tee -a "$sum"
  grep -vE '^\{' "$out/bwd_peers.txt" | tee -a "$sum"
  log "every path over this run's cuDNN (TFLOP/s ratio; the default mode: dq=atomic rows, at d = 256 dq=deterministic)"
  python3 - "$out" $paths <<'EOF' 2>&1 | tee "$out/bwd_cudnn.txt" | tee -a "$sum"
import json, re, sys
out, paths = sys.argv[1], sys.argv[2:]
cudnn = {}
for line in open(f"{out}/bwd_peers.txt"):
    if line.startswith("{"):
        x = json.loads(line)
        if x.get("cudnn_tflops"):
            cudnn[(x["L"], x["d"], x["causal"])] = x["cudnn_tflops"]
print(f"{'L':>6s} {'d':>4s} {'mask':>10s} {'cuDNN':>7s} " + " ".join(f"{p:>10s}" for p in paths))
rows = {}
for p in paths:
    doc = json.load(open(f"{out}/bwd_bench_{p}.json"))
    for r in doc.get("rows", []):
        m = re.search(r"L=(\d+)\s+d=(\d+)\s+(non-causal|causal).*dq=(atomic|deterministic)", r.get("shape", ""))
        # The default mode: the atomic row; at d = 256 the one row (both modes run the dQ pass there).
        if r.get("variant") == "fast" and m and (m[4] == "atomic" or m[2] == "256"):
            rows.setdefault((int(m[1]), int(m[2]), m[3] == "causal"), {})[p] = r["tflops"]
for k, v in rows.items():
    c = cudnn.get(k)
    cells = " ".join(f"{v[p] / c:10.2f}" if c and v.get(p) else "         -" for p in paths)
    print(f"{k[0]:6d} {k[1]:4d} {'causal' if k[2] else 'non-causal':>10s} {c or 0:7.1f} {cells}")
EOF
else
  log "peers skipped (KL_BWD_PEERS=0 or no torch)"
fi
log "done $(date -u)"
