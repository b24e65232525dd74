"""The atomic and the deterministic backward twice per shape, a second apart so that the GPU runs cool, each timed by
CUDA events (docs/perf-log.md, the sixteenth session). With bwd-ordered-phases.patch applied and KL_PHASES=1, the
ordered kernel also prints its consumers' cycles per step by phase and its CTAs' start and end spread. From the
repository root on the GPU machine, after building kl_ladder_c:
  KL_PHASES=1 python3 docs/perf/diagnostics/ordered-phases-drive.py 'B=2 H=16 L=8192 d=128 causal,B=2 H=16 L=8192 d=128 non-causal'"""
import sys, time
sys.path.insert(0, "bench")
import interleaved_flash as ifl
import torch
import torch_flash as tf
lib = ifl.load_ladder("build-cuda/libkl_ladder_c.so")
want = sys.argv[1].split(",")
for w in want:
    for s in tf.shapes(False):
        if s["Hkv"] or tf.shape_text(s)[:len(w)] != w:
            continue
        B, H, L, d = s["B"], s["H"], s["L"], s["d"]
        q, k, v, do = (torch.randn(B, H, L, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
        sides, kernel = ifl.ladder_backward_sides(lib, s, torch, q, k, v, do)
        for rep in range(2):
            time.sleep(1.0)
            for name in ("ladder", "ladder_det"):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                torch.cuda.synchronize(); e0.record(); sides[name](); e1.record(); torch.cuda.synchronize()
                print(f"EV {tf.shape_text(s)} rep {rep} {name} {e0.elapsed_time(e1):.3f} ms", flush=True)
