"""The Python writer (perfabi.client): every class and method, labels,
errors, threads and fork, each value read back with the module's reader."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import perfabi
import pytest
from perfabi import client
from perfabi.client import Counter, Gauge, Histogram

# The process's segment goes to a directory of the tests' own, named
# before the first metric (configure() refuses to move it later).
_DIR: Path | None = None


@pytest.fixture(scope="module", autouse=True)
def segment_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    global _DIR
    _DIR = tmp_path_factory.mktemp("segments")
    client.configure(directory=str(_DIR), name="pytest-writer")
    yield _DIR


def values(name: str, path: str | None = None) -> dict[str, Any]:
    """Family `name`'s totals by instance, read by the module's reader
    from this process's segment (or `path`)."""
    with perfabi.Segment(path or client.segment_path()) as seg:
        fam = seg.read(name)
    return {v.instance.name: v.total for v in fam.values}


def test_segment_is_in_the_configured_directory(segment_dir: Path) -> None:
    Counter("placed", "Made to create the segment").inc()
    path = Path(client.segment_path())
    assert path.parent == segment_dir
    assert path.name.startswith(f"pytest-writer.{os.getpid()}.")
    assert path.name.endswith(".perfabi")
    with pytest.raises(RuntimeError, match="configure"):
        client.configure(directory=str(segment_dir))


def test_counter_inc_and_total_suffix() -> None:
    c = Counter("jobs_total", "Jobs done")
    c.inc()
    c.inc(41)
    c.inc(2.0)
    # prometheus_client's rule: a counter's _total is its samples'.
    assert values("jobs") == {"": 44}
    with perfabi.Segment(client.segment_path()) as seg:
        fam = seg.family("jobs")
    assert fam.kind == "counter"
    assert fam.help == "Jobs done"


def test_counter_labels_children_are_cached() -> None:
    c = Counter("requests", "Requests", ["method"])
    get = c.labels("GET")
    assert c.labels(method="GET") is get
    get.inc(3)
    c.labels("POST").inc(5)
    c.labels(method="GET").inc()
    assert values("requests") == {"GET": 4, "POST": 5}
    with perfabi.Segment(client.segment_path()) as seg:
        assert seg.family("requests").dimension == "method"


def test_several_labels_are_member_labels() -> None:
    c = Counter("responses", "Responses", ["method", "code"])
    c.labels("GET", "200").inc(2)
    c.labels(code="500", method="GET").inc(7)
    c.labels("with space", "200").inc(1)
    with perfabi.Segment(client.segment_path()) as seg:
        fam = seg.read("responses")
    got = {
        (v.instance.labels["method"], v.instance.labels["code"]): v.total
        for v in fam.values
    }
    assert got == {("GET", "200"): 2, ("GET", "500"): 7, ("with space", "200"): 1}
    assert fam.family.dimension == "series"
    # The writer's one rule (spec §9.2): the values escaped, joined by ",".
    names = sorted(v.instance.name for v in fam.values)
    assert names == ["GET,200", "GET,500", "with%20space,200"]


def test_count_exceptions() -> None:
    c = Counter("failures", "Failures")

    @c.count_exceptions(KeyError)
    def lookup(d: dict[str, int], k: str) -> int:
        return d[k]

    assert lookup({"a": 1}, "a") == 1
    with pytest.raises(KeyError):
        lookup({}, "b")
    with pytest.raises(ValueError):
        with c.count_exceptions():
            raise ValueError("counted")
    with c.count_exceptions():
        pass
    assert values("failures") == {"": 2}


def test_gauge_inc_dec_set() -> None:
    g = Gauge("queue_depth", "Jobs waiting", multiprocess_mode="livesum")
    assert g.multiprocess_mode == "livesum"
    g.inc(10)
    g.dec(3)
    assert values("queue_depth") == {"": 7}
    g.set(-12)
    assert values("queue_depth") == {"": -12}
    g.dec()
    assert values("queue_depth") == {"": -13}


