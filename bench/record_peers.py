#!/usr/bin/env python3
"""Builds the recorded results, docs/perf/h200.json, from one GPU session's outputs: the ladder's figure
and every peer's figure for each shape, from the same run, stamped with the date and the versions
(device, driver, CUDA, torch, cuDNN, Triton) and the harness (bench/peers_common.py's method). The peers
table of docs/fast-kernels.md and the Measure view's "Peers (recorded)" section are generated from that file
(kernels/measure/peers.h); a test fails when that table differs from it.

Inputs (each one optional; a section is written where its inputs are given):
  --bench FILE      `kernel-ladder bench --backend cuda --json FILE` (all kernels): the ladder's rows
  --flash FILE      `bench/torch_flash.py --ladder-json BENCH --out FILE`: PyTorch SDPA forward, flash and cuDNN
  --backward FILE   `bench/torch_flash_backward.py --ladder-json BENCH --out FILE`: their backward
  --triton FILE     `bench/triton_peers.py --json FILE`: Triton's and torch's vector add, ReLU + dropout, softmax
  --interleaved FILE           `bench/interleaved_flash.py --lib ... --out FILE`: the forward's ladder, PyTorch
                               flash and cuDNN timed in turn in one process (instead of --flash; no --bench needed)
  --interleaved-backward FILE  the same with --backward (instead of --backward)

Sections written:
  flash-forward   TFLOP/s, the ladder's `fast` against PyTorch flash and cuDNN (--bench and --flash)
  flash-backward  TFLOP/s, the ladder's fast backward (dQ by atomics; the deterministic mode beside it)
                  against PyTorch flash and cuDNN backward (--bench and --backward), at the head dimensions
                  the ladder's backward was benched at
  A shape the ladder has no figure for (a row its bench did not print) is kept, its value null ("-").
  From --interleaved / --interleaved-backward each row's figures are that script's, all sides of a shape timed
  back to back in the same clock state (bench/gpu_session.sh bench records these); a side it has no figure for
  (a refusal) is null.
  memory          of copy (GB/s over a device-to-device copy of the same bytes, same run), vector add
                  fast, ReLU + dropout fused and softmax fixed against Triton and torch (--bench and --triton);
                  the three transposes (rung 1½) with no peer

Usage (on the GPU machine, after the session's bench step; bench/gpu_session.sh bench runs it):
  python3 bench/record_peers.py --bench bench.json --interleaved interleaved.json \\
      --interleaved-backward interleaved-backward.json --triton triton.json --out docs/perf/h200.json [--date YYYY-MM-DD]
  (or --flash flash.json --backward backward.json: the ladder's figures from the bench, the peers' from a later process)
Then `cmake --build --preset default --target readme-peers-table` rewrites the peers table of docs/fast-kernels.md from it.
Exit code 2 with one line for a missing or malformed input.
"""
import argparse
import datetime
import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers_common import HARNESS  # noqa: E402  (no torch needed here: only the harness's sentence)

ABOUT = ("The ladder's figures beside its peers', each section's from one run (see \"source\" and each section's "
         "\"run\"). The peers table of docs/fast-kernels.md and the Measure view's 'Peers (recorded)' are generated from this file; "
         "bench/record_peers.py writes it from a GPU session's outputs.")
FORWARD_RE = re.compile(r"(?:Hkv=(\d+)\s+)?L=(\d+)\s+d=(\d+)\s+(non-causal|causal)")
BACKWARD_RE = re.compile(r"L=(\d+)\s+d=(\d+)\s+(non-causal|causal).*dq=(atomic|deterministic)")


class Refused(Exception):
    pass


def load(path, what):
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise Refused(f"{what} {path}: cannot read ({e.strerror})")
    except json.JSONDecodeError as e:
        raise Refused(f"{what} {path}: not JSON ({e})")


def rows_of(doc, what, path):
    """The row list of a peer script's output: {"rows": [...]} (current) or a bare list (older --out)."""
    rows = doc.get("rows") if isinstance(doc, dict) else doc
    if not isinstance(rows, list):
        raise Refused(f"{what} {path}: expected a list of rows or an object with \"rows\"")
    return rows


