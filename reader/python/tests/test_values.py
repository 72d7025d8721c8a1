"""Families, values, histograms and DAMON regions of the test's own live
writer (support.EXPECTED, support.AGGREGATION), read through perfabi."""

from __future__ import annotations

import pickle
import threading
from pathlib import Path

import perfabi
import pytest
from support import AGGREGATION, EXPECTED, ScriptedWriter, cache_sizes, check_totals, eventually


def test_families_instances_and_units_are_as_registered(writer: Path) -> None:
    seg = perfabi.Segment(writer)
    fams = {f.name: f for f in seg.families()}
    assert set(fams) == set(EXPECTED)
    for name, (help, kind, unit, dimension, value_type, buckets, instances) in EXPECTED.items():
        f = fams[name]
        assert (f.help, f.kind, f.unit.text, f.dimension) == (help, kind, unit, dimension), name
        assert (f.value_type, f.buckets) == (value_type, buckets), name
        assert {i.name: i.labels for i in f.instances} == instances, name
        assert sorted(i.id for i in f.instances) == list(range(len(instances))), name
        assert seg.family(name) == f
    # A flat counter: a family of one instance, its unit string its own.
    assert fams["app.ticks"].unit_text == "count"
    assert fams["app.requests"].instance("put").labels["idempotent"] == "yes"
    with pytest.raises(KeyError):
        fams["app.requests"].instance("delete")
    # Units: fields and the conversion to base units.
    kib = fams["app.size"].unit
    assert (kib.dim_space, kib.scale_space, kib.dim_time, kib.quantity) == (1, 1, 0, "plain")
    assert (kib.base, kib.factor) == ("bytes", 1024.0)
    ns = fams["app.latency"].unit
    assert (ns.dim_time, ns.scale_time, ns.base, ns.factor) == (1, 0, "seconds", 1e-9)
    assert fams["app.temperature"].unit.text == "" and fams["app.temperature"].unit.base == ""


def test_counters_move_between_two_snapshots(writer: Path) -> None:
    seg = perfabi.Segment(writer)
    before = seg.snapshot()
    counters = [("app.ticks", ""), ("app.requests", "get"), ("app.requests", "put")]

    def moved() -> perfabi.Snapshot | None:
        # Snapshots until every counter moved, not one after a fixed pause:
        # a busy machine can keep the writer waiting.
        after = seg.snapshot()
        grew = True
        for name, instance in counters:
            was = before.family(name).instance(instance).total
            now = after.family(name).instance(instance).total
            assert isinstance(was, int) and isinstance(now, int)
            assert now >= was, f"{name} {instance!r}: {was} -> {now}"
            grew = grew and now > was
        return after if grew else None

    after = eventually("every counter moved", moved)
    assert after.epoch == before.epoch and after.nr_cpus == seg.nr_cpus
    with pytest.raises(KeyError):
        after.family("app.nothing")


def test_per_cpu_values_make_the_total(writer: Path) -> None:
    seg = perfabi.Segment(writer)
    for _ in range(50):
        assert check_totals(seg.snapshot()) == 9
    snap = seg.snapshot()
    # A gauge set to -5 (its sum over CPUs); another moved up and down.
    assert snap.family("app.temperature").instance("cpu").total == -5
    assert snap.family("app.temperature").instance("gpu").total in (0, 1, 2)
    depth = snap.family("app.queue_depth").instance()
    assert isinstance(depth.total, int) and 0 < depth.total <= 1000


def test_a_histograms_count_is_the_sum_of_its_buckets(writer: Path) -> None:
    seg = perfabi.Segment(writer)

    def get_count() -> int:
        for v in seg.read("app.latency").values:
            for h in (v.total, *v.per_cpu):
                assert isinstance(h, perfabi.Histogram)
                assert len(h.buckets) == 4
                assert h.count == sum(h.buckets), h
        total = seg.read("app.latency").instance("get").total
        assert isinstance(total, perfabi.Histogram)
        return total.count

    first = get_count()
    for _ in range(300):
        get_count()
    eventually("observations keep coming", lambda: get_count() > first or None)
    size = seg.read("app.size").instance()
    assert isinstance(size.total, perfabi.Histogram) and size.total.count > 0


def test_read_follows_one_family_with_the_metadata_of_a_snapshot(writer: Path) -> None:
    seg = perfabi.Segment(writer)
    first = seg.read("app.requests")
    snap = seg.snapshot()
    again = seg.read("app.requests")
    assert first.family == snap.family("app.requests").family == again.family
    assert first.generation == again.generation == snap.generation
    for v in again.values:
        old = first.instance(v.instance.name).total
        assert isinstance(old, int) and isinstance(v.total, int) and v.total >= old
    with pytest.raises(perfabi.NoSuchFamilyError) as e:
        seg.read("app.nothing")
    assert isinstance(e.value, KeyError) and e.value.code == "no-such-family"
    assert str(e.value) == 'no metric family named "app.nothing" (perfabi-cat lists them)'


