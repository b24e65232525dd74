#!/usr/bin/env bash
# Kernel Ladder's two entry points on a fresh Debian 12 machine (run as root, or with sudo available):
#   ./ladder.sh launch [ARGS...]  installs what is missing, builds, and opens the explorer
#                                 (with no display: renders every panel to PNG and prints where)
#   ./ladder.sh test              installs what is missing, builds, and runs every test; then the
#                                 AddressSanitizer + UBSan build (asan preset): the kernels tests and
#                                 a headless tour under it, any sanitizer report failing the run
#   ./ladder.sh asan              the sanitizer part of `test` alone
#   ./ladder.sh install [PREFIX]  installs what is missing, builds, and installs for one user into PREFIX
#                                 (default ~/.local): the binary, the desktop entry and the icons
# The CUDA backend is built when nvcc is found (PATH, CUDACXX or /usr/local/cuda/bin/nvcc).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"

packages=(
  build-essential cmake ninja-build pkg-config git
  libimgui-dev libglfw3-dev libepoxy-dev libegl-dev libgl-dev libgles-dev libstb-dev
  libcli11-dev nlohmann-json3-dev libgtest-dev libbenchmark-dev fonts-dejavu-core libgif-dev
  libegl-mesa0 libgl1-mesa-dri libglx-mesa0 xvfb xauth xdotool clang libclang-rt-14-dev
  librsvg2-bin ccache
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

# Every build goes through ccache, with paths taken relative to the checkout: a second run and a second
# checkout of the same commit (tests/launch/fresh_clone_launch.sh, where the tree has changes) find the
# objects compiled before. The first build on a machine compiles everything (the cache starts empty); a
# build directory configured before keeps the launcher it was configured with.
use_ccache() {
  command -v ccache > /dev/null || return 0
  export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_CUDA_COMPILER_LAUNCHER=ccache
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
}

build() {
  use_ccache
  cmake --preset default
  cmake --build --preset default -j "$(nproc)"
}

# The CPU side built with AddressSanitizer and UndefinedBehaviorSanitizer (the asan preset, no CUDA): the
# kl_kernels tests (kernels, buffers, the .npy reader, the parameter parser, the editor's CPU path: edited
# kernels compiled and run on the CPU backend) and a headless tour (every panel, through the app, viz and
# GL code) run under it; the first ASan or UBSan report stops the process and fails the run. The viz and
# app tests run in the default build only (under ASan they took 16 minutes of CI's 90 and cover the same
# code as the tour; tests/CMakeLists.txt leaves them out of the asan build). LeakSanitizer runs on the
# kl_kernels tests, third-party frames suppressed by tests/sanitizers/lsan.supp; it is off for the tour,
# where Mesa is loaded: llvmpipe keeps one-time allocations it never frees, is built without frame
# pointers and unloads its driver at eglTerminate, so its reports have no frames a suppression could
# name. Left out: the fuzz test (tests/fuzz/run.sh builds its own ASan + UBSan binaries with clang; the
# plain ctest runs it).
sanitizers() {
  use_ccache
  cmake --preset asan
  cmake --build --preset asan -j "$(nproc)"
  local asan="halt_on_error=1:check_initialization_order=1:strict_init_order=1"
  export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1"
  export LSAN_OPTIONS="suppressions=$(pwd)/tests/sanitizers/lsan.supp"
  ASAN_OPTIONS="$asan:detect_leaks=1" ctest --preset asan -j 2 -L '^kl_kernels$'
  rm -rf build-asan/tour
  ASAN_OPTIONS="$asan:detect_leaks=0" ./build-asan/kernel-ladder tour --backend cpu --size 1000x700 --out build-asan/tour
  echo "ladder.sh: the kernels tests and a headless tour ran clean under AddressSanitizer + UBSan (leaks: kernels tests)"
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
    sanitizers
    ;;
  asan)
    install_missing
    sanitizers
    ;;
  install)
    prefix="${2:-$HOME/.local}"
    case "$prefix" in /*) ;; *) prefix="$OLDPWD/$prefix" ;; esac  # relative to where ladder.sh was run
    install_missing
    build
    cmake --install build --prefix "$prefix"
    # Refresh the desktop's caches where the tools exist (a bare system has neither; the menu finds the
    # entry at its next scan).
    if command -v update-desktop-database > /dev/null; then update-desktop-database -q "$prefix/share/applications" || true; fi
    if command -v gtk-update-icon-cache > /dev/null && [ -f "$prefix/share/icons/hicolor/index.theme" ]; then
      gtk-update-icon-cache -q "$prefix/share/icons/hicolor" || true
    fi
    echo "ladder.sh: installed $prefix/bin/kernel-ladder and its desktop entry (Kernel Ladder, under Education)"
    case ":$PATH:" in *":$prefix/bin:"*) ;; *) echo "ladder.sh: $prefix/bin is not on PATH; the menu entry runs it by its full path" ;; esac
    ;;
  *)
    echo "usage: ./ladder.sh launch [kernel-ladder arguments] | ./ladder.sh test | ./ladder.sh asan | ./ladder.sh install [PREFIX]" >&2
    exit 2
    ;;
esac
