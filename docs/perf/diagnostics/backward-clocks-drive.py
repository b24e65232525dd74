"""The backward's sides (atomic, deterministic, cuDNN) each run back to back for a few seconds, one after another with
a rest between, while nvidia-smi samples the SM clock, the power draw and the throttle reasons every 50 ms: whether a
side's time per call goes with a lower clock (power-bound) or not (docs/perf-log.md, the seventeenth session). From the
repository root on the GPU machine, after building kl_ladder_c:
  python3 docs/perf/diagnostics/backward-clocks-drive.py 'B=2 H=16 L=8192 d=128 causal,B=2 H=16 L=8192 d=128 non-causal'"""
import csv, io, statistics, subprocess, sys, time
sys.path.insert(0, "bench")
import interleaved_flash as ifl
import torch
import torch_flash as tf
import torch_flash_backward as tfb
from torch.nn.attention import SDPBackend

RUN_S, REST_S = 2.5, 1.5
lib = ifl.load_ladder("build-cuda/libkl_ladder_c.so")


def sampled(fn):
    """Calls fn back to back for RUN_S seconds under nvidia-smi; (ms per call, median SM MHz, median W, reasons)."""
    smi = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active",
                            "--format=csv,noheader,nounits", "-lms", "50"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    torch.cuda.synchronize()
    n, t0 = 0, time.time()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    e0.record()
    while time.time() - t0 < RUN_S:
        for _ in range(4):
            fn()
        n += 4
        torch.cuda.synchronize()
    e1.record()
    torch.cuda.synchronize()
    smi.terminate()
    out = smi.communicate()[0]
    rows = [r for r in csv.reader(io.StringIO(out)) if len(r) == 3]
    rows = rows[len(rows) // 5:]  # the first fifth: the ramp
    mhz = statistics.median(float(r[0]) for r in rows)
    watt = statistics.median(float(r[1]) for r in rows)
    reasons = sorted({r[2].strip() for r in rows})
    return e0.elapsed_time(e1) / n, mhz, watt, reasons


for w in sys.argv[1].split(","):
    for s in tf.shapes(False):
        if s["Hkv"] or tf.shape_text(s)[:len(w)] != w:
            continue
        cudnn_fn, (q, k, v, dout) = tfb.sdpa_backward_call(s, SDPBackend.CUDNN_ATTENTION)
        sides, kernel = ifl.ladder_backward_sides(lib, s, torch, q.detach(), k.detach(), v.detach(), dout.contiguous())
        sides["cudnn"] = ifl.in_backend(SDPBackend.CUDNN_ATTENTION, cudnn_fn)
        for rep in range(2):
            for name in ("ladder", "ladder_det", "cudnn"):
                time.sleep(REST_S)
                ms, mhz, watt, reasons = sampled(sides[name])
                print(f"CLK {tf.shape_text(s)} rep {rep} {name:10} {ms:7.3f} ms/call  SM {mhz:6.0f} MHz  "
                      f"{watt:6.1f} W  Mcycles/call {ms * mhz / 1000:7.3f}  throttle {' '.join(reasons)}", flush=True)
