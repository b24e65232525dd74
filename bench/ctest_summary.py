"""One line for a ctest run made of several ctest calls (bench/gpu_session.sh test): the passed, failed and
skipped counts over every JUnit file given (ctest --output-junit), then the failures by name and the ten
slowest tests with their times.
    python3 bench/ctest_summary.py JUNIT.xml [JUNIT.xml ...]
Exit code 1 where a test failed or a file is missing or unreadable (that is said too).
"""
import sys
import xml.etree.ElementTree as ET


def cases(path):
    """(name, status, seconds) of each test case in one ctest JUnit file."""
    root = ET.parse(path).getroot()
    for c in root.iter("testcase"):
        yield c.get("name"), c.get("status"), float(c.get("time") or 0)


def main(paths):
    rows, unread = [], []
    for p in paths:
        try:
            rows.extend(cases(p))
        except (OSError, ET.ParseError) as e:
            unread.append(f"{p}: {e}")
    passed = sum(1 for _, s, _ in rows if s == "run")
    failed = [n for n, s, _ in rows if s == "fail"]
    skipped = sum(1 for _, s, _ in rows if s in ("notrun", "disabled"))
    print(f"ctest: {passed} passed, {len(failed)} failed, {skipped} skipped of {len(rows)} "
          f"({len(paths) - len(unread)} of {len(paths)} runs read; {sum(t for *_, t in rows):.0f} s of test time)")
    for line in unread:
        print(f"ctest: not read: {line}")
    for n in failed:
        print(f"ctest: FAILED {n}")
    slowest = sorted(rows, key=lambda r: -r[2])[:10]
    print("ctest: slowest: " + "; ".join(f"{n} {t:.1f} s" for n, _, t in slowest))
    return 1 if failed or unread else 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print("usage: ctest_summary.py JUNIT.xml [JUNIT.xml ...]", file=sys.stderr)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