def test_gauge_multiprocess_mode_is_the_familys_gauge_mode() -> None:
    made = {
        "all": Gauge("mode_default", "prometheus_client's default, all"),
        "max": Gauge("mode_livemax", "x", multiprocess_mode="livemax"),
        "min": Gauge("mode_min", "x", multiprocess_mode="min"),
        "sum": Gauge("mode_sum", "x", multiprocess_mode="sum"),
    }
    with perfabi.Segment(client.segment_path()) as seg:
        for mode, g in made.items():
            assert seg.family(g._name).gauge_mode == mode
        assert seg.family("queue_depth").gauge_mode == "sum"
        assert seg.family("jobs").gauge_mode is None
    for mode in ("mostrecent", "livemostrecent"):
        with pytest.raises(ValueError, match="liveall"):
            Gauge("mode_" + mode, "x", multiprocess_mode=mode)


def test_gauge_helpers() -> None:
    g = Gauge("in_flight", "Requests in flight")
    seen: list[int] = []

    @g.track_inprogress()
    def work() -> None:
        seen.append(values("in_flight")[""])

    work()
    with g.track_inprogress():
        seen.append(values("in_flight")[""])
    assert seen == [1, 1]
    assert values("in_flight") == {"": 0}

    t = Gauge("last_run_seconds", "When the job last ran")
    before = time.time_ns()
    t.set_to_current_time()
    after = time.time_ns()
    assert before <= values("last_run_seconds")[""] <= after

    d = Gauge("took", "How long it took", unit="seconds")
    with d.time():
        time.sleep(0.01)
    took = values("took_seconds")[""]
    assert 10_000_000 <= took < 10 * 1_000_000_000

    plain = Gauge("started_at", "When it started, in whole seconds")
    plain.set_to_current_time()
    assert abs(values("started_at")[""] - time.time()) < 60


def test_histogram_buckets_in_seconds() -> None:
    h = Histogram("request_latency_seconds", "Latency")
    for v in (0.004, 0.02, 0.02, 3, 11.5):
        h.observe(v)
    got = values("request_latency_seconds")[""]
    assert got.count == 5
    assert got.sum == 4_000_000 + 2 * 20_000_000 + 3_000_000_000 + 11_500_000_000
    # DEFAULT_BUCKETS: .005 .01 .025 .05 .075 .1 .25 .5 .75 1 2.5 5 7.5 10 +Inf
    assert got.buckets == (1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 1)
    with perfabi.Segment(client.segment_path()) as seg:
        fam = seg.family("request_latency_seconds")
    assert fam.unit.text == "ns"
    assert fam.buckets is not None and fam.buckets[0] == 5_000_000


def test_histogram_integer_buckets_labels_and_time() -> None:
    h = Histogram("payload_bytes", "Payload size", ["route"], buckets=[100, 1000, float("inf")])
    h.labels("/a").observe(50)
    h.labels("/a").observe(100)
    h.labels("/a").observe(5000)
    h.labels("/b").observe(1000.0)
    got = values("payload_bytes")
    assert (got["/a"].count, got["/a"].sum, got["/a"].buckets) == (3, 5150, (2, 0, 1))
    assert (got["/b"].count, got["/b"].buckets) == (1, (0, 1, 0))

    t = Histogram("handler_seconds", "Handler time", buckets=[0.001, 1])

    @t.time()
    def handler() -> str:
        time.sleep(0.002)
        return "ok"

    assert handler() == "ok"
    with t.time():
        pass
    got = values("handler_seconds")
    assert got[""].count == 2
    assert got[""].buckets[1] >= 1