def test_a_flat_counter(writer: Path) -> None:
    seg = perfabi.Segment(writer)
    c = seg.counter("app.ticks")
    assert (c.name, c.unit, c.semantics, c.value_type) == ("app.ticks", "count", "counter", "u64")
    assert len(c.per_cpu) == seg.nr_cpus and c.total == sum(c.per_cpu)
    eventually("app.ticks moves", lambda: seg.counter("app.ticks").total > c.total or None)
    with pytest.raises(perfabi.NoSuchCounterError) as e:
        seg.counter("app.requests")  # a family, not a flat counter
    assert isinstance(e.value, KeyError) and e.value.code == "no-such-counter"


def test_damon_regions_as_published(writer: Path) -> None:
    seg = perfabi.Segment(writer)
    d = seg.damon()
    assert (d.busy_cpus, d.dropped) == ((), 0)
    [agg] = d.aggregations
    assert agg.aggregation >= 1
    published = perfabi.Aggregation(
        monitor_id=AGGREGATION.monitor_id,
        target_id=AGGREGATION.target_id,
        aggregation=agg.aggregation,
        sample_us=AGGREGATION.sample_us,
        aggr_us=AGGREGATION.aggr_us,
        regions=AGGREGATION.regions,
    )
    assert agg == published
    assert [r.size for r in agg.regions] == [0x200000, 0x500000]
    later = eventually(
        "a later aggregation",
        lambda: next((a for a in seg.damon().aggregations if a.aggregation > agg.aggregation), None),
    )
    assert later.regions == agg.regions


def test_threads_share_a_segment(writer: Path) -> None:
    seg = perfabi.Segment(writer)
    failures: list[BaseException] = []

    def reads() -> None:
        try:
            for _ in range(100):
                seg.read("app.latency")
                seg.snapshot()
                seg.counter("app.ticks")
        except BaseException as e:  # noqa: BLE001 -- reported below
            failures.append(e)

    threads = [threading.Thread(target=reads) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []
    assert seg.stats() == perfabi.Stats(busy=0, stale=0, remaps=0, truncations=0)


def test_values_are_immutable_hashable_and_pickle(writer: Path) -> None:
    seg = perfabi.Segment(writer)
    family = seg.family("app.requests")
    put = family.instance("put")
    # The Family and its Instances are shared by later reads: their labels
    # cannot be changed under them.
    with pytest.raises(TypeError):
        put.labels["poisoned"] = "yes"  # type: ignore[index]
    assert seg.family("app.requests") is family
    for seen in (
        seg.family("app.requests").instance("put"),
        seg.read("app.requests").instance("put").instance,
        seg.snapshot().family("app.requests").instance("put").instance,
    ):
        assert seen.labels == {"method": "PUT", "idempotent": "yes"}
    # A mapping given to an Instance is copied.
    mine = {"method": "PUT", "idempotent": "yes"}
    made = perfabi.Instance(name="put", id=put.id, labels=mine)
    mine["method"] = "POST"
    assert made == put and made.labels["method"] == "PUT"
    assert dict(put.labels) == {"method": "PUT", "idempotent": "yes"} and len(put.labels) == 2

    snap = seg.snapshot()
    latency = snap.family("app.latency")
    histogram = latency.instance("get").total
    damon = seg.damon()
    values: list[object] = [
        family,
        put,
        family.unit,
        snap,
        latency,
        latency.instance("get"),
        histogram,
        seg.read("app.requests"),
        seg.counter("app.ticks"),
        damon,
        damon.aggregations[0],
        damon.aggregations[0].regions[0],
        seg.info(),
        seg.stats(),
    ]
    for v in values:
        back = pickle.loads(pickle.dumps(v))
        assert back == v and hash(back) == hash(v), type(v).__name__
    assert hash(made) == hash(put) and len({family, seg.family("app.requests"), made, put}) == 2
    assert pickle.loads(pickle.dumps(put)).labels["idempotent"] == "yes"


def test_a_segment_keeps_only_what_it_needs_of_families_that_come_and_go(scripted: ScriptedWriter) -> None:
    scripted.do("add app.kept")
    seg = perfabi.Segment(scripted.path)
    kept = seg.family("app.kept")
    # A writer that names a family after each process it watches.
    for n in range(100):
        name = f"app.pid{n}"
        scripted.do(f"add {name}")
        if n % 2:
            assert seg.read(name).family.name == name
        else:
            assert seg.family(name).name == name
        scripted.do(f"del {name}")
        # What is still there is still shared.
        assert seg.read("app.kept").family is kept
    handles, families = cache_sizes(seg)
    assert handles <= 2 and families <= 2, f"{handles} handles, {families} families kept"
    assert seg.family("app.kept") is kept
    seg.close()
    assert cache_sizes(seg) == (0, 0)
