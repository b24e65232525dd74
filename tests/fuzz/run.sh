#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for a bounded time on the seed
# corpus; then replays every saved regression input. A crash is saved under regressions/ to keep.
#   tests/fuzz/run.sh [SECONDS_PER_TARGET]   (default 30)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${1:-30}
out=${KL_FUZZ_BUILD:-$root/build-fuzz}
mkdir -p "$out"
command -v clang++ >/dev/null || { echo "fuzz: clang++ not found (./ladder.sh test installs clang)"; exit 1; }
common=("$root/kernels/runtime/npy.cpp" "$root/kernels/runtime/params.cpp" "$root/kernels/runtime/errors.cpp" "$root/kernels/runtime/array.cpp")
flags=(-std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$root")
status=0
for t in npy params; do
  clang++ "${flags[@]}" "$here/fuzz_$t.cpp" "${common[@]}" -o "$out/fuzz_$t"
  mkdir -p "$out/corpus_$t" "$here/regressions/$t"
  cp -n "$here/corpus/$t/"* "$out/corpus_$t/" 2>/dev/null || true
  echo "fuzz_$t: replaying $(ls "$here/regressions/$t" | wc -l) regression inputs"
  if [ -n "$(ls "$here/regressions/$t")" ]; then
    "$out/fuzz_$t" "$here/regressions/$t"/* >/dev/null 2>&1 || { echo "fuzz_$t: a regression input fails again"; status=1; }
  fi
  echo "fuzz_$t: fuzzing for ${secs}s"
  if ! "$out/fuzz_$t" -max_total_time="$secs" -max_len=4096 -artifact_prefix="$here/regressions/$t/" \
       -print_final_stats=1 "$out/corpus_$t" "$here/corpus/$t" > "$out/fuzz_$t.log" 2>&1; then
    echo "fuzz_$t: found a crash, kept under tests/fuzz/regressions/$t/:"; tail -30 "$out/fuzz_$t.log"; status=1
  else
    grep -E "stat::number_of_executed_runs|Done" "$out/fuzz_$t.log" | tail -2
  fi
done
exit $status
