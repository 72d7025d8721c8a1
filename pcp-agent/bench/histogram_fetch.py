"""One PMAPI client fetching, side by side, one histogram metric of each
of two agents under one pmcd: the disk-latency histogram through
pmdaperfabi and through pmdabpf (bench/pmdabpf-vs-perfabi). Fetches
alternate between the sides in blocks of 50, so that drift in the
machine's load hits both alike; over each block, the CPU time of pmcd and
of each agent process (the first field of each thread's schedstat: ns on
the CPU, what utime + stime count in 10 ms ticks; fetch.py's cpu_seconds)
and of this client is added to that side's account. utime + stime from
/proc/PID/stat are added up the same way, as a check of the same figure
at the kernel's tick resolution.

Usage: python3 histogram_fetch.py HOST FETCHES pmcd=PID,perfabi=PID,pmdabpf=PID \\
           PERFABI_METRIC PMDABPF_METRIC
Prints one JSON object: per side its fetches, median and p90 latency (µs),
values per fetch (the instances the metric has), fetches that came back
without values, and CPU µs per fetch of each process.
"""
import json
import os
import sys
import time

from pcp import pmapi
import cpmapi as api

# fetch.py imported without leaving __pycache__ in the work tree (tests/run
# checks that the suite leaves it as it found it).
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from fetch import cpu_seconds  # noqa: E402  (one home of the schedstat reading)

TICK = os.sysconf("SC_CLK_TCK")


def ticks_seconds(pid):
    """utime + stime of process PID (all its threads), in seconds."""
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main():
    host, n = sys.argv[1], int(sys.argv[2])
    pids = {k: int(v) for k, v in (kv.split("=") for kv in sys.argv[3].split(","))}
    sides = {"perfabi": sys.argv[4], "pmdabpf": sys.argv[5]}
    ctx = pmapi.pmContext(api.PM_CONTEXT_HOST, host)
    try:
        pmids = {side: ctx.pmLookupName([name]) for side, name in sides.items()}
    except pmapi.pmErr as e:
        sys.exit("histogram_fetch.py: %s: is each agent running?" % e)
    lat = {side: [] for side in sides}
    acct = {side: {"sched": {}, "ticks": {}, "client": 0.0, "values": set(), "missing": 0} for side in sides}
    for _ in range(max(n // 50, 1)):
        for side, ids in pmids.items():
            a = acct[side]
            s0 = {k: cpu_seconds(p) for k, p in pids.items()}
            t0 = {k: ticks_seconds(p) for k, p in pids.items()}
            for _ in range(50):
                c0 = time.process_time()
                w0 = time.perf_counter()
                res = ctx.pmFetch(ids)
                lat[side].append((time.perf_counter() - w0) * 1e6)
                a["client"] += time.process_time() - c0
                numval = res.contents.get_numval(0)
                ctx.pmFreeResult(res)
                a["values"].add(numval)
                if numval < 1:
                    a["missing"] += 1
            for k, p in pids.items():
                a["sched"][k] = a["sched"].get(k, 0.0) + cpu_seconds(p) - s0[k]
                a["ticks"][k] = a["ticks"].get(k, 0.0) + ticks_seconds(p) - t0[k]
    out = {}
    for side, name in sides.items():
        l, a = sorted(lat[side]), acct[side]
        f = len(l)
        out[side] = {
            "metric": name,
            "fetches": f,
            "values_per_fetch": sorted(a["values"]),
            "fetches_without_values": a["missing"],
            "median_us": round(l[f // 2], 1),
            "p90_us": round(l[f * 9 // 10], 1),
            "cpu_us_per_fetch": dict({k: round(v / f * 1e6, 1) for k, v in a["sched"].items()},
                                     client=round(a["client"] / f * 1e6, 1)),
            "utime_stime_us_per_fetch": {k: round(v / f * 1e6, 1) for k, v in a["ticks"].items()},
        }
    print(json.dumps(out))


main()
