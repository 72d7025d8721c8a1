#!/usr/bin/env python3
"""inc() and observe() from Python: perfabi.client against prometheus_client
in multiprocess mode, side by side in one run (issue 32, item 6).

Both write shared memory of their own process: perfabi's segment in a
temporary segment directory, prometheus_client's mmap'd files in a
temporary PROMETHEUS_MULTIPROC_DIR. Each case is timed in rounds, the
cases interleaved round by round so both see the same machine load; the
median round is reported, in ns per call, and prometheus_client's over
perfabi's (how many times faster perfabi is).

    python3 reader/python/bench/writer_bench.py [--calls N] [--rounds R]

Needs the perfabi wheel and prometheus_client installed (the test venv's
requirements.txt has both).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from importlib.metadata import version
from typing import Callable


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--calls", type=int, default=200_000, help="calls per round")
    ap.add_argument("--rounds", type=int, default=15, help="rounds per case")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        prom_dir = os.path.join(tmp, "prometheus")
        os.mkdir(prom_dir)
        # prometheus_client picks its multiprocess values at import.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = prom_dir
        import prometheus_client as prom

        from perfabi import client as pf

        pf.configure(directory=os.path.join(tmp, "perfabi"), name="bench")

        p_counter = pf.Counter("bench_requests", "Requests")
        p_child = pf.Counter("bench_by_method", "Requests", ["method"]).labels("GET")
        p_hist = pf.Histogram("bench_latency_seconds", "Latency")
        q_counter = prom.Counter("bench_requests", "Requests")
        q_child = prom.Counter("bench_by_method", "Requests", ["method"]).labels("GET")
        q_hist = prom.Histogram("bench_latency_seconds", "Latency")

        cases: list[tuple[str, Callable[[], object], Callable[[], object]]] = [
            ("Counter.inc()", p_counter.inc, q_counter.inc),
            ("labels(...) child .inc()", p_child.inc, q_child.inc),
            ("Histogram.observe(0.03)", lambda: p_hist.observe(0.03), lambda: q_hist.observe(0.03)),
        ]
        n = args.calls
        rounds: dict[tuple[str, str], list[float]] = {}
        for _ in range(args.rounds):
            for name, p, q in cases:
                for who, f in (("perfabi", p), ("prometheus_client", q)):
                    start = time.perf_counter_ns()
                    for _ in range(n):
                        f()
                    took = time.perf_counter_ns() - start
                    rounds.setdefault((name, who), []).append(took / n)

        print(f"{n} calls x {args.rounds} rounds, median round, ns per call "
              f"(python {sys.version.split()[0]}, prometheus_client {version('prometheus_client')})")
        print(f"{'call':28} {'perfabi':>10} {'prometheus_client mp':>22} {'ratio':>8}")
        for name, _, _ in cases:
            a = statistics.median(rounds[(name, "perfabi")])
            b = statistics.median(rounds[(name, "prometheus_client")])
            print(f"{name:28} {a:10.1f} {b:22.1f} {b / a:7.2f}x")
        # The totals both wrote, as a check that each call counted.
        want = n * args.rounds
        got = pf.segment_path()
        import perfabi

        with perfabi.Segment(got) as seg:
            total = seg.read("bench_requests").values[0].total
        assert total == want, (total, want)
    return 0


if __name__ == "__main__":
    sys.exit(main())
