"""perfabi.Directory: a directory of many processes' segments read as one
(issue 32 item 4, spec/PERFABI.md §15), the writers being separate Python
processes that use perfabi.client, each killed or left running as the test
says."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Iterator

import perfabi
import pytest
from support import eventually

# One worker process: its metrics scaled by k, then "ready", then it waits
# for its stdin to end. KIND is the jobs metric's kind: "counter", or
# "gauge" (a conflict with a counter; another help would not be one, spec
# §15.4).
WORKER = """
import sys
from perfabi import client
from perfabi.client import Counter, Gauge, Histogram
directory, name, k, kind = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
client.configure(directory=directory, name=name)
if kind == "counter":
    jobs = Counter("jobs", "Jobs done", ["kind"])
else:
    jobs = Gauge("jobs", "Jobs done", ["kind"], multiprocess_mode="livesum")
jobs.labels("build").inc(10 * k)
jobs.labels("test").inc(3 * k)
Gauge("busy", "Busy workers", multiprocess_mode="livesum").set(k)
Gauge("queue", "Longest queue", multiprocess_mode="livemax").set(5 * k)
sizes = Histogram("sizes", "Sizes seen", buckets=[10, 100])
for v in (5, 50, 500):
    for _ in range(k):
        sizes.observe(v)
print("ready", flush=True)
sys.stdin.read()
"""


class Worker:
    """A writer process in a directory; stopped (or killed) by the test."""

    def __init__(self, directory: Path, name: str, k: int, kind: str = "counter") -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-c", WORKER, str(directory), name, str(k), kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line == "ready\n", f"worker {name} said {line!r}"
        self.name = f"{name}.{self.proc.pid}"

    def kill(self) -> None:
        """SIGKILL, and reaped: its pid no longer names a process."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=60)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for w in started:
        w.stop()


def totals(read: perfabi.DirectoryRead, name: str) -> dict[str, perfabi.Value]:
    """Family ``name``'s merged values by instance and labels."""
    out: dict[str, perfabi.Value] = {}
    for v in read.family(name).values:
        labels = ",".join(f"{k}={x}" for k, x in v.instance.labels.items())
        out[v.instance.name + (f"{{{labels}}}" if labels else "")] = v.total
        assert v.per_cpu == ()
    return out


def test_workers_merge_exactly_and_a_killed_workers_counts_stay(
    tmp_path: Path, workers: list[Worker]
) -> None:
    d = tmp_path / "segs"
    workers.extend(Worker(d, f"w{k}", k) for k in (1, 2, 4))
    with perfabi.Directory(d) as directory:
        assert directory.path == str(d)
        r = directory.read()
        assert r.segments == 3 and r.problems == ()
        assert totals(r, "jobs") == {"build": 70, "test": 21}
        assert totals(r, "busy") == {"": 7}
        assert totals(r, "queue") == {"": 20}
        sizes = r.family("sizes").instance("").total
        assert sizes == perfabi.Histogram(count=21, sum=555 * 7, buckets=(7, 7, 7))
        # Shaped as a snapshot's: the family's metadata, the gauge's mode.
        assert r.family("busy").family.gauge_mode == "sum"
        assert r.family("jobs").family.kind == "counter"
        assert r.family("jobs").generation == 0

        # w4 killed: its counts stay at every read; its gauges go once the
        # reader sees it dead (it looks at a writer's process once a
        # second).
        workers[2].kill()

        def gauges_gone() -> perfabi.DirectoryRead | None:
            r = directory.read()
            assert totals(r, "jobs") == {"build": 70, "test": 21}
            assert r.family("sizes").instance("").total == sizes
            return r if totals(r, "busy") == {"": 3} else None

        r = eventually("the killed worker's gauges gone", gauges_gone)
        assert totals(r, "queue") == {"": 10}


def test_a_writer_label_keeps_each_writer_apart(tmp_path: Path, workers: list[Worker]) -> None:
    d = tmp_path / "segs"
    workers.extend(Worker(d, f"w{k}", k) for k in (1, 2))
    r = perfabi.Directory(d, writer_label="worker").read()
    a, b = workers[0].name, workers[1].name
    assert totals(r, "jobs") == {
        f"build{{worker={a}}}": 10,
        f"build{{worker={b}}}": 20,
        f"test{{worker={a}}}": 3,
        f"test{{worker={b}}}": 6,
    }
    assert totals(r, "busy") == {f"{{worker={a}}}": 1, f"{{worker={b}}}": 2}


