# Sourced first by the call scripts in this folder, on the GPU machine with $OUT set: the summary file $S, el (a line
# into it after the seconds since the start), $OUT/logs, the device's name, KL_CMAKE_ARGS for the icons drawn on the
# CPU machine, and call_build (bench/gpu_session.sh build into $OUT/gs, its rc in the summary).
T0=$SECONDS
S=$OUT/0-summary.txt
el() { echo "[$((SECONDS - T0)) s] $*" | tee -a "$S"; }
mkdir -p "$OUT/logs"
nvidia-smi -L | tee -a "$S"
export KL_CMAKE_ARGS=-DKL_ICON_PNG_DIR=$PWD/.devicons
call_build() {
  OUT=$OUT/gs timeout 200 bash bench/gpu_session.sh build > "$OUT/logs/gs-build.log" 2>&1
  el "build rc=$?"
}
