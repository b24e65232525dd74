"""Reading the ladder's `kernel-ladder bench --json` output ({backend, device, quick, rows: [{kernel, variant,
shape, ms, gbs, tflops, ratio, baseline}]}, app/cli/bench.cpp), shared by the bench scripts that need torch
(bench/torch_flash.py, bench/torch_flash_backward.py) and those that do not (bench/fwd_paths_table.py).
Nothing here imports torch.
"""
import json
import re

# The start of a fast attention row's shape (kernels/rungs/flash_attention_fast.h, fast_bench_shape_text):
# "B=.. H=.. [Hkv=..] L=.. d=.. causal|non-causal".
SHAPE_RE = re.compile(r"(?:Hkv=(\d+)\s+)?L=(\d+)\s+d=(\d+)\s+(non-causal|causal)")


def shape_key(m):
    """(L, d, causal, Hkv or None) from a SHAPE_RE match (or a pattern that starts with SHAPE_RE's groups)."""
    return (int(m.group(2)), int(m.group(3)), m.group(4) == "causal", int(m.group(1)) if m.group(1) else None)


def walk_rows(path, accept):
    """Every dict of the ladder's `bench --json` file at `path` (any nesting) for which accept(row) holds."""
    with open(path) as f:
        doc = json.load(f)
    found = []

    def walk(x):
        if isinstance(x, dict):
            if accept(x):
                found.append(x)
            for v in x.values():
                walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)

    walk(doc)
    return found
