#!/usr/bin/env python3
"""Prints the ratios the issues ask for from criterion's last run.

    cargo bench -p perfabi-shm --bench protocol
    cargo bench -p perfabi-exportd --bench read     (optional)
    python3 perfabi/shm/benches/ratios.py
"""
import json
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else "target/criterion")


def ns(group, name, required=True):
    matches = sorted((root / group).glob(name + "/new/estimates.json"))
    if not matches:
        if not required:
            return None
        sys.exit(f"no criterion result for {group}/{name} under {root}: run cargo bench -p perfabi-shm first")
    return json.loads(matches[0].read_text())["mean"]["point_estimate"]


adjust = ns("adjust", "rseq")
lock = ns("adjust", "lock")
percpu = ns("two_threads", "percpu_adjust")
shared = ns("two_threads", "shared_fetch_add")
private = ns("two_threads", "baseline_private_getcpu")
snap = ns("snapshot", "perfabi_1024x*")
memcpy = ns("snapshot", "memcpy_1024x*")
print(f"adjust, one thread (rseq):          {adjust:6.2f} ns   (target <= 2 ns)")
print(f"adjust, one thread (lock method):   {lock:6.2f} ns")
print(f"2 threads per-CPU adjust:           {percpu:6.2f} ns/op per thread")
print(f"2 threads shared fetch_add:         {shared:6.2f} ns/op per thread")
print(f"2 threads private words (floor):    {private:6.2f} ns/op per thread")
print(f"per-CPU vs shared throughput ratio: {shared / percpu:6.2f}x    (target >= 3x)")
print(f"snapshot 1024 counters x all CPUs:  {snap:6.1f} ns; memcpy {memcpy:.1f} ns")
print(f"snapshot throughput / memcpy:       {memcpy / snap:6.2f}     (target >= 0.5)")

reader = ns("stat_10x_cpus", "perfabi_reader", required=False)
if reader is not None:
    text = ns("stat_10x_cpus", "text_copy_open_read_parse")
    proc = ns("stat_10x_cpus", "proc_stat_open_read_parse")
    print(f"reader: 10 stats x all CPUs:        {reader:8.1f} ns")
    print(f"text copy open+read+parse:          {text:8.1f} ns  ({text / reader:6.0f}x slower)")
    print(f"/proc/stat open+read+parse:         {proc:8.1f} ns  ({proc / reader:6.0f}x slower)  (target >= 300x)")

damon = ns("damon", "publish_10000_regions", required=False)
if damon is not None:
    print(f"publish a 10,000-region aggregation: {damon / 1000:8.1f} us  (target < 100 us)")