def test_a_conflicting_family_and_a_hostile_file_spoil_only_themselves(
    tmp_path: Path, workers: list[Worker]
) -> None:
    d = tmp_path / "segs"
    workers.append(Worker(d, "good", 1))
    workers.append(Worker(d, "other", 2, kind="gauge"))
    link = d / "evil.1.0123456789abcdef.perfabi"
    os.symlink(tmp_path / "elsewhere", link)
    r = perfabi.Directory(d).read()
    assert r.segments == 2
    by_code = {p.code: p for p in r.problems}
    assert set(by_code) == {"family-conflict", "symlink"}, r.problems
    conflict = by_code["family-conflict"]
    assert conflict.family == "jobs"
    assert "good." in conflict.message and "other." in conflict.message
    assert "kind" in conflict.message and "gauge" in conflict.message
    assert by_code["symlink"].file == str(link) and by_code["symlink"].family is None
    with pytest.raises(KeyError):
        r.family("jobs")
    # Everything else is served, merged over both writers.
    assert totals(r, "busy") == {"": 3}
    assert r.family("sizes").instance("").total == perfabi.Histogram(
        count=9, sum=555 * 3, buckets=(3, 3, 3)
    )


def test_a_refused_directory_raises_the_modules_errors(tmp_path: Path) -> None:
    with pytest.raises(perfabi.NotFoundError):
        perfabi.Directory(tmp_path / "absent")
    open_to_all = tmp_path / "open"
    open_to_all.mkdir()
    open_to_all.chmod(0o777)
    with pytest.raises(perfabi.UntrustedError) as e:
        perfabi.Directory(open_to_all)
    assert e.value.code == "writable-by-others"
    with pytest.raises(ValueError, match="writer_label"):
        perfabi.Directory(tmp_path, writer_label="")
    with pytest.raises(ValueError, match="busy_timeout"):
        perfabi.Directory(tmp_path, busy_timeout=-1)
    d = perfabi.Directory(tmp_path)
    assert d.read().families == ()
    assert repr(d) == f"perfabi.Directory({str(tmp_path)!r})"
    d.close()
    d.close()
    with pytest.raises(ValueError, match="closed"):
        d.read()
    with pytest.raises(ValueError, match="closed"):
        with d:
            pass


def test_default_dir_is_where_client_writes(tmp_path: Path) -> None:
    env = {**os.environ, "PERFABI_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", "import perfabi; print(perfabi.default_dir())"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == str(tmp_path)


def test_the_readme_directory_example(tmp_path: Path, workers: list[Worker]) -> None:
    d = tmp_path / "segs"
    workers.extend(Worker(d, f"w{k}", k) for k in (1, 2))
    example = Path(__file__).parent.parent / "examples" / "read_directory.py"
    out = subprocess.run(
        [sys.executable, str(example), str(d)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = sorted(out.stdout.splitlines())
    assert lines == [
        "busy  {} 3",
        "jobs build {} 30",
        "jobs test {} 9",
        "queue  {} 10",
        "sizes  {} Histogram(count=9, sum=1665, buckets=(3, 3, 3))",
    ], out.stdout
    assert out.stderr == ""


def test_threads_share_a_directory(tmp_path: Path, workers: list[Worker]) -> None:
    d = tmp_path / "segs"
    workers.extend(Worker(d, f"w{k}", k) for k in (1, 2))
    directory = perfabi.Directory(d)
    got: list[dict[str, perfabi.Value]] = []
    failed: list[BaseException] = []

    def reads() -> None:
        try:
            for _ in range(20):
                got.append(totals(directory.read(), "jobs"))
        except BaseException as e:  # noqa: BLE001 -- checked below
            failed.append(e)

    threads = [threading.Thread(target=reads) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failed == []
    assert got == [{"build": 30, "test": 9}] * 80