def rounded(x, digits):
    return None if x is None else round(float(x), digits)


def forward_key(shape):
    m = FORWARD_RE.search(shape)
    return (int(m.group(2)), int(m.group(3)), m.group(4) == "causal", int(m.group(1)) if m.group(1) else None) if m else None


def ladder_forward(bench):
    out = {}
    for r in bench.get("rows", []):
        if r.get("kernel") == "flash-attention" and r.get("variant") == "fast" and r.get("tflops"):
            k = forward_key(str(r.get("shape", "")))
            if k:
                out[k] = r["tflops"]
    return out


def ladder_backward(bench):
    out = {}
    for r in bench.get("rows", []):
        if r.get("kernel") == "flash-attention-backward" and r.get("variant") == "fast" and r.get("tflops"):
            m = BACKWARD_RE.search(str(r.get("shape", "")))
            if m:
                out[(int(m.group(1)), int(m.group(2)), m.group(3) == "causal", m.group(4))] = r["tflops"]
    return out


def kernels_named(bench, kernel):
    """The fast kernels the bench rows of `kernel` name at their shape's end ("... bf16 wgmma"), in row order."""
    names = []
    for r in bench.get("rows", []):
        if r.get("kernel") == kernel and r.get("variant") == "fast":
            last = str(r.get("shape", "")).split()[-1:]
            if last and not last[0].startswith(("dq=", "bf16", "causal", "non-causal")) and last[0] not in names:
                names.append(last[0])
    return ", ".join(names) if names else "fast"


SDPA_COLUMNS = [{"id": "flash", "name": "PyTorch flash", "short": "flash"},
                {"id": "cudnn", "name": "cuDNN", "short": "cuDNN"}]


def forward_section(bench, peers, run):
    ladder = ladder_forward(bench)
    rows = []
    for p in peers:
        key = (p["L"], p["d"], p["causal"], p.get("Hkv"))
        rows.append({"shape": p["shape"], "values": [rounded(ladder.get(key), 1), rounded(p.get("flash_tflops"), 1),
                                                     rounded(p.get("cudnn_tflops"), 1)]})
    return {"id": "flash-forward", "title": f"FlashAttention forward (fast: {kernels_named(bench, 'flash-attention')}) "
                                           "against PyTorch SDPA", "unit": "TFLOP/s",
            "value_digits": 1, "ratio_digits": 2,
            "note": "bf16, B·L = 16384, H·d = 2048 (grouped-query rows: Hq = 16 over Hkv = 2, enable_gqa); "
                    "4 B H L^2 d FLOP, halved for causal",
            "run": run,
            "columns": [{"id": "ladder", "name": "ladder", "short": "ladder", "ours": True}] + SDPA_COLUMNS,
            "rows": rows}


def backward_section(bench, peers, run):
    ladder = ladder_backward(bench)
    head_dims = {k[1] for k in ladder}  # the head dims the bench ran (d = 256 on the wgmma paths only)
    rows = []
    for p in peers:
        if head_dims and p["d"] not in head_dims:
            continue
        key = (p["L"], p["d"], p["causal"])
        det = ladder.get(key + ("deterministic",))  # at d = 256 the default too: one row, both modes' launches
        rows.append({"shape": p["shape"], "values": [rounded(ladder.get(key + ("atomic",), det), 1), rounded(det, 1),
                                                     rounded(p.get("flash_tflops"), 1), rounded(p.get("cudnn_tflops"), 1)]})
    return {"id": "flash-backward",
            "title": f"FlashAttention backward (fast: {kernels_named(bench, 'flash-attention-backward')}) against "
                     "PyTorch SDPA's backward",
            "unit": "TFLOP/s", "value_digits": 1, "ratio_digits": 2,
            "note": "bf16, B·L = 16384, H·d = 2048; 2.5 x the forward's FLOP; ladder: the default, dQ by fp32 "
                    "atomics (at d = 256 by its own pass, and from L = 512 to 2047 by det's ordered adds: there the "
                    "same launches as det, bitwise repeatable), "
                    "det: --set deterministic=1",
            "run": run,
            "columns": [{"id": "ladder", "name": "ladder", "short": "ladder", "ours": True},
                        {"id": "det", "name": "ladder det", "short": "det", "ours": True}] + SDPA_COLUMNS,
            "rows": rows}


