#!/usr/bin/env python3
"""Prints the ratios the issues ask for from criterion's last run.

    cargo bench -p perfabi-shm --bench protocol
    cargo bench -p perfabi-exportd --bench read     (optional)
    cargo bench -p perfabi-reader --bench families  (optional)
    perfabi/shm/benches/adjust-instructions [--bench] (optional)
    python3 perfabi/shm/benches/ratios.py [TARGET/criterion]

Lines whose benchmarks did not run (a filtered run, such as `-- adjust` or
`-- two_threads`) are left out. `adjust` is timed with the wall clock and
again (`adjust_cpu_time`) with the thread's CPU clock, which leaves out the
time a thread waits for a CPU on a machine busy with other work; `damon`
is timed again the same way (`damon_cpu_time`). The instruction counts are those adjust-instructions last wrote next to the
criterion folder (TARGET/adjust-instructions-*.txt).
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


def line(label, value, unit="ns", note=""):
    if value is not None:
        print(f"{label:36}{value:6.2f} {unit}" + (f"   {note}" if note else ""))


adjust = {g: [ns(g, n, required=False) for n in
              ["rseq", "rseq_counter", "rseq_counter_reloaded", "lock", "lock_counter",
               "lock_counter_reloaded", "baseline_fetch_add_uncontended", "baseline_load_store"]]
          for g in ["adjust", "adjust_cpu_time"]}
percpu, percpu_counter, shared, private = (
    ns("two_threads", n, required=False)
    for n in ["percpu_adjust", "percpu_counter", "shared_fetch_add", "baseline_private_getcpu"])
snap, memcpy = ns("snapshot", "perfabi_1024x*", required=False), ns("snapshot", "memcpy_1024x*", required=False)
if all(v is None for v in adjust["adjust"] + adjust["adjust_cpu_time"]
       + [percpu, shared, snap, ns("damon", "publish_10000_regions", required=False)]):
    sys.exit(f"no criterion result for adjust, two_threads, snapshot or damon under {root}: "
             "run cargo bench -p perfabi-shm first")
for group, clock in [("adjust", "wall clock"), ("adjust_cpu_time", "thread's CPU clock")]:
    rseq, rseq_c, rseq_cr, lock, lock_c, lock_cr, fetch_add, load_store = adjust[group]
    line("adjust, one thread (rseq):", rseq, note=f"(target <= 2 ns; {clock})")
    line("  ... through a Counter handle:", rseq_c, note=f"(target <= 2 ns; {clock})")
    line("  ... the handle loaded every call:", rseq_cr, note=f"({clock})")
    line("adjust, one thread (lock method):", lock, note=f"({clock})")
    line("  ... through a Counter handle:", lock_c, note=f"({clock})")
    line("  ... the handle loaded every call:", lock_cr, note=f"({clock})")
    line("  baseline fetch_add, uncontended:", fetch_add, note=f"({clock})")
    line("  baseline load+store (the floor):", load_store, note=f"({clock})")
# Written by perfabi/shm/benches/adjust-instructions (next to criterion's results).
for name in ["bench", "rseq", "lock", "bench-counter", "rseq-counter", "lock-counter"]:
    counted = root.parent / f"adjust-instructions-{name}.txt"
    if counted.exists():
        print(counted.read_text().strip())
line("2 threads per-CPU adjust:", percpu, "ns/op per thread")
line("2 threads per-CPU Counter::adjust:", percpu_counter, "ns/op per thread")
line("2 threads shared fetch_add:", shared, "ns/op per thread")
line("2 threads private words (floor):", private, "ns/op per thread")
if percpu is not None and shared is not None:
    line("per-CPU vs shared throughput ratio:", shared / percpu, "x", "(target >= 3x)")
if percpu_counter is not None and shared is not None:
    line("  ... through a Counter handle:", shared / percpu_counter, "x", "(target >= 3x)")
if snap is not None and memcpy is not None:
    print(f"snapshot 1024 counters x all CPUs:  {snap:6.1f} ns; memcpy {memcpy:.1f} ns")
    print(f"snapshot throughput / memcpy:       {memcpy / snap:6.2f}     (target >= 0.5)")

for method in ["rseq", "lock"]:
    adj = ns("histogram", f"adjust_{method}", required=False)
    if adj is None:
        continue
    for layout in ["log2", "explicit"]:
        obs = ns("histogram", f"observe_{layout}_{method}", required=False)
        if obs is not None:
            print(f"histogram observe ({layout:8}, {method}): {obs:6.2f} ns; adjust {adj:.2f} ns: "
                  f"observe/adjust {obs / adj:5.2f}x")

for place in ["first", "last"]:
    handle = ns("family_read", f"handle_64x16_{place}", required=False)
    full = ns("family_read", f"snapshot_64x16_{place}", required=False)
    if handle is not None and full is not None:
        print(f"one family (64 x 16 CPUs, {place:5}): handle {handle:8.1f} ns, full snapshot {full:8.1f} ns: "
              f"snapshot/handle {full / handle:5.2f}x")
    ht = ns("family_read", f"handle_totals_64x16_{place}", required=False)
    st = ns("family_read", f"snapshot_totals_64x16_{place}", required=False)
    if ht is not None and st is not None:
        print(f"  ... with the 64 totals:             handle {ht:8.1f} ns, full snapshot {st:8.1f} ns: "
              f"snapshot/handle {st / ht:5.2f}x")

reader = ns("stat_10x_cpus", "perfabi_reader", required=False)
if reader is not None:
    text = ns("stat_10x_cpus", "text_copy_open_read_parse")
    proc = ns("stat_10x_cpus", "proc_stat_open_read_parse")
    print(f"reader: 10 stats x all CPUs:        {reader:8.1f} ns")
    print(f"text copy open+read+parse:          {text:8.1f} ns  ({text / reader:6.0f}x slower)")
    print(f"/proc/stat open+read+parse:         {proc:8.1f} ns  ({proc / reader:6.0f}x slower)  (target >= 300x)")

damon = ns("damon", "publish_10000_regions", required=False)
if damon is not None:
    copy = ns("damon", "copy_10000_records", required=False)
    if copy is None:
        print(f"DAMON publish 10,000 regions: {damon / 1000:.1f} µs (target < 100 µs; copy floor not run)")
    else:
        print(f"DAMON publish 10,000 regions: {damon / 1000:.1f} µs; copy {copy / 1000:.1f} µs; "
              f"ratio {damon / copy:.2f} (target < 100 µs and <= 2x)")
    lock = ns("damon", "publish_10000_regions_lock", required=False)
    if lock is not None:
        ratio = f"; ratio {lock / copy:.2f}" if copy is not None else ""
        print(f"  ... with the lock method: {lock / 1000:.1f} µs{ratio}")
    cpu, cpu_copy = (ns("damon_cpu_time", n, required=False)
                     for n in ["publish_10000_regions", "copy_10000_records"])
    if cpu is not None and cpu_copy is not None:
        cpu_lock = ns("damon_cpu_time", "publish_10000_regions_lock", required=False)
        lock_part = f"; lock method {cpu_lock / 1000:.1f} µs, ratio {cpu_lock / cpu_copy:.2f}" \
            if cpu_lock is not None else ""
        print(f"  ... on the thread's CPU clock: {cpu / 1000:.1f} µs; copy {cpu_copy / 1000:.1f} µs; "
              f"ratio {cpu / cpu_copy:.2f}{lock_part}")
    stores = ns("damon", "atomic_store_10000_records", required=False)
    if stores is not None:
        print(f"  ... relaxed atomic stores of the same words: {stores / 1000:.1f} µs; "
              f"publish / stores {damon / stores:.2f}")
