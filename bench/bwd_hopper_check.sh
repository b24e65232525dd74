#!/usr/bin/env bash
# The backward's wgmma main kernel on an H100/H200, after `cmake --preset cuda && cmake --build --preset cuda`:
#   1. the backward-fast tests (all three main kernels: the Wgmma* and WgmmaBulk* tests run only where the
#      sm_90a code loads),
#   2. a `run flash-attention-backward --variant fast` smoke per path (KL_FLASH_BWD_PATH=mma|wgmma|wgmma-bulk),
#      both dQ modes, causal and not, Lq != Lk with tails, bf16 and fp16, d 64 and 128, against teaching,
#   3. `bench flash-attention-backward --backend cuda` once per path (--json each), then a table of the three
#      paths' TFLOP/s per shape with wgmma-bulk / wgmma (from the JSON files, no torch needed),
#   4. where python3 imports torch (and KL_BWD_PEERS is not 0): bench/torch_flash_backward.py against the
#      wgmma and wgmma-bulk JSON (bwd_peers_{wgmma,wgmma-bulk}.txt; PyTorch's flash and cuDNN times each run).
# Logs into $OUT (default ./gpu-out): bwd_summary.txt (read this first), bwd_ctest.log, bwd_smoke.txt,
# bwd_bench_{mma,wgmma,wgmma-bulk}.{txt,json}, bwd_paths.txt. Steps 1-3 took about 1 minute on the H200
# with two paths; with three and the peers, expect 2 to 4.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
bin=${KL_BIN:-./build-cuda/kernel-ladder}
sum="$out/bwd_summary.txt"
log() { echo "== $*" | tee -a "$sum"; }

log "$(date -u) $(nvidia-smi -L 2>&1 | head -1)"
log "ctest -R FlashAttentionBackwardFast"
timeout 170 ctest --preset cuda -R FlashAttentionBackwardFast -j4 --timeout 160 --output-on-failure -V \
  > "$out/bwd_ctest.log" 2>&1
echo "ctest rc=$?" | tee -a "$sum"
grep -E "tests passed|tests failed|Total Test time|\(Failed\)|\(Timeout\)|Not Run|\*\*\*Skipped|wgmma backward on this device" \
  "$out/bwd_ctest.log" | tee -a "$sum"
grep -E "^\S*: Failure|Expected|Which is|error" "$out/bwd_ctest.log" | head -40 >> "$sum"

log "run smoke (fast, both paths, against teaching on CUDA; rel = relative norm error)"
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
  "$bin" run flash-attention-backward --backend cuda --variant teaching $ins --set causal="$causal" \
    --out dq="$tmp/t_dq.npy" --out dk="$tmp/t_dk.npy" --out dv="$tmp/t_dv.npy" > "$tmp/log" 2>&1 || { cat "$tmp/log"; return 1; }
  local path line
  line="B=$B H=$H Lq=$Lq Lk=$Lk d=$d causal=$causal $dtype det=$det:"
  for path in mma wgmma wgmma-bulk; do
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
for d in 128 64; do
  smoke 2 3 300 517 "$d" 0 bf16 0
  smoke 2 3 517 300 "$d" 1 bf16 0
  smoke 1 2 1000 1000 "$d" 1 fp16 0
  smoke 1 2 333 129 "$d" 1 bf16 1
done
rm -rf "$tmp"
echo "(against the float32 teaching variant on unrounded inputs: bf16 rel about 1e-2 or below, fp16 about 2e-3; wgmma and wgmma-bulk should read like mma)" | tee -a "$sum"

for path in mma wgmma wgmma-bulk; do
  log "bench flash-attention-backward, KL_FLASH_BWD_PATH=$path"
  KL_FLASH_BWD_PATH=$path timeout 100 "$bin" bench flash-attention-backward --backend cuda \
    --json "$out/bwd_bench_$path.json" > "$out/bwd_bench_$path.txt" 2>&1
  echo "bench rc=$?" | tee -a "$sum"
  grep -E "fast" "$out/bwd_bench_$path.txt" | tee -a "$sum"
done
log "the three paths side by side (TFLOP/s, bf16; bulk/wgmma > 1: the candidate is faster)"
python3 - "$out" <<'EOF' 2>&1 | tee "$out/bwd_paths.txt" | tee -a "$sum"
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
        got[re.sub(r" (mma\.sync|wgmma-bulk|wgmma)$", "", r["shape"])] = r["tflops"]
    return got
m, w, b = rows("mma"), rows("wgmma"), rows("wgmma-bulk")
print(f"{'shape':60s} {'mma':>7s} {'wgmma':>7s} {'bulk':>7s} {'bulk/wgmma':>10s}")
cell = lambda t: f"{t:7.1f}" if t else "      -"
for key in w or m or b:
    ratio = f"{b[key] / w[key]:10.2f}" if b.get(key) and w.get(key) else "         -"
    print(f"{key:60s} {cell(m.get(key))} {cell(w.get(key))} {cell(b.get(key))} {ratio}")
import math
r = [b[k] / w[k] for k in w if b.get(k) and w.get(k) and "dq=atomic" in k]
if r:  # one line for a script to read: the candidate's geometric-mean speed-up on the default dQ mode
    print(f"bulk/wgmma geometric mean over the dq=atomic rows: {math.exp(sum(map(math.log, r)) / len(r)):.3f}")
EOF
if [ "${KL_BWD_PEERS:-1}" != 0 ] && python3 -c "import torch" 2>/dev/null; then
  for path in wgmma wgmma-bulk; do
    log "peers: bench/torch_flash_backward.py --ladder-json bwd_bench_$path.json"
    timeout 150 python3 bench/torch_flash_backward.py --ladder-json "$out/bwd_bench_$path.json" \
      > "$out/bwd_peers_$path.txt" 2>&1
    echo "peers rc=$?" | tee -a "$sum"
    grep -vE '^\{' "$out/bwd_peers_$path.txt" | tee -a "$sum"
  done
else
  log "peers skipped (KL_BWD_PEERS=0 or no torch)"
fi
log "done $(date -u)"