INTERLEAVED_RUN = ("python3 bench/interleaved_flash.py --lib build-cuda/libkl_ladder_c.so{}: the ladder, PyTorch flash "
                   "and cuDNN timed in turn, shape by shape, in one process")


def interleaved_rows(doc, what, path, backward):
    """The rows of bench/interleaved_flash.py's --out, checked to be the forward's (backward=False) or the backward's."""
    rows = rows_of(doc, what, path)
    is_backward = doc.get("backward", any("ladder_det_ms" in r for r in rows)) if isinstance(doc, dict) else False
    if is_backward != backward:
        raise Refused(f"{what} {path}: expected interleaved_flash.py's output {'with' if backward else 'without'} "
                      "--backward")
    if any("ladder_tflops" not in r and "error" not in r for r in rows):
        raise Refused(f"{what} {path}: a row without the ladder's figure (a --paths run? record the default's)")
    return rows


def kernels_of(rows):
    """The kernels interleaved_flash.py's rows name, each once, in row order ("fast" where none does)."""
    return ", ".join(dict.fromkeys(r["kernel"] for r in rows if r.get("kernel"))) or "fast"


def forward_interleaved(rows, run):
    """The flash-forward section with forward_section's columns and note, its rows from the runs in turn."""
    sec = forward_section({"rows": []}, [], run)
    sec["title"] = f"FlashAttention forward (fast: {kernels_of(rows)}) against PyTorch SDPA"
    sec["rows"] = [{"shape": r["shape"], "values": [rounded(r.get(k), 1) for k in
                                                    ("ladder_tflops", "flash_tflops", "cudnn_tflops")]} for r in rows]
    return sec


def backward_interleaved(rows, run):
    """The flash-backward section with backward_section's columns and note, its rows from the runs in turn."""
    sec = backward_section({"rows": []}, [], run)
    sec["title"] = f"FlashAttention backward (fast: {kernels_of(rows)}) against PyTorch SDPA's backward"
    # At d = 256 both modes run the same launches (the dQ pass): one figure, in both columns.
    sec["rows"] = [{"shape": r["shape"], "values": [rounded(r.get("ladder_tflops"), 1),
                                                    rounded(r.get("ladder_det_tflops", r.get("ladder_tflops")), 1),
                                                    rounded(r.get("flash_tflops"), 1), rounded(r.get("cudnn_tflops"), 1)]}
                   for r in rows]
    return sec


MEMORY = [  # (bench kernel, bench variant, triton_peers op, name in the table)
    ("vector-add", "fast", "vector-add", "vector add fast"),
    ("relu-dropout", "fused", "relu-dropout", "ReLU + dropout fused"),
    ("softmax", "fixed", "softmax", "softmax fixed"),
    # rung 1½, no peer (op None): what the transpose study shows on the CPU as the recorded figures
    ("transpose", "naive", None, "transpose naive"),
    ("transpose", "tiled", None, "transpose tiled"),
    ("transpose", "padded", None, "transpose padded"),
]


def peer_shape(shape):
    """The ladder's shape text as triton_peers.py writes it: "n=2^26 fp32" -> "n=2^26", "4096x1024 fp32" ->
    "4096x1024", "n=67108864 p=0.5" -> "n=2^26 p=0.5"."""
    s = shape.replace(" fp32", "")
    m = re.fullmatch(r"n=(\d+)(\s.*)?", s)
    if m and int(m.group(1)) > 0 and int(m.group(1)) & (int(m.group(1)) - 1) == 0:
        s = f"n=2^{int(m.group(1)).bit_length() - 1}{m.group(2) or ''}"
    return s


