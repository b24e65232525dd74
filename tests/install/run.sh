#!/usr/bin/env bash
# The installed program, from the build tree the rest of the tests use (nothing is built again):
#   ./run.sh prefix BUILD_DIR CMAKE   `cmake --install BUILD_DIR --prefix TMP` installs exactly the binary,
#                                     the desktop entry and the icons; the installed binary runs `list`,
#                                     `shot` and `tour` from an empty folder (no source tree, no build tree)
#   ./run.sh deb BUILD_DIR CPACK      `cpack -G DEB` builds the .deb; its Depends come from dpkg-shlibdeps;
#                                     `dpkg -x` into a scratch root, and the binary there runs `list`, `shot`
# Exit 77 (a skip) only where dpkg-deb is missing (not a Debian system) for `deb`.
set -euo pipefail
mode=$1 build=$(cd "$2" && pwd) tool=$3
scratch="$build/tests/tmp/install-$mode"
rm -rf "$scratch" && mkdir -p "$scratch/empty"
fail() { echo "FAIL: $*" >&2; exit 1; }

# Runs BIN with ARGS from the empty folder with HOME and XDG_CONFIG_HOME inside the scratch folder.
run_from_empty() {
  local bin=$1; shift
  (cd "$scratch/empty" && env -u DISPLAY -u WAYLAND_DISPLAY HOME="$scratch/home" \
     XDG_CONFIG_HOME="$scratch/home/.config" "$bin" "$@")
}

check_runs() {  # BIN: list, shot (and the PNG is written), --version names a commit
  local bin=$1
  run_from_empty "$bin" list > "$scratch/list.txt" || fail "$bin list failed"
  grep -q "vector-add" "$scratch/list.txt" || fail "$bin list does not name the vector-add panel"
  run_from_empty "$bin" shot softmax --backend cpu --size 640x400 --out "$scratch/shot.png" || fail "$bin shot failed"
  [ -s "$scratch/shot.png" ] || fail "$bin shot wrote no PNG"
  run_from_empty "$bin" --version | grep -Eq '^kernel-ladder [0-9]+\.[0-9]+\.[0-9]+ \(commit [^)]+\)$' \
    || fail "$bin --version does not print 'kernel-ladder X.Y.Z (commit C)'"
}

expected_files() {  # PREFIX: the files an install must hold, sorted
  printf '%s\n' bin/kernel-ladder share/applications/kernel-ladder.desktop \
    share/icons/hicolor/48x48/apps/kernel-ladder.png share/icons/hicolor/128x128/apps/kernel-ladder.png \
    share/icons/hicolor/256x256/apps/kernel-ladder.png share/icons/hicolor/scalable/apps/kernel-ladder.svg | sort
}

check_tree() {  # ROOT PREFIX_SEEN_BY_DESKTOP: exactly the expected files, PNG sizes, the desktop entry
  local root=$1 exec_prefix=$2
  diff <(cd "$root" && find . -type f -o -type l | sed 's|^\./||' | sort) <(expected_files) \
    || fail "the install under $root holds other files than the binary, the desktop entry and the icons"
  for px in 48 128 256; do
    local png="$root/share/icons/hicolor/${px}x${px}/apps/kernel-ladder.png"
    # PNG IHDR: width and height as big-endian 32-bit integers at bytes 16..23
    local w h
    w=$((16#$(od -An -tx1 -j16 -N4 "$png" | tr -d ' \n'))) h=$((16#$(od -An -tx1 -j20 -N4 "$png" | tr -d ' \n')))
    [ "$w x $h" = "$px x $px" ] || fail "$png is $w x $h, not $px x $px"
  done
  local desktop="$root/share/applications/kernel-ladder.desktop"
  grep -qx "Exec=$exec_prefix/bin/kernel-ladder" "$desktop" || fail "$desktop: Exec is not $exec_prefix/bin/kernel-ladder"
  grep -qx "Icon=kernel-ladder" "$desktop" || fail "$desktop: no Icon=kernel-ladder"
  grep -qx "Categories=Education;Development;" "$desktop" || fail "$desktop: categories"
}

case "$mode" in
  prefix)
    prefix="$scratch/prefix"
    "$tool" --install "$build" --prefix "$prefix" > "$scratch/install.log" || fail "cmake --install failed"
    check_tree "$prefix" "$prefix"
    check_runs "$prefix/bin/kernel-ladder"
    run_from_empty "$prefix/bin/kernel-ladder" tour --backend cpu --size 640x400 --out "$scratch/empty/tour" \
      > "$scratch/tour.log" || fail "the installed binary's tour failed"
    [ -s "$scratch/empty/tour/index.md" ] || fail "the tour wrote no index.md"
    [ "$(ls "$scratch/empty/tour"/*.png | wc -l)" -ge 10 ] || fail "the tour wrote fewer than 10 PNGs"
    ;;
  deb)
    command -v dpkg-deb > /dev/null || { echo "SKIP: dpkg-deb not found (not a Debian system)"; exit 77; }
    (cd "$build" && "$tool" -G DEB -B "$scratch/out" > "$scratch/cpack.log") || { cat "$scratch/cpack.log"; fail "cpack -G DEB failed"; }
    deb=$(ls "$scratch/out"/kernel-ladder_*.deb) || fail "cpack wrote no kernel-ladder_*.deb"
    depends=$(dpkg-deb -f "$deb" Depends)
    echo "Depends: $depends"
    # Every library the binary links dynamically that a Debian package owns must be named in Depends
    # (libraries from elsewhere, as on a machine whose toolchain is not Debian's, have no package to name).
    names=$(tr ',' '\n' <<< "$depends" | sed 's/^ *//; s/ .*//; s/:.*//')
    owned=0
    while read -r path; do
      pkg=$(dpkg -S "$(readlink -f "$path")" 2>/dev/null | head -1 | cut -d: -f1) || true
      [ -n "$pkg" ] || pkg=$(dpkg -S "$path" 2>/dev/null | head -1 | cut -d: -f1) || true
      [ -n "$pkg" ] || continue
      owned=$((owned + 1))
      grep -qxF "$pkg" <<< "$names" || fail "the binary links $path (package $pkg), which Depends does not name: $depends"
    done < <(needed=$(readelf -d "$build/kernel-ladder" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
             ldd "$build/kernel-ladder" | awk -v n="$needed" 'BEGIN{split(n, a, "\n"); for (i in a) want[a[i]]=1}
                                                               $2 == "=>" && ($1 in want) && $3 ~ /^\// {print $3}')
    [ "$owned" -gt 0 ] || fail "no library the binary links is owned by a Debian package"
    echo "Depends names the packages of all $owned dpkg-owned libraries the binary links"
    ! grep -qi "cuda\|cublas" <<< "$depends" || fail "the .deb depends on a CUDA package: $depends"
    dpkg-deb -x "$deb" "$scratch/root"
    check_tree "$scratch/root/usr" /usr
    check_runs "$scratch/root/usr/bin/kernel-ladder"
    ;;
  *) fail "usage: run.sh prefix|deb BUILD_DIR TOOL" ;;
esac
echo "ok: $mode"
