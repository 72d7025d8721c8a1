"""perfabi against perfabi-exportd: its families, a restart, a truncated
file, a replayed DAMON record, the README's example, and what reads cost."""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time

import perfabi
import pytest
from support import Exportd, check_totals, env, eventually, eventually_raises


def test_the_exporters_families_instances_and_units(exportd: Exportd) -> None:
    seg = perfabi.Segment(exportd.path)
    info = seg.info()
    assert (info.abi_major, info.liveness, info.origin) == (1, "alive", "file")
    assert info.abi_minor >= 1 and info.writer_pid == exportd.pid
    assert (info.path, info.owner, info.nr_cpus) == (str(exportd.path), os.geteuid(), seg.nr_cpus)
    assert info.mapped == info.segment_size and info.silent_for is None
    assert seg.path == str(exportd.path)

    cpu = seg.family("kernel.cpu.time")
    assert (cpu.kind, cpu.unit.text, cpu.dimension, cpu.value_type) == ("counter", "us", "mode", "u64")
    assert (cpu.unit.base, cpu.unit.factor) == ("seconds", 1e-6)
    assert {"user", "system", "idle"} <= {i.name for i in cpu.instances}
    assert cpu.buckets is None and cpu.help
    snap = seg.snapshot()
    assert snap.family("kernel.cpu.time").family == cpu
    names = {fv.family.name for fv in snap.families}
    assert {"kernel.all.pswitch", "mem.physmem", "exportd.refreshes"} <= names
    assert snap.family("mem.physmem").family.kind == "gauge"
    assert snap.family("mem.physmem").family.unit.text == "KiB"
    assert check_totals(snap) >= len(cpu.instances)
    # The exporter's machine-wide values are on CPU 0.
    pswitch = snap.family("kernel.all.pswitch").instance()
    assert pswitch.per_cpu[0] == pswitch.total


def test_a_counter_moves(exportd: Exportd) -> None:
    seg = perfabi.Segment(exportd.path)
    first = seg.counter("exportd.refreshes")
    # Until it moved, not after a fixed pause: a busy machine can keep the
    # exporter waiting.
    second = eventually(
        "exportd.refreshes moved",
        lambda: c if (c := seg.counter("exportd.refreshes")).total > first.total else None,
    )
    assert second.total == sum(second.per_cpu)


def test_a_restarted_exporter_is_followed_by_the_same_segment(exportd: Exportd) -> None:
    seg = perfabi.Segment(exportd.path)
    epochs = [seg.info().epoch]
    seg.read("kernel.cpu.time")  # a family handle, cached: it must follow too

    # Stopped cleanly: the segment is closed, its values final.
    assert exportd.stop(signal.SIGTERM) == 0
    for read in (seg.snapshot, lambda: seg.read("kernel.cpu.time")):
        with pytest.raises(perfabi.ClosedError) as closed:
            read()
        assert (closed.value.code, closed.value.transient) == ("closed", True)
    exportd.start()
    eventually("the restarted exporter is read", lambda: seg.read("kernel.cpu.time"))
    epochs.append(seg.info().epoch)

    # Killed: the writer is gone (known once the reader looks again, at
    # most a second later).
    killed = exportd.pid
    exportd.stop(signal.SIGKILL)
    stale = eventually_raises("a killed writer is stale", perfabi.StaleError, seg.snapshot)
    assert (stale.code, stale.transient, stale.dead, stale.pid) == ("stale", True, True, killed)
    assert stale.silent_for >= 0.0 and f"pid {killed}" in str(stale)
    with pytest.raises(perfabi.StaleError):
        seg.read("kernel.cpu.time")
    exportd.start()
    eventually("the exporter started again is read", lambda: seg.read("kernel.cpu.time"))
    epochs.append(seg.info().epoch)

    assert len(set(epochs)) == 3, epochs
    assert seg.info().writer_pid == exportd.pid
    stats = seg.stats()
    assert stats.remaps >= 2 and stats.stale >= 1


