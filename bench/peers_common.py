"""What every peer script in bench/ times with, the method of `kernel-ladder bench` (kernels/measure/bench.*):

  - the timed runs are queued behind a ~10 ms spin on the GPU, so the interpreter's launch overhead never
    falls inside a timed interval (bench::detail::enqueue_spin; here torch.cuda._sleep);
  - each run is timed on its own between two CUDA events, and the median is kept;
  - inputs that fit the L2 are rotated through enough (input, output) sets to span 4x the L2, so no launch
    is timed from the cache (bench::cold_sets);
  - the baseline is a device-to-device copy of the same bytes, rotated the same way, timed in the same run
    (bench::copy_bandwidth_gbs: bytes read + bytes written over time).

torch is imported on first use (require()), so a script that imports this module on a machine without it
fails with one line instead of a traceback.
"""
import importlib
import os
import statistics
import subprocess
import sys
import time

torch = None  # set by require()

# How every peer (and the ladder's bench) is timed, in one sentence: stamped into the recorded results
# (bench/record_peers.py, docs/perf/h200.json) beside the versions.
HARNESS = ("bench/peers_common.py, the method of kernel-ladder bench: the timed runs queued behind a ~10 ms GPU "
           "spin, each run timed on its own between two CUDA events, the median kept (30 runs after 5 warm-up; "
           "softmax 30 after 3, ReLU + dropout 50 after 3), inputs that fit the L2 rotated through sets spanning 4x the L2, "
           "memory-bound rows against a device-to-device copy of the same bytes timed in the same run")


def cudnn_text(v):
    """torch.backends.cudnn.version()'s integer (91900) as "9.19.0"; None stays None."""
    if not v:
        return None
    v = int(v)
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}" if v >= 10000 else f"{v // 1000}.{v // 100 % 10}.{v % 100}"


def driver_version():
    """The NVIDIA driver's version from nvidia-smi, or None where it cannot be asked."""
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        line = p.stdout.strip().splitlines()[0].strip() if p.returncode == 0 and p.stdout.strip() else ""
        return line or None
    except (OSError, subprocess.SubprocessError):
        return None


def versions(triton=None):
    """What ran: device, driver, CUDA (torch's), torch, cuDNN, Triton (when given), the harness. Every peer
    script writes this into its JSON output as "versions", and bench/record_peers.py stamps it into the
    recorded results."""
    t = torch if torch is not None else importlib.import_module("torch")
    return {"device": t.cuda.get_device_name(), "driver": driver_version(), "cuda": t.version.cuda,
            "torch": t.__version__, "cudnn": cudnn_text(t.backends.cudnn.version()),
            "triton": getattr(triton, "__version__", None) if triton is not None else None,
            "harness": HARNESS}


def require(script, modules=("torch",)):
    """Imports `modules` (torch first) or exits 2 with one line naming what is missing; then checks for a
    CUDA device the same way. Returns the imported modules in order."""
    global torch
    loaded = []
    for name in modules:
        try:
            loaded.append(importlib.import_module(name))
        except ImportError as e:
            print(f"{script}: needs the Python package '{name}' ({e}); run it on the GPU machine, whose "
                  f"python3 has torch and triton", file=sys.stderr)
            sys.exit(2)
    torch = loaded[0]
    if not torch.cuda.is_available():
        print(f"{script}: torch {torch.__version__} sees no CUDA device; this script runs on the GPU machine only",
              file=sys.stderr)
        sys.exit(2)
    return loaded


def warmup_ms_from_env():
    """KL_BENCH_WARMUP_MS as `kernel-ladder bench` reads it (bench::warmup_ms_from_env): unset or empty 0, else
    milliseconds in [0, 10000] for which time_ms runs fn before its timed runs; anything else exits 2 with one
    line naming the variable, its value and the range."""
    text = os.environ.get("KL_BENCH_WARMUP_MS", "")
    if not text:
        return 0.0
    try:
        ms = float(text)
    except ValueError:
        ms = -1.0
    if not 0 <= ms <= 10000:
        print(f"KL_BENCH_WARMUP_MS={text} is out of range: allowed [0, 10000] milliseconds", file=sys.stderr)
        sys.exit(2)
    return ms


def time_ms(fn, warmup=5, iters=30):
    """Median of `iters` event-timed runs of fn, queued behind a ~10 ms spin on the GPU (as `kernel-ladder
    bench` does), so the interpreter's launch overhead never falls inside a timed interval. With
    KL_BENCH_WARMUP_MS set, fn first runs for that many milliseconds, as the ladder's bench does."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    warm_ms = warmup_ms_from_env()
    t0 = time.monotonic()
    while (time.monotonic() - t0) * 1e3 < warm_ms:
        for _ in range(4):
            fn()
        torch.cuda.synchronize()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    torch.cuda._sleep(20_000_000)  # 2e7 GPU cycles: ~10 ms at the H200's 1.98 GHz
    for start, end in events:
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()
    return statistics.median(s.elapsed_time(e) for s, e in events)


def cold_sets(bytes_per_set):
    """As `kernel-ladder bench` does: rotate through enough (input, output) sets to span 4x the L2, so a
    shape that fits the cache is not timed from it."""
    l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 60 << 20)
    return max(1, -(-4 * l2 // bytes_per_set))


def per_op_ms(fns, warmup=5, iters=30):
    """Median time of one op, rotating through `fns` (one per buffer set), each run timed on its own."""
    state = {"k": 0}

    def step():
        fns[state["k"]]()
        state["k"] = (state["k"] + 1) % len(fns)
    return time_ms(step, warmup, iters)


def copy_gbs(nbytes, sets=1):
    """Device-to-device copy bandwidth of `nbytes` (read + write), rotating through `sets` pairs; 5 warm-up
    runs and the median of 30, as bench::copy_bandwidth_gbs."""
    pairs = []
    for _ in range(sets):
        src = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(1)
        pairs.append((src, torch.empty_like(src)))
    ms = per_op_ms([lambda s=s, d=d: d.copy_(s) for s, d in pairs])
    return 2.0 * nbytes / (ms * 1e-3) / 1e9