def memory_section(bench, triton, run):
    peers = [p for p in triton.get("peers", []) if "ratio" in p]
    rows = []
    for kernel, variant, op, name in MEMORY:
        for r in bench.get("rows", []):
            if r.get("kernel") != kernel or r.get("variant") != variant or not r.get("ratio"):
                continue
            shape = peer_shape(str(r["shape"]))
            mine = [p for p in peers if p["op"] == op and p["shape"] == shape]
            best = {}
            for who in ("triton", "torch"):  # the better row of each peer (Triton softmax: two num_warps)
                cands = [p for p in mine if p["impl"].startswith(who)]
                best[who] = max(cands, key=lambda p: p["ratio"]) if cands else None
            rows.append({"name": name, "shape": shape,
                         "values": [rounded(r["ratio"], 3)] + [rounded(best[w]["ratio"], 3) if best[w] else None
                                                              for w in ("triton", "torch")],
                         "gbs": [rounded(r.get("gbs"), 1)] + [rounded(best[w]["gbs"], 1) if best[w] else None
                                                             for w in ("triton", "torch")]})
    return {"id": "memory", "title": "Memory-bound kernels against Triton and torch", "unit": "of copy",
            "value_digits": 3, "ratio_digits": 3,
            "note": "GB/s over a device-to-device copy of the same bytes timed in the same run; Triton: the "
                    "write-up's kernels at BLOCK_SIZE 1024 (softmax: the better of Triton's default num_warps and "
                    "the tutorial's); torch: torch.add, relu then F.dropout, torch.softmax",
            "run": run,
            "columns": [{"id": "ladder", "name": "ladder", "short": "ladder", "ours": True},
                        {"id": "triton", "name": "Triton", "short": "Triton"},
                        {"id": "torch", "name": "torch", "short": "torch"}],
            "rows": rows}


def versions_of(*docs):
    """The first non-empty value of each version field among the inputs' "versions" objects."""
    v = {}
    for d in docs:
        got = d.get("versions") if isinstance(d, dict) else None
        if isinstance(got, dict):
            for k, x in got.items():
                if x and not v.get(k):
                    v[k] = x
        if isinstance(d, dict) and d.get("triton_version") and not v.get("triton"):
            v["triton"] = d["triton_version"]
        if isinstance(d, dict) and d.get("device") and not v.get("device") and d.get("backend", "cuda") == "cuda":
            v["device"] = d["device"]
    return v


def build(args):
    bench = load(args.bench, "--bench") if args.bench else None
    if bench is not None and (not isinstance(bench, dict) or not isinstance(bench.get("rows"), list)):
        raise Refused(f"--bench {args.bench}: expected `kernel-ladder bench --json` output (an object with \"rows\")")
    if bench is not None and bench.get("backend") not in (None, "cuda"):
        raise Refused(f"--bench {args.bench}: backend={bench.get('backend')} is out of range: allowed cuda "
                      "(the recorded results are GPU figures)")
    docs, sections = [bench or {}], []
    for opt, what in (("flash", "--flash"), ("backward", "--backward"), ("triton", "--triton")):
        path = getattr(args, opt)
        if path and bench is None:
            raise Refused(f"{what} {path}: needs --bench (the ladder's figures from the same run)")
    for a, b in (("flash", "interleaved"), ("backward", "interleaved_backward")):
        if getattr(args, a) and getattr(args, b):
            raise Refused(f"--{a} and --{b.replace('_', '-')}: give one of them (both write the same section)")
    quick = bool(bench.get("quick")) if bench is not None else False
    if args.interleaved:
        doc = load(args.interleaved, "--interleaved")
        docs.append(doc)
        sections.append(forward_interleaved(interleaved_rows(doc, "--interleaved", args.interleaved, False),
                                            INTERLEAVED_RUN.format("")))
        quick = quick or bool(doc.get("quick"))
    if args.flash:
        doc = load(args.flash, "--flash")
        docs.append(doc)
        sections.append(forward_section(bench, rows_of(doc, "--flash", args.flash),
                                        "kernel-ladder bench --backend cuda --json; python3 bench/torch_flash.py "
                                        "--ladder-json"))
    if args.backward:
        doc = load(args.backward, "--backward")
        docs.append(doc)
        sections.append(backward_section(bench, rows_of(doc, "--backward", args.backward),
                                         "kernel-ladder bench --backend cuda --json; python3 "
                                         "bench/torch_flash_backward.py --ladder-json"))
    if args.interleaved_backward:
        doc = load(args.interleaved_backward, "--interleaved-backward")
        docs.append(doc)
        sections.append(backward_interleaved(interleaved_rows(doc, "--interleaved-backward", args.interleaved_backward,
                                                              True), INTERLEAVED_RUN.format(" --backward")))
        quick = quick or bool(doc.get("quick"))
    if args.triton:
        doc = load(args.triton, "--triton")
        if not isinstance(doc, dict) or not isinstance(doc.get("peers"), list):
            raise Refused(f"--triton {args.triton}: expected bench/triton_peers.py's JSON (an object with \"peers\")")
        docs.append(doc)
        sections.append(memory_section(bench, doc, "kernel-ladder bench --backend cuda --json; python3 "
                                                   "bench/triton_peers.py --json"))
    if not sections:
        raise Refused("no section to write: give --bench with at least one of --flash, --backward, --triton, or "
                      "--interleaved / --interleaved-backward")
    v = versions_of(*docs)
    return {"schema": 1, "about": ABOUT,
            "date": args.date or datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d"),
            "device": v.get("device"), "driver": v.get("driver"), "cuda": v.get("cuda"), "torch": v.get("torch"),
            "cudnn": v.get("cudnn"), "triton": v.get("triton"), "harness": v.get("harness") or HARNESS,
            "source": "one GPU session (bench/gpu_session.sh bench): every section from the same session",
            "quick": quick, "sections": sections}


