"""One atomic and one deterministic backward call per shape between cudaProfilerStart and Stop, for Nsight Compute
(docs/perf-log.md, the sixteenth session). From the repository root on the GPU machine, after building kl_ladder_c:
  ncu --profile-from-start off --clock-control none --cache-control none --metrics gpu__time_duration.sum --csv \
      python3 docs/perf/diagnostics/ncu-backward-launches.py 'B=2 H=16 L=8192 d=128 causal,B=2 H=16 L=8192 d=128 non-causal'
Each part names a row of bench/torch_flash.py's shapes by its beginning."""
import sys
sys.path.insert(0, "bench")
import interleaved_flash as ifl
import torch
import torch_flash as tf
lib = ifl.load_ladder("build-cuda/libkl_ladder_c.so")
want = sys.argv[1].split(",")
for s in tf.shapes(False):
    if s["Hkv"] or not any(w == tf.shape_text(s)[:len(w)] or (" " + w + " ") in (" " + tf.shape_text(s) + " ") for w in want):
        continue
    print("SHAPE", tf.shape_text(s), flush=True)
    B, H, L, d = s["B"], s["H"], s["L"], s["d"]
    q, k, v, do = (torch.randn(B, H, L, d, device="cuda", dtype=torch.bfloat16) for _ in range(4))
    sides, kernel = ifl.ladder_backward_sides(lib, s, torch, q, k, v, do)
    for name in ("ladder", "ladder_det"):
        f = sides[name]
        for _ in range(3):
            f()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStart()
        f()
        torch.cuda.synchronize()
        torch.cuda.cudart().cudaProfilerStop()
