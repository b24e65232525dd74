#!/usr/bin/env bash
# Kernel Ladder's two entry points on a fresh Debian 12 machine (run as root, or with sudo available):
#   ./ladder.sh launch [ARGS...]  installs what is missing, builds, and opens the explorer
#                                 (with no display: renders every panel to PNG and prints where)
#   ./ladder.sh test              installs what is missing, builds, and runs every test
# The CUDA backend is built when nvcc is found (PATH, CUDACXX or /usr/local/cuda/bin/nvcc).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

packages=(
  build-essential cmake ninja-build pkg-config git
  libimgui-dev libglfw3-dev libepoxy-dev libegl-dev libgl-dev libgles-dev libstb-dev
  libcli11-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev fonts-dejavu-core
  libegl-mesa0 libgl1-mesa-dri libglx-mesa0 xvfb xauth clang libclang-rt-14-dev
)

install_missing() {
  local missing=()
  for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "ladder.sh: installing ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
}

build() {
  cmake --preset default
  cmake --build --preset default -j "$(nproc)"
}

case "${1:-}" in
  launch)
    shift
    install_missing
    build
    if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]; then
      exec ./build/kernel-ladder "$@"
    fi
    echo "ladder.sh: no display (DISPLAY and WAYLAND_DISPLAY are unset): rendering every panel headlessly instead"
    ./build/kernel-ladder tour --out out/tour
    echo "ladder.sh: the panels are in $(pwd)/out/tour (index: out/tour/index.md)"
    ;;
  test)
    install_missing
    build
    ctest --preset default -j 2
    ;;
  *)
    echo "usage: ./ladder.sh launch [kernel-ladder arguments] | ./ladder.sh test" >&2
    exit 2
    ;;
esac
