#!/usr/bin/env python3
"""One scrape of 1,000 writers x 20 families: perfabi's directory reader
against prometheus_client's multiprocess collector, side by side in one
run (issue 32, item 6).

    python3 reader/benches/dir_scrape.py [--writers N] [--rounds R]

Both sides hold the same metrics in /dev/shm: N writers (default 1,000)
of 20 families each, 14 counters, 4 gauges (live writers summed:
perfabi's gauge mode `sum`, prometheus_client's `livesum`) and 2
histograms of 15 buckets (prometheus_client's default bounds).

* perfabi: `reader/examples/dir_scrape_cost.rs` (built here with cargo)
  writes N segments with the real writer and times `Directory::read` of
  them, a directory kept open (20 reads; the median is its figure).
* prometheus_client: the files N processes write in multiprocess mode,
  made in this process by giving each writer its own process identifier
  (the very files a process of that pid writes: one per metric type and
  pid), then timed as its documentation scrapes them: a new
  `CollectorRegistry`, `MultiProcessCollector(registry)`,
  `generate_latest(registry)`; and the collector's merge alone
  (`MultiProcessCollector.collect()`, no text).

Rounds alternate the two sides (so both see the same machine load); the
medians are printed, and prometheus_client's over perfabi's (how many
times faster perfabi is). Wall-clock times: run it on a machine as quiet
as you can, the ratio is the figure.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

# prometheus_client's default histogram bounds (seconds); perfabi's side
# uses the same bounds in ms (BOUNDS in dir_scrape_cost.rs).
BOUNDS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0)


def build_example() -> str:
    """Builds dir_scrape_cost and returns its path."""
    out = subprocess.run(
        ["cargo", "build", "--release", "-p", "perfabi-reader", "--example", "dir_scrape_cost",
         "--message-format", "json"],
        capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    for line in out.stdout.splitlines():
        msg = json.loads(line)
        if msg.get("reason") == "compiler-artifact" and msg["target"]["name"] == "dir_scrape_cost":
            return msg["executable"]
    sys.exit("dir_scrape_cost: no executable in cargo's output")


def perfabi_round(exe: str, writers: int) -> float:
    """The median ms of one run's later reads."""
    out = subprocess.run([exe, str(writers)], capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(out.stderr)
    m = re.search(r"later reads median ([0-9.]+) ms", out.stdout)
    if not m:
        sys.exit(f"dir_scrape_cost printed no median: {out.stdout}")
    return float(m.group(1))


def write_prometheus_files(prom, values, writers: int) -> None:
    """The files `writers` processes write: 20 families each, one series
    per family, values as perfabi's side writes them."""
    for pid in range(1, writers + 1):
        values.ValueClass = values.MultiProcessValue(process_identifier=lambda pid=pid: pid)
        for k in range(20):
            name = f"app_metric_{k}"
            if k % 10 in (7, 8):
                g = prom.Gauge(name, "A gauge", registry=None, multiprocess_mode="livesum")
                g.set(k)
            elif k % 10 == 9:
                h = prom.Histogram(name, "A histogram", registry=None, buckets=BOUNDS)
                h.observe(k * 0.1)
            else:
                c = prom.Counter(name, "A counter", registry=None)
                c.inc(k + 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writers", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5, help="rounds per side")
    args = ap.parse_args()
    exe = build_example()

    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="perfabi-dir-scrape.") as tmp:
        # prometheus_client picks its multiprocess values at import.
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tmp
        import prometheus_client as prom
        from prometheus_client import multiprocess, values

        write_prometheus_files(prom, values, args.writers)
        files = len(os.listdir(tmp))

        def scrape() -> bytes:
            registry = prom.CollectorRegistry()
            multiprocess.MultiProcessCollector(registry, path=tmp)
            return prom.generate_latest(registry)

        text = scrape().decode()
        # What is timed is right: every writer's counter 0 added 1, every
        # live gauge 7 is 7.
        for want in (f"app_metric_0_total {float(args.writers)}", f"app_metric_7 {7.0 * args.writers}"):
            if want not in text:
                sys.exit(f"prometheus_client's scrape lacks {want!r}")

        pf, pc, pm = [], [], []
        for _ in range(args.rounds):
            pf.append(perfabi_round(exe, args.writers))
            t = time.perf_counter()
            scrape()
            pc.append((time.perf_counter() - t) * 1e3)
            collector = multiprocess.MultiProcessCollector(None, path=tmp)
            t = time.perf_counter()
            list(collector.collect())
            pm.append((time.perf_counter() - t) * 1e3)

    f, c, m = statistics.median(pf), statistics.median(pc), statistics.median(pm)
    print(f"{args.writers} writers x 20 families (14 counters, 4 gauges, 2 histograms), "
          f"median of {args.rounds} rounds, load average {os.getloadavg()[0]:.2f}:")
    print(f"  perfabi Directory::read (kept open)                 {f:9.2f} ms")
    print(f"  prometheus_client collector + generate_latest       {c:9.2f} ms  ({c / f:.1f}x perfabi)"
          f"  [{files} files]")
    print(f"  prometheus_client MultiProcessCollector.collect()   {m:9.2f} ms  ({m / f:.1f}x perfabi)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
