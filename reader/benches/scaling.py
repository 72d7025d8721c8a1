#!/usr/bin/env python3
"""Runs the reader's scaling benchmark and prints one table.

    python3 reader/benches/scaling.py              # runs the bench, ~1-2 min
    PERFABI_SCALING_SHORT=1 python3 reader/benches/scaling.py   # CI, ~25 s
    python3 reader/benches/scaling.py --no-run [CRITERION_DIR]  # last results

Each row is one operation on one simulated geometry (nr_cpus x used value
slots per block): its median ns per call and per value read, the floors on
the same bytes (`loop`: relaxed loads of the sequence word, the values, the
sequence word again, per block; `copy`: copy_from_slice of the values, per
block), and the operation's ratio to each. `many` is read_many of the
first 30 counters (14 in 30-slot blocks); the CPU counts are powers of two
and counts a few apart (2/3/4, 60/64/68, 500/512/513/520, 1000/1024/1040). The last row is /proc/stat
opened, read and parsed at this machine's real CPU count.
"""
import json
import os
import pathlib
import subprocess
import sys

args = sys.argv[1:]
run = "--no-run" not in args
args = [a for a in args if a != "--no-run"]
if args:
    root = pathlib.Path(args[0])
else:
    root = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", "target")) / "criterion"
    if not root.is_absolute():
        top = subprocess.run(["cargo", "locate-project", "--workspace", "--message-format", "plain"],
                             capture_output=True, text=True, check=True).stdout.strip()
        root = pathlib.Path(top).parent / root

if run:
    bench = subprocess.run(["cargo", "bench", "-p", "perfabi-reader", "--bench", "scaling", "--", "--noplot"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if bench.returncode != 0:
        sys.exit(bench.stderr)


def result(group, name):
    d = root / group / name / "new"
    try:
        est = json.loads((d / "estimates.json").read_text())
        bench = json.loads((d / "benchmark.json").read_text())
    except FileNotFoundError:
        return None
    return est["median"]["point_estimate"], bench["throughput"]["Elements"]


CPUS = [2, 3, 4, 16, 60, 64, 68, 256, 500, 512, 513, 520, 1000, 1024, 1040]
INSTANCES = [30, 1024, 4080]
OPS = ["handle", "many", "family", "snapshot"]

rows = []
per_value = {}
ratio = {}
head = f"{'cpus':>5} {'slots':>5} {'op':<10} {'values':>8} {'ns/op':>11} {'ns/value':>8} " \
       f"{'loop ns':>11} {'copy ns':>11} {'x loop':>6} {'x copy':>6}"
print(head)
print("-" * len(head))
for cpus in CPUS:
    for inst in INSTANCES:
        g = f"scaling_{cpus}x{inst}"
        for op in OPS:
            # read_many has no copy floor (its words are not one run).
            r, lp, cp = result(g, op), result(g, "loop_" + op), result(g, "copy_" + op)
            if r is None or lp is None:
                continue
            (ns, n), (lns, _) = r, lp
            cns = cp[0] if cp else float("nan")
            per_value[(cpus, inst, op)] = ns / n
            ratio[(cpus, inst, op)] = (ns / lns, ns / cns)
            print(f"{cpus:>5} {inst:>5} {op:<10} {n:>8} {ns:>11.1f} {ns / n:>8.3f} "
                  f"{lns:>11.1f} {cns:>11.1f} {ns / lns:>6.2f} {ns / cns:>6.2f}")
stat = result("proc_stat", "read_parse")
if stat is not None:
    ns, n = stat
    print(f"{os.cpu_count():>5} {'-':>5} {'/proc/stat':<10} {n:>8} {ns:>11.1f} {ns / n:>8.3f} "
          f"{'-':>11} {'-':>11} {'-':>6} {'-':>6}")
if not per_value:
    sys.exit(f"no scaling results under {root}")

# Every read path against its loop floor at every geometry, powers of two
# beside CPU counts a few apart (issue 32: none may depend on the CPU count
# being a power of two), and read_many beside its old loop order.
worst = max(ratio.items(), key=lambda kv: kv[1][0], default=None)
if worst:
    (c, i, op), (x, _) = worst
    print(f"\nworst read path / loop floor: {x:.2f}x ({op}, {c} CPUs x {i} slots; target <= 2x)")
naive = []
for cpus in CPUS:
    for inst in INSTANCES:
        g = f"scaling_{cpus}x{inst}"
        r, nv = result(g, "many"), result(g, "naive_many")
        if r and nv:
            naive.append((cpus, inst, r[0] / nv[0]))
if naive:
    print("read_many / the same loads stored counter major value by value (the old order):")
    for inst in INSTANCES:
        print(f"  {inst:>5} slots: " + " ".join(f"{c}:{x:.2f}" for c, i, x in naive if i == inst))

# The targets, from the rows above.
t = ratio.get((1024, 30, "snapshot"))
if t:
    print(f"\n30 counters x 1,024 CPUs (snapshot) / loop floor: {t[0]:.2f}x (target <= 2x)")
for op in OPS:
    a, b = per_value.get((1024, 30, op)), per_value.get((16, 30, op))
    if a and b:
        print(f"{op}: ns/value at 1,024 CPUs / at 16 (30 slots): {a / b:.2f}x (target <= 1.5x)")
# A snapshot's share of memcpy's throughput, beside the loop floor's: the
# most any reader reaching the values by 8-byte atomic loads (DESIGN.md's
# rule for shared memory) can have on this machine.
print("\nsnapshot memcpy throughput share (target >= 0.8); in brackets the loop floor's own share")
print(f"{'slots':>5} " + " ".join(f"{c:>12}" for c in CPUS))
for inst in INSTANCES:
    cells = []
    for cpus in CPUS:
        t = ratio.get((cpus, inst, "snapshot"))
        if t:
            floor = t[1] / t[0]  # loop ns / copy ns
            cells.append(f"{1 / t[1]:5.2f} ({1 / floor:4.2f})")
        else:
            cells.append(f"{'-':>12}")
    print(f"{inst:>5} " + " ".join(f"{c:>12}" for c in cells))
