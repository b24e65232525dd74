#!/usr/bin/env bash
# Builds of the project timed in one GPU call, each in the exact form it would ship (no switches):
#   bench/ab_builds.sh [--build] [--tests REGEX] [--rung RUNG] [--trees-only] DIR_A B [C]
# DIR_A is the base; B (and C) the candidates, each either a source tree for another commit (made by
# `git archive REV -- . ':!docs/tour' ':!docs/window' | tar -x -C .devrun/NAME` on the CPU machine and carried with
# the call) or a patch file (NAME.patch, `git format-patch` or `git diff` output): then the tree is made here, in
# .ab/NAME, from DIR_A's files (without its builds, .git, .ab, .devrun, .devx, .devdeps, out, docs/tour and
# docs/window) with the patch applied (`git apply`), and kept for a later call while the patch is the same.
# --trees-only: make those trees, print where, and stop. RUNG: a `kernel-ladder bench` rung (default
# flash-attention).
#   --build        builds every tree first, side by side (cuda preset; $KL_CMAKE_ARGS added, e.g.
#                  -DKL_ICON_PNG_DIR=$PWD/.devicons where there is no rsvg-convert); else each must hold
#                  DIR/build-cuda/kernel-ladder already
#   --tests REGEX  runs the last tree's tests matching REGEX (ctest, cuda preset) before the timing; if one of them
#                  times out (a kernel that hangs, most likely), that tree is left out of the benches
# Then `bench RUNG --backend cuda --json` once per tree, then again in the reverse order (A B B A; with C:
# A B C C B A: each tree first or last once), and bench/ab_ratios.py prints each row's B / A (and C / B, C / A)
# from the mean of each tree's two runs, with the geometric mean, minimum and maximum by head dimension and dQ
# mode and over all rows. Logs into $OUT (default ./gpu-out): ab_<tree><pass>.json (tree 1, 2, 3; pass a, b),
# ab_ratios.txt, clocks.csv (nvidia-smi beside the benches, in one line by bench/clocks_summary.py); when the
# call is cut short, `python3 bench/ab_ratios.py OUT` on the CPU machine reads what was written.
set -uo pipefail
usage() { echo "usage: $0 [--build] [--tests REGEX] [--rung RUNG] [--trees-only] DIR_A B [C]" >&2; exit 2; }
build=0 tests="" rung=flash-attention dirs=() trees_only=0
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=1 ;;
    --trees-only) trees_only=1 ;;
    --tests) [ $# -ge 2 ] || usage; tests=$2; shift ;;
    --rung) [ $# -ge 2 ] || usage; rung=$2; shift ;;
    -*) usage ;;
    *) dirs+=("$1") ;;
  esac
  shift