def test_a_file_truncated_under_a_segment_raises_and_the_process_lives_on(exportd: Exportd) -> None:
    seg = perfabi.Segment(exportd.path)
    before = seg.snapshot()
    # The exporter repairs its segment within an interval: stopped, it
    # cannot before the reads below.
    exportd.send(signal.SIGSTOP)
    try:
        os.truncate(exportd.path, 4096)
        with pytest.raises((perfabi.TruncatedError, perfabi.HeaderChangedError)) as e:
            seg.snapshot()
        assert e.value.transient and e.value.code in ("truncated-while-mapped", "header-changed")
        # Read again, it opens the file again, too short now: still an
        # exception, whichever read it is.
        for read in (seg.snapshot, lambda: seg.read("kernel.cpu.time"), seg.damon):
            with pytest.raises(perfabi.Error):
                read()
    finally:
        exportd.send(signal.SIGCONT)
    after = eventually("the repaired segment is read", seg.snapshot)
    assert after.epoch != before.epoch
    assert seg.stats().truncations >= 1
    assert seg.read("kernel.cpu.time").values


def test_damon_regions_of_a_replayed_record(exportd: Exportd) -> None:
    # The record's first line: "PERFABI-TRACE-BEGIN intervals sample_us=5000
    # aggr_us=100000 workload=START END HOT_END PID" (exportd/records).
    first = exportd.record.read_text().splitlines()[0]
    start, _end, hot_end, _pid = (int(x) for x in first.split("workload=")[1].split())
    seg = perfabi.Segment(exportd.path)
    agg = eventually("a replayed aggregation", lambda: next(iter(seg.damon().aggregations), None))
    assert (agg.sample_us, agg.aggr_us) == (5000, 100000)
    assert len(agg.regions) == 13
    for a, b in zip(agg.regions, agg.regions[1:]):
        assert a.start < a.end <= b.start
    assert all(0.0 <= r.frequency <= 1.0 and r.size > 0 for r in agg.regions)
    hottest = max(agg.regions, key=lambda r: r.frequency)
    assert hottest.start == start and hottest.frequency >= 0.9
    assert hottest.start < hot_end <= hottest.end
    assert all(r.frequency < 0.5 for r in agg.regions if r is not hottest)


def test_the_readme_example(exportd: Exportd) -> None:
    out = subprocess.run(
        [sys.executable, env("PERFABI_TEST_EXAMPLE"), "1.0", "1000"],
        env={**os.environ, "PERFABI_SEGMENT": str(exportd.path)},
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    rates = {}
    for line in out.splitlines():
        rate, unit, name = line.split()
        rates[name] = (float(rate), unit)
    # The exporter refreshes every 0.1 s.
    refreshes, unit = rates["exportd.refreshes"]
    assert 3.0 <= refreshes <= 12.0 and unit.endswith("/s"), out
    assert rates["kernel.cpu.time{mode=idle}"][1] == "us/s", out


def test_what_reads_cost(exportd: Exportd, capsys: pytest.CaptureFixture[str]) -> None:
    seg = perfabi.Segment(exportd.path)
    families = len(seg.families())
    instances = sum(len(f.instances) for f in seg.families())

    def median_us(read: object, n: int = 300) -> float:
        assert callable(read)
        times = []
        for _ in range(n):
            t = time.perf_counter()
            read()
            times.append(time.perf_counter() - t)
        return statistics.median(times) * 1e6

    counter = median_us(lambda: seg.counter("exportd.refreshes"))
    family = median_us(lambda: seg.read("kernel.cpu.time"))
    snapshot = median_us(seg.snapshot, 100)
    with capsys.disabled():
        print(
            f"\nPERFABI-MEASURE python counter_us={counter:.1f} read_family_us={family:.1f} "
            f"snapshot_us={snapshot:.1f} ({families} families, {instances} instances, "
            f"{seg.nr_cpus} CPUs; median)"
        )
    assert family < snapshot
