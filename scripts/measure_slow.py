"""Write tests/durations.tsv, the measured list behind the ``slow`` marker, from a pytest JUnit XML report.

    pytest -n 4 --dist loadgroup -m "not slow" --junitxml=/tmp/t.xml   # or the whole suite
    python scripts/measure_slow.py /tmp/t.xml --over 2.5

Every test case (each parametrization its own row) that took ``--over`` seconds or more, setup and
teardown included, is written with its time; tests/markers.py marks those ``slow``, so ``-m "not slow"``
(the inner loop) keeps to its 3 minutes on two cores as the suite grows. Rows for tests the report does
not hold (not run this time) are kept, so measuring a subset never un-marks the rest.
"""

from __future__ import annotations

import argparse
import xml.etree.ElementTree as ET
from pathlib import Path

DURATIONS = Path(__file__).resolve().parents[1] / "tests" / "durations.tsv"
HEADER = ("# nodeid\tseconds (measured under -n 4 on two cores by scripts/measure_slow.py; "
          "tests/markers.py marks every row slow)\n")


def nodeid(case: ET.Element) -> str:
    """pytest's node id of a JUnit test case: ``classname`` is the module's dotted path (then any class)."""
    parts = case.get("classname", "").split(".")
    for split in range(len(parts), 0, -1):
        path = Path(*parts[:split]).with_suffix(".py")
        if path.is_file():
            return "::".join([path.as_posix(), *parts[split:], case.get("name", "")])
    return "::".join([*parts, case.get("name", "")])


def read(path: Path) -> dict[str, float]:
    if not path.is_file():
        return {}
    rows = (line.split("\t") for line in path.read_text().splitlines() if line and not line.startswith("#"))
    return {test: float(seconds) for test, seconds in rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("report", type=Path, help="pytest's --junitxml file")
    parser.add_argument("--over", type=float, default=2.5,
                        help="seconds from which a test is slow (default 2.5: -m 'not slow' then takes ~3 min)")
    args = parser.parse_args()
    measured = {nodeid(case): float(case.get("time", "0")) for case in ET.parse(args.report).iter("testcase")}
    kept = {test: seconds for test, seconds in read(DURATIONS).items() if test not in measured}
    slow = {**kept, **{test: seconds for test, seconds in measured.items() if seconds >= args.over}}
    DURATIONS.write_text(HEADER + "".join(f"{test}\t{slow[test]:.1f}\n" for test in sorted(slow)))
    fast = sum(seconds for seconds in measured.values() if seconds < args.over)
    print(f"{len(slow)} slow tests in {DURATIONS.name}; the rest of this report adds up to {fast:.0f} s "
          f"(about {fast / 4 / 60:.1f} min on 4 workers)")


if __name__ == "__main__":
    main()