done
if [ ${#dirs[@]} -lt 2 ] || [ ${#dirs[@]} -gt 3 ]; then usage; fi
# A candidate given as a patch: its tree, .ab/NAME, made from DIR_A's files (kept while .ab/NAME/.ab.patch is the
# same patch, so a warm machine keeps its build).
tree_of_patch() {  # BASE PATCH -> prints the tree's directory
  local base=$1 patch=$2 name dst
  local patch_abs
  patch_abs=$(realpath "$patch")
  name=$(basename "$patch" .patch)
  dst=.ab/$name
  if ! cmp -s "$patch" "$dst/.ab.patch" 2>/dev/null; then
    rm -rf "$dst" && mkdir -p "$dst" || return 1
    tar -C "$base" -c --exclude=./build --exclude=./build-cuda --exclude=./.git --exclude=./.ab --exclude=./.devrun \
      --exclude=./.devx --exclude=./.devdeps --exclude=./out --exclude=./docs/tour --exclude=./docs/window . \
      | tar -x -C "$dst" || return 1
    # Outside any repository (GIT_CEILING_DIRECTORIES): inside the one .ab may sit in, `git apply` reads a git
    # diff's paths from that repository's root and skips them all, exit status 0.
    if ! (cd "$dst" && GIT_CEILING_DIRECTORIES=$(dirname "$PWD") git apply "$patch_abs"); then
      echo "$0: $patch does not apply to $base" >&2
      rm -rf "$dst"
      return 1
    fi
    cp "$patch" "$dst/.ab.patch"
  fi
  echo "$dst"
}
[ -d "${dirs[0]}" ] || { echo "$0: DIR_A ${dirs[0]} is not a directory" >&2; exit 2; }
for i in 1 2; do
  [ $i -lt ${#dirs[@]} ] || break
  if [[ ${dirs[$i]} == *.patch ]]; then
    [ -f "${dirs[$i]}" ] || { echo "$0: no patch file ${dirs[$i]}" >&2; exit 2; }
    dirs[$i]=$(tree_of_patch "${dirs[0]}" "${dirs[$i]}") || exit 2
  elif [ ! -d "${dirs[$i]}" ]; then
    echo "$0: ${dirs[$i]} is neither a directory nor a .patch file" >&2; exit 2
  fi
done
if [ $trees_only = 1 ]; then printf '%s\n' "${dirs[@]}"; exit 0; fi
out=${OUT:-gpu-out}
mkdir -p "$out"
t0=$(date +%s)
if [ $build = 1 ]; then
  jobs=$(( $(nproc) / ${#dirs[@]} )); [ $jobs -ge 1 ] || jobs=1
  for i in "${!dirs[@]}"; do
    # shellcheck disable=SC2086  # KL_CMAKE_ARGS: several arguments
    ( cd "${dirs[$i]}" && cmake --preset cuda ${KL_CMAKE_ARGS:-} > /dev/null && cmake --build --preset cuda -j$jobs ) \
      > "$out/build_$((i + 1)).log" 2>&1 &
  done
  wait
  grep -hE "spill stores|C75[0-9][0-9]" "$out"/build_*.log | grep -v " 0 bytes spill" | head
  echo "build $(( $(date +%s) - t0 )) s"
fi
for d in "${dirs[@]}"; do
  [ -x "$d/build-cuda/kernel-ladder" ] ||
    { echo "$0: no $d/build-cuda/kernel-ladder (build it with the cuda preset, or --build)" >&2; exit 2; }
done
if [ -n "$tests" ]; then
  last=${dirs[${#dirs[@]} - 1]}
  ( cd "$last" && timeout 240 ctest --preset cuda -R "$tests" -j8 --timeout 200 --output-on-failure ) > "$out/tests.log" 2>&1
  rc=$?
  echo "tests of $last rc=$rc ($(( $(date +%s) - t0 )) s)"
  grep -E "tests passed|tests failed|\(Failed\)|Timeout" "$out/tests.log" | head -20
  # A test that ran out of time (or the run, rc 124) is most likely a kernel that hangs: the benches would hang too
  # (300 s each), so that tree is left out of them.
  if [ $rc = 124 ] || grep -qF "***Timeout" "$out/tests.log"; then
    echo "$last: a test timed out; its tree is left out of the benches"
    unset 'dirs[${#dirs[@]}-1]'
    [ ${#dirs[@]} -ge 2 ] || exit 1
  fi
fi
order=()
for i in "${!dirs[@]}"; do order+=("$((i + 1))a"); done
for (( i = ${#dirs[@]} - 1; i >= 0; i-- )); do order+=("$((i + 1))b"); done
# The GPU's clocks and power while the benches run (bench/clocks_summary.py's line at the end).
python3 "$(dirname "$0")/clocks_summary.py" --record "$out/clocks.csv" &
smi=$!
for run in "${order[@]}"; do
  dir=${dirs[$(( ${run:0:1} - 1 ))]}
  timeout 300 "$dir/build-cuda/kernel-ladder" bench "$rung" --backend cuda --json "$out/ab_$run.json" \
    > "$out/ab_$run.txt" 2>&1
  echo "bench $run ($dir) rc=$? ($(( $(date +%s) - t0 )) s)"
done
kill $smi 2>/dev/null
python3 "$(dirname "$0")/ab_ratios.py" "$out" | tee "$out/ab_ratios.txt"
python3 "$(dirname "$0")/clocks_summary.py" "$out/clocks.csv" "clocks under the benches"
