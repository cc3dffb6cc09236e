"""What ``--resume PATH`` costs: the run's wall time with and without it, and the time of one write of the file.

    OMP_NUM_THREADS=1 flock /tmp/engine.lock python benchmarks/resume_overhead.py [--level quick] [--rounds 3]

Certifies, in-process (``isolation="none"``), the reference decoder on its fast path (``sample`` with the draw
offset: one write per ``sample`` call) and the same decoder on the slow path only (``tests/certification/
resume_decoders.py:slow_path``: one write per call of up to 8,192 requests), on a subset of the matrix, alternating
runs without and with ``--resume`` (a fresh file each time), and prints the median wall time of each, the number of
writes and the median time of one write (``ResumeFile.write``: JSON, temp file, fsync, rename). The counts of both
runs are checked to be the same.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, HERE)

SCENARIOS = ["temperature-1", "eos-in-block", "max-tokens-not-multiple", "greedy", "penalties"]
FACTORIES = {
    "fast path": "specverify.reference:make_decoder",
    "slow path": "tests.certification.resume_decoders:slow_path",
}


def _timed_writes():
    from specverify.certification.execution import store as resume

    spent = []
    write = resume.ResumeFile.write

    def timed(self):
        began = time.perf_counter()
        write(self)
        spent.append(time.perf_counter() - began)

    resume.ResumeFile.write = timed
    return spent


def _run(factory, level, path=None):
    import specverify as sv

    began = time.perf_counter()
    cert = sv.certify(factory, level=level, seed=1, scenarios=SCENARIOS, isolation="none", resume=path)
    return time.perf_counter() - began, [(s.name, s.n, s.statistic) for s in cert.scenarios]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--level", default="quick")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    spent = _timed_writes()
    _run(FACTORIES["fast path"], "quick")  # imports, laws and designs cached: not counted
    print(f"load average {os.getloadavg()[0]:.2f} at start; level {args.level}, {args.rounds} rounds")
    for name, factory in FACTORIES.items():
        plain, resumed, writes = [], [], []
        for _ in range(args.rounds):
            t, key = _run(factory, args.level)
            plain.append(t)
            with tempfile.TemporaryDirectory() as folder:
                spent.clear()
                t, again = _run(factory, args.level, os.path.join(folder, "run.json"))
                resumed.append(t)
                writes.append(list(spent))
            assert again == key, f"{name}: --resume changed the counts"
        per = statistics.median(w for ws in writes for w in ws)
        print(
            f"{name}: without {statistics.median(plain):.2f} s, with --resume {statistics.median(resumed):.2f} s "
            f"({statistics.median(resumed) / statistics.median(plain):.3f}x); {len(writes[0])} writes per run, "
            f"{per * 1e3:.2f} ms per write (median), {sum(writes[0]) * 1e3:.0f} ms in all"
        )
    print(f"load average {os.getloadavg()[0]:.2f} at end")


if __name__ == "__main__":
    main()
