"""One PMAPI client for both sides: fetches the 1,000 counters of each side
in one pmFetch, many times, timing each fetch and checking in each that the
8 members of every group are equal.

Usage: python3 fetch.py HOST:PORT FETCHES [floor] [PIDS]
Prints one JSON object.

PIDS ("pmcd=PID,perfabi=PID") adds each side's CPU time per fetch, from
the schedstat files of pmcd's and pmdaperfabi's threads and this client's
own process time: on a busy
machine a latency also counts time spent waiting for a core, CPU time
does not. (MMV runs inside pmcd: its agent's share is in pmcd's.)

With "floor", two more sides are fetched the same way, the floor under
perfabi's figure: "floor_daemon", perfabi.segment.epoch 1,000 times (the
same PDUs through pmcd and pmdaperfabi's pipe, 64-bit values, but nothing
read from the segment), and "floor_pmcd", pmcd.numagents 1,000 times
(pmcd's own agent inside pmcd, 32-bit values: pmcd and the client alone).
"""
import json
import os
import sys
import time

from pcp import pmapi
import cpmapi as api

def cpu_seconds(pid):
    """CPU time of all threads of process PID, in seconds: the first field
    of each /proc/PID/task/TID/schedstat, nanoseconds on the CPU (exact,
    where /proc/PID/stat's utime + stime come in clock ticks of 10 ms)."""
    total = 0
    task = "/proc/%d/task" % pid
    for tid in os.listdir(task):
        try:
            with open("%s/%s/schedstat" % (task, tid)) as f:
                total += int(f.read().split()[0])
        except FileNotFoundError:  # the thread ended meanwhile
            pass
    return total / 1e9

def main():
    host, n = sys.argv[1], int(sys.argv[2])
    floor = "floor" in sys.argv[3:]
    pids = {}
    for arg in sys.argv[3:]:
        if "=" in arg:
            pids = {k: int(v) for k, v in (kv.split("=") for kv in arg.split(","))}
    def agents_cpu():
        return {k: cpu_seconds(v) for k, v in pids.items()}
    ctx = pmapi.pmContext(api.PM_CONTEXT_HOST, host)
    sides = {
        "perfabi": ["perfabi.bench.g%03d.c%d" % (g, c) for g in range(125) for c in range(8)],
        "mmv": ["mmv.bench.g%03d_c%d" % (g, c) for g in range(125) for c in range(8)],
    }
    if floor:
        sides["floor_daemon"] = ["perfabi.segment.epoch"] * 1000
        sides["floor_pmcd"] = ["pmcd.numagents"] * 1000
    in_type = {side: api.PM_TYPE_U32 if side == "floor_pmcd" else api.PM_TYPE_U64 for side in sides}
    try:
        pmids = {k: ctx.pmLookupName(v) for k, v in sides.items()}
    except pmapi.pmErr as e:
        sys.exit("fetch.py: %d names unknown to pmcd, first %s: is each writer running?" % (len(e.args[1]), e.args[1][0]) if len(e.args) > 1 else "fetch.py: %s" % e)
    result = {}
    for side in sides:
        result[side] = {"latencies_us": [], "mismatched_fetches": 0, "mismatched_groups": 0, "values_missing": 0}
    cpu = {side: {} for side in sides}
    # Alternate sides in blocks of 50 so drift hits both alike.
    for block in range(n // 50):
        for side, ids in pmids.items():
            r, c = result[side], cpu[side]
            # pmcd and the agent work only while a fetch is under way: their
            # CPU time over the block is the block's fetches'.
            a0 = agents_cpu() if pids else {}
            for _ in range(50):
                c0 = time.process_time()
                t0 = time.perf_counter()
                res = ctx.pmFetch(ids)
                r["latencies_us"].append((time.perf_counter() - t0) * 1e6)
                c["client"] = c.get("client", 0.0) + time.process_time() - c0
                values = []
                for i in range(res.contents.numpmid):
                    vs = res.contents.get_vset(i)
                    if vs.contents.numval < 1:
                        values.append(None)
                        continue
                    values.append(ctx.pmExtractValue(vs.contents.valfmt, vs.contents.vlist[0],
                                                     in_type[side], api.PM_TYPE_U64).ull)
                ctx.pmFreeResult(res)
                if None in values:
                    r["values_missing"] += 1
                    continue
                bad = sum(1 for g in range(125) if len(set(values[g * 8:(g + 1) * 8])) != 1)
                r["mismatched_groups"] += bad
                r["mismatched_fetches"] += bad > 0
            for k, v in (agents_cpu() if pids else {}).items():
                c[k] = c.get(k, 0.0) + v - a0[k]
    out = {}
    for side, r in result.items():
        lat = sorted(r.pop("latencies_us"))
        r["fetches"] = len(lat)
        r["median_us"] = round(lat[len(lat) // 2], 1)
        r["p90_us"] = round(lat[len(lat) * 9 // 10], 1)
        if pids:
            # Only the processes a side's fetch goes through.
            through = {"client", "pmcd"} | ({"perfabi"} if side in ("perfabi", "floor_daemon") else set())
            r["cpu_us_per_fetch"] = {k: round(v / len(lat) * 1e6, 1) for k, v in cpu[side].items() if k in through}
            r["cpu_us_per_fetch"]["total"] = round(sum(r["cpu_us_per_fetch"].values()), 1)
        out[side] = r
    out["latency_ratio_perfabi_over_mmv"] = round(out["perfabi"]["median_us"] / out["mmv"]["median_us"], 3)
    if pids:
        out["cpu_ratio_perfabi_over_mmv"] = round(
            out["perfabi"]["cpu_us_per_fetch"]["total"] / out["mmv"]["cpu_us_per_fetch"]["total"], 3)
    for side in ("floor_daemon", "floor_pmcd"):
        if side in out:
            out["latency_ratio_%s_over_mmv" % side] = round(out[side]["median_us"] / out["mmv"]["median_us"], 3)
    print(json.dumps(out))

if __name__ == "__main__":
    main()
