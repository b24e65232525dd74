#!/usr/bin/env bash
# The README's first command as a new user meets it: a fresh clone of the committed HEAD, no display,
# `./ladder.sh launch` must exit 0 with every panel's image and index.md in out/tour/.
# Usage: fresh_clone_launch.sh REPOSITORY
# Where REPOSITORY is its committed HEAD with nothing changed and nothing untracked (CI runs `.ci/run` on a
# fresh clone, so there it is one), the launch runs in REPOSITORY itself: its build/ is what ladder.sh's
# build made from that clone, so `./ladder.sh launch` configures and builds nothing new and renders the
# tour. Anywhere else (a working tree with changes) it clones HEAD into a temporary folder and builds a
# second copy there, through ccache where it exists (paths made relative to the clone, so the objects of an
# earlier build of the same sources are found); without ccache, a plain build.
set -euo pipefail
repo="${1:?usage: fresh_clone_launch.sh REPOSITORY}"
work="$(mktemp -d "${TMPDIR:-/tmp}/kl-fresh-clone.XXXXXX")"
trap 'rm -rf "$work"' EXIT
# ladder.sh installs what is missing through apt; where a package of its list is not installed and
# there is no registry to fetch it from (a machine whose libraries were unpacked by hand, such as the GPU
# machine's), the command cannot do what it is for: say so and skip (exit 77). CI runs this after
# `./ladder.sh test` has installed every package, so there it always runs.
eval "$(sed -n '/^packages=(/,/^)/p' "$repo/ladder.sh")"
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ] && ! apt-get install -s -qq "${missing[@]}" > /dev/null 2>&1; then
  echo "SKIP: ladder.sh would install ${missing[*]}, and apt cannot find them here"
  exit 77
fi
if [ -z "$(git -C "$repo" status --porcelain --untracked-files=normal)" ]; then
  echo "fresh_clone_launch: $repo is its HEAD ($(git -C "$repo" rev-parse --short HEAD)) with nothing changed or added: launching there"
  cd "$repo"
  rm -rf out/tour
else
  echo "fresh_clone_launch: $repo has changes: cloning HEAD ($(git -C "$repo" rev-parse --short HEAD)) and building it again"
  git clone -q "$repo" "$work/kl"
  cd "$work/kl"
  if command -v ccache >/dev/null 2>&1; then
    export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
    export CCACHE_BASEDIR="$work/kl" CCACHE_NOHASHDIR=1
  fi
fi
status=0
env -u DISPLAY -u WAYLAND_DISPLAY ./ladder.sh launch || status=$?
if [ "$status" -ne 0 ]; then
  echo "fresh_clone_launch: ./ladder.sh launch exited $status" >&2
  exit 1
fi
index=out/tour/index.md
[ -f "$index" ] || { echo "fresh_clone_launch: no $index" >&2; exit 1; }
images=0
while IFS= read -r name; do
  [ -s "out/tour/$name" ] || { echo "fresh_clone_launch: $index lists $name, not in out/tour" >&2; exit 1; }
  images=$((images + 1))
done < <(grep -o '([^()]*\.png)' "$index" | tr -d '()')
pngs=$(find out/tour -name '*.png' | wc -l)
if [ "$images" -lt 2 ] || [ "$images" -ne "$pngs" ]; then
  echo "fresh_clone_launch: $index lists $images images, out/tour holds $pngs" >&2
  exit 1
fi
echo "fresh_clone_launch: exit 0, $images images and index.md in out/tour"