def dump(doc):
    """The file's text: one key per line, each table row on a line of its own (diffs read row by row)."""
    lines = ["{"]
    keys = list(doc)
    for i, k in enumerate(keys):
        comma = "," if i + 1 < len(keys) else ""
        if k != "sections":
            lines.append(f" {json.dumps(k)}: {json.dumps(doc[k])}{comma}")
            continue
        lines.append(' "sections": [')
        for j, sec in enumerate(doc[k]):
            lines.append("  {")
            skeys = list(sec)
            for m, sk in enumerate(skeys):
                sc = "," if m + 1 < len(skeys) else ""
                if sk in ("rows", "columns"):
                    lines.append(f"   {json.dumps(sk)}: [")
                    items = sec[sk]
                    lines += [f"    {json.dumps(x)}" + ("," if n + 1 < len(items) else "") for n, x in enumerate(items)]
                    lines.append(f"   ]{sc}")
                else:
                    lines.append(f"   {json.dumps(sk)}: {json.dumps(sec[sk])}{sc}")
            lines.append("  }" + ("," if j + 1 < len(doc[k]) else ""))
        lines.append(f" ]{comma}")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bench", help="the ladder's `bench --json` output")
    ap.add_argument("--flash", help="bench/torch_flash.py --out")
    ap.add_argument("--backward", help="bench/torch_flash_backward.py --out")
    ap.add_argument("--triton", help="bench/triton_peers.py --json")
    ap.add_argument("--interleaved", help="bench/interleaved_flash.py --out (the forward; instead of --flash)")
    ap.add_argument("--interleaved-backward", help="bench/interleaved_flash.py --backward --out (instead of --backward)")
    ap.add_argument("--date", help="the session's date, YYYY-MM-DD (default: today, UTC)")
    ap.add_argument("--out", required=True, help="the recorded results to write (docs/perf/h200.json)")
    args = ap.parse_args()
    if args.date and not re.fullmatch(r"\d{4}-\d{2}-\d{2}", args.date):
        print(f"record_peers.py: --date={args.date} is out of range: allowed YYYY-MM-DD", file=sys.stderr)
        return 2
    try:
        doc = build(args)
    except Refused as e:
        print(f"record_peers.py: {e}", file=sys.stderr)
        return 2
    except (KeyError, TypeError, ValueError) as e:
        print(f"record_peers.py: an input lacks a field the peer scripts write ({type(e).__name__}: {e})",
              file=sys.stderr)
        return 2
    with open(args.out, "w") as f:
        f.write(dump(doc))
    n = sum(len(s["rows"]) for s in doc["sections"])
    print(f"wrote {args.out}: {len(doc['sections'])} sections, {n} rows, {doc['device']}, {doc['date']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