def test_refusals() -> None:
    c = Counter("refusing", "Refuses", ["kind"])
    with pytest.raises(ValueError, match="missing label values"):
        c.inc()
    with pytest.raises(ValueError, match="Incorrect label count"):
        c.labels("a", "b")
    with pytest.raises(ValueError, match="Incorrect label names"):
        c.labels(other="a")
    with pytest.raises(ValueError, match="both"):
        c.labels("a", kind="b")
    with pytest.raises(ValueError, match="non-negative"):
        c.labels("a").inc(-1)
    with pytest.raises(ValueError, match="whole number"):
        c.labels("a").inc(0.5)
    with pytest.raises(ValueError, match="No label names"):
        Counter("unlabelled", "x").labels("a")
    with pytest.raises(perfabi.WriterError) as e:
        Counter("refusing", "the same name again")
    assert e.value.code == "duplicate-name"
    with pytest.raises(perfabi.WriterError) as e:
        Counter("http:requests", "a colon")
    assert e.value.code == "bad-name"
    with pytest.raises(ValueError, match="at most 4"):
        Counter("wide", "x", ["a", "b", "c", "d", "e"])
    with pytest.raises(ValueError, match="reader's"):
        Counter("per_cpu", "x", ["cpu"])
    with pytest.raises(ValueError, match="unit"):
        Counter("furlongs", "x", unit="furlongs")
    with pytest.raises(ValueError, match="Invalid multiprocess mode"):
        Gauge("modal", "x", multiprocess_mode="median")
    with pytest.raises(ValueError, match="seconds"):
        Gauge("untimed", "x").time()
    with pytest.raises(ValueError, match="whole number"):
        Histogram("fractional", "x")  # seconds-sized buckets, no seconds
    h = Histogram("sizes", "x", buckets=[1, 2])
    with pytest.raises(ValueError, match="negative"):
        h.observe(-1)
    with pytest.raises(perfabi.WriterError):
        Counter("spaced", "x", ["k"]).labels("has space").inc()
    # Nothing refused above changed a value.
    assert values("refusing") == {"a": 0}


