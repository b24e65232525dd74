#!/usr/bin/env bash
# Rung 1½ (issue 31) on the GPU machine, after `cmake --preset cuda && cmake --build --preset cuda`:
#   1. ctest: the access-log tracer, the transpose rung, its study, panel and gallery, every rung's sectors per
#      request, and the editable-kernel tests the tracer's ABI change touches (kl::Tensor grew to 48 bytes):
#      the GPU tests compare the CUDA backend's logs and counts with the CPU backend's.
#   2. `bench transpose` twice (8192 x 8192 floats, the fast naive/tiled/padded and the traced build, each
#      against a device-to-device copy measured in the same run), and the issue's check on both runs:
#      padded >= 0.85 of copy, naive below padded.
#   3. `study transpose` and a shot of the panel on the CUDA backend (GB/s beside the counts).
# Logs under $OUT (default ./gpu-out). About 3 minutes.
set -uo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
out=${OUT:-gpu-out}
mkdir -p "$out"
bin=./build-cuda/kernel-ladder
{
  date -u
  nvidia-smi -L
  nvidia-smi --query-gpu=clocks.sm,clocks.max.sm,power.draw,power.limit,temperature.gpu --format=csv
} > "$out/summary.txt" 2>&1
echo "== ctest" >> "$out/summary.txt"
timeout 600 ctest --test-dir build-cuda -j8 --timeout 300 --output-on-failure \
  -R '^(WarpAccess[A-Za-z]*|AccessLog|Transpose|TransposeStudy|TransposeGallery|TransposePanel|MemoryAccess|EditableNvrtc|EditableWorker|EditableLaunch)\.' \
  > "$out/ctest.log" 2>&1
grep -E "tests passed|tests failed|\(Failed\)|\(Timeout\)|Skipped|Not Run" "$out/ctest.log" >> "$out/summary.txt"
for pass in 1 2; do
  echo "== bench transpose, pass $pass" >> "$out/summary.txt"
  timeout 120 "$bin" bench transpose --backend cuda --json "$out/transpose$pass.json" > "$out/bench$pass.txt" 2>&1 \
    || echo "bench pass $pass failed: rc $?" >> "$out/summary.txt"
  cat "$out/bench$pass.txt" >> "$out/summary.txt"
  python3 - "$out/transpose$pass.json" >> "$out/summary.txt" 2>&1 <<'PY'
import json, sys
rows = {r["variant"]: r for r in json.load(open(sys.argv[1]))["rows"]}
naive, padded = rows["naive"]["ratio"], rows["padded"]["ratio"]
print(f"padded {padded:.3f} of copy (want >= 0.85): {'PASS' if padded >= 0.85 else 'FAIL'}")
print(f"naive {naive:.3f} of copy, below padded: {'PASS' if naive < padded else 'FAIL'}")
PY
done
echo "== study transpose" >> "$out/summary.txt"
timeout 120 "$bin" study transpose --backend cuda >> "$out/summary.txt" 2>&1 || echo "study failed: rc $?" >> "$out/summary.txt"
timeout 120 "$bin" shot transpose --backend cuda --size 1400x1500 --out "$out/transpose-cuda.png" >> "$out/summary.txt" 2>&1 \
  || echo "shot failed: rc $?" >> "$out/summary.txt"
nvidia-smi --query-gpu=clocks.sm,power.draw,temperature.gpu --format=csv >> "$out/summary.txt" 2>&1
cat "$out/summary.txt"
