"""The GPU's clocks and power while a bench runs: nvidia-smi's log of them (`--record`), and one line from that log
(the SM clock's median, 10th percentile and range, the power's median and maximum, and the share of samples with
the power cap among the reasons the clock was held down: 0x4 software power cap, 0x80 hardware power brake). The
fast attention kernels drive an H100 into its 700 W cap (docs/perf-log.md, 2026-12-06), so a bench's figures depend
on the state the GPU was in; this line says which. bench/gpu_session.sh (bench) and bench/ab_builds.sh use both.
    python3 bench/clocks_summary.py --record CLOCKS.csv &   (becomes nvidia-smi, sampling every 100 ms; kill it after)
    python3 bench/clocks_summary.py CLOCKS.csv [LABEL]
Exit code 1 where the file cannot be read or holds no sample (said in one line).
"""
import os
import statistics
import sys

POWER_CAP_BITS = 0x4 | 0x80  # SW power cap, HW power brake slowdown
# What --record asks nvidia-smi for; samples() finds these columns by the names nvidia-smi's header gives them.
QUERY = "timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active"


def record(path):
    """Replaces this process by nvidia-smi writing QUERY's columns to `path` every 100 ms until it is killed; where
    there is no nvidia-smi, that is the file's one line (and the summary then finds no sample)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    try:
        os.execvp("nvidia-smi", ["nvidia-smi", f"--query-gpu={QUERY}", "--format=csv", "-lms", "100"])
    except OSError as e:
        print(f"clocks_summary.py --record: cannot run nvidia-smi ({e.strerror})")
        sys.exit(1)


def samples(lines):
    """(sm_mhz, watts, reasons) of each data line of nvidia-smi's CSV, its columns found by the header's names
    (clocks.current.sm, power.draw, clocks_event_reasons.active or its older name clocks_throttle_reasons.active);
    lines that do not parse are skipped."""
    cols = None
    for line in lines:
        parts = [p.strip() for p in line.split(",")]
        if cols is None:
            names = [p.split(" [")[0] for p in parts]
            try:
                cols = (names.index("clocks.current.sm"), names.index("power.draw"),
                        next(i for i, n in enumerate(names) if n.endswith("_reasons.active")))
            except (ValueError, StopIteration):
                cols = None
            continue
        try:
            yield float(parts[cols[0]].split()[0]), float(parts[cols[1]].split()[0]), int(parts[cols[2]], 16)
        except (ValueError, IndexError):
            continue


def summary(rows, label="clocks"):
    """The one line for the samples `rows` ((sm_mhz, watts, reasons) each)."""
    mhz = sorted(r[0] for r in rows)
    watts = [r[1] for r in rows]
    capped = sum(1 for r in rows if r[2] & POWER_CAP_BITS)
    p10 = mhz[len(mhz) // 10]
    return (f"{label}: {len(rows)} samples, SM clock median {statistics.median(mhz):.0f} MHz (10th percentile "
            f"{p10:.0f}, {mhz[0]:.0f} to {mhz[-1]:.0f}), power median {statistics.median(watts):.0f} W (max "
            f"{max(watts):.0f}), held by the power cap in {100.0 * capped / len(rows):.0f}% of samples")


def main(argv):
    if len(argv) == 3 and argv[1] == "--record":
        record(argv[2])
    if len(argv) not in (2, 3) or argv[1].startswith("--"):
        print("usage: clocks_summary.py --record CLOCKS.csv | clocks_summary.py CLOCKS.csv [LABEL]", file=sys.stderr)
        return 2
    try:
        with open(argv[1]) as f:
            rows = list(samples(f))
    except OSError as e:
        print(f"{argv[1]}: cannot read ({e.strerror})")
        return 1
    if not rows:
        print(f"{argv[1]}: no nvidia-smi sample in it")
        return 1
    print(summary(rows, argv[2] if len(argv) == 3 else "clocks"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