def test_threads_add_exactly() -> None:
    c = Counter("threaded", "From many threads", ["worker"])
    h = Histogram("threaded_sizes", "x", buckets=[10])
    start = threading.Barrier(8)

    def work(i: int) -> None:
        start.wait()
        child = c.labels(str(i % 2))  # two threads race to make each child
        for _ in range(5000):
            child.inc(3)
            h.observe(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert values("threaded") == {"0": 60_000, "1": 60_000}
    got = values("threaded_sizes")[""]
    assert (got.count, got.sum) == (40_000, 5000 * sum(range(8)))


def test_fork_child_gets_its_own_segment() -> None:
    c = Counter("forked", "Across fork", ["side"])
    c.labels("both").inc(5)
    g = Gauge("forked_level", "Across fork")
    g.set(9)
    parent_path = client.segment_path()
    to_parent_r, to_parent_w = os.pipe()
    to_child_r, to_child_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its segment, wait to be read
        try:
            c.labels("both").inc(7)
            c.labels("child").inc(1)
            g.inc(2)
            os.write(to_parent_w, client.segment_path().encode())
            os.read(to_child_r, 1)
        finally:
            os._exit(0)
    try:
        child_path = os.read(to_parent_r, 4096).decode()
        assert child_path and child_path != parent_path
        assert f".{pid}." in child_path
        # The child's metrics are the parent's families, from zero.
        assert values("forked", child_path) == {"both": 7, "child": 1}
        assert values("forked_level", child_path) == {"": 2}
        # The parent's segment is untouched by the child.
        assert values("forked") == {"both": 5}
        assert values("forked_level") == {"": 9}
        c.labels("both").inc()
        assert values("forked") == {"both": 6}
    finally:
        os.write(to_child_w, b"x")
        _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    for fd in (to_parent_r, to_parent_w, to_child_r, to_child_w):
        os.close(fd)


def test_a_fork_child_never_keeps_its_dead_parent_alive() -> None:
    """A child of fork() lets go of its copy of the parent's liveness lock
    (spec §10): a parent killed while its child lives is dead for readers
    (its gauge gone from the directory's merge), the child still live."""
    assert _DIR is not None
    to_test_r, to_test_w = os.pipe()
    parent = os.fork()
    if parent == 0:  # dies by SIGKILL (never closes) while its child lives
        try:
            g = Gauge(
                "orphan_level", "Across a parent's death", multiprocess_mode="livesum"
            )
            g.set(1)
            child = os.fork()
            if child == 0:
                g.set(2)
                os.write(to_test_w, f"{os.getpid()}\n".encode())
                time.sleep(60)
                os._exit(0)
            os.write(to_test_w, f"{os.getpid()}\n".encode())
            time.sleep(60)
        finally:
            os._exit(1)
    said = b""
    deadline = time.monotonic() + 30
    while said.count(b"\n") < 2 and time.monotonic() < deadline:
        said += os.read(to_test_r, 64)
    pids = [int(p) for p in said.split()]
    assert parent in pids and len(pids) == 2, said
    (child,) = [p for p in pids if p != parent]
    directory = _DIR

    def level() -> dict[str, Any]:
        read = perfabi.Directory(directory).read()
        return {v.instance.name: v.total for v in read.family("orphan_level").values}

    try:
        assert level() == {"": 3}, "both alive"
        os.kill(parent, 9)
        os.waitpid(parent, 0)
        deadline = time.monotonic() + 30
        while level() != {"": 2} and time.monotonic() < deadline:
            time.sleep(0.01)
        assert level() == {"": 2}, "the killed parent's gauge is gone, the child's live"
    finally:
        os.kill(child, 9)
        for fd in (to_test_r, to_test_w):
            os.close(fd)


POOLED = None


def pooled_work(n: int) -> tuple[int, str]:
    """A pool worker's task: `n` increments of the pooled counter."""
    assert POOLED is not None
    for _ in range(n):
        POOLED.labels("task").inc()
    return os.getpid(), client.segment_path()


def test_prefork_pool_workers_count_apart() -> None:
    global POOLED
    POOLED = Counter("pooled", "Counted by a pre-forked pool", ["who"])
    POOLED.labels("task").inc(1000)
    amounts = list(range(1, 41))
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(3) as pool:
        done = pool.map(pooled_work, amounts, chunksize=1)
        paths = {path for _, path in done}
        assert len({pid for pid, _ in done}) == len(paths)
        assert client.segment_path() not in paths
        # Read while the workers live: every count is in one of them.
        total = sum(values("pooled", p).get("task", 0) for p in paths)
    assert total == sum(amounts)
    assert values("pooled") == {"task": 1000}


def test_readme_example_writes_what_it_did(tmp_path: Path) -> None:
    example = Path(__file__).parent.parent / "examples" / "job_worker.py"
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, str(example), "--jobs", "20"],
        env={**os.environ, "PERFABI_DIR": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    path = Path(out.stdout.strip())
    assert path.parent == tmp_path
    assert path.name.startswith("job_worker.")
    # The worker has exited: its values are final.
    with perfabi.Segment(str(path), require_live=False) as seg:
        jobs = {v.instance.name: v.total for v in seg.read("jobs_processed").values}
        lat = seg.read("job_duration_seconds").values[0].total
        in_flight = seg.read("jobs_in_flight").values[0].total
    assert jobs == {"slow": 5, "fast": 15}
    assert isinstance(lat, perfabi.Histogram)
    assert lat.count == 20 and lat.sum > 0
    assert in_flight == 0


def test_fork_child_without_a_segment_never_writes_the_parents(tmp_path: Path) -> None:
    c = Counter("forked_unplaced", "Across a fork whose child has no directory")
    c.inc(3)
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    saved = client._PROCESS.directory
    # The child's segment would go under a regular file: it cannot be made.
    client._PROCESS.directory = str(blocker / "segments")
    r, w = os.pipe()
    try:
        pid = os.fork()
        if pid == 0:
            try:
                try:
                    c.inc(100)
                    os.write(w, b"wrote")
                except perfabi.WriterError as e:
                    os.write(w, ("refused " + str(e)).encode())
            finally:
                os._exit(0)
    finally:
        client._PROCESS.directory = saved
    said = os.read(r, 4096).decode()
    _, status = os.waitpid(pid, 0)
    os.close(r)
    os.close(w)
    assert said.startswith("refused this process, a child of fork(), has no segment"), said
    assert values("forked_unplaced") == {"": 3}
