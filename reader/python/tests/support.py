"""Helpers of the perfabi tests: the writers they read, as child processes.

The cargo test that runs pytest (``reader/python/tests/venv.rs``) says
where the writers are: ``$PERFABI_TEST_EXPORTD`` (perfabi-exportd),
``$PERFABI_TEST_WRITER`` (the cargo test binary as a writer of families,
histograms and DAMON regions: a JSON argv), ``$PERFABI_TEST_RECORD`` (a
DAMON record for the exporter to replay) and ``$PERFABI_TEST_EXAMPLE``
(the README's example).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, TypeVar

import perfabi
import pytest

T = TypeVar("T")
E = TypeVar("E", bound=BaseException)


def env(name: str) -> str:
    """``$name``, which the cargo test sets."""
    value = os.environ.get(name)
    if value is None:
        pytest.fail(f"${name} is unset: run these tests with `cargo test -p perfabi-python`")
    return value


def eventually(what: str, attempt: Callable[[], T | None], limit: float = 60.0) -> T:
    """``attempt()`` again until it returns something other than ``None``
    (a perfabi error counts as not yet), for at most ``limit`` seconds."""
    end = time.monotonic() + limit
    last: perfabi.Error | None = None
    while True:
        try:
            got = attempt()
            if got is not None:
                return got
        except perfabi.Error as e:
            last = e
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {limit} s (last error: {last})")
        time.sleep(0.02)


def eventually_raises(what: str, cls: type[E], attempt: Callable[[], object], limit: float = 60.0) -> E:
    """``attempt()`` again until it raises ``cls``, for at most ``limit``
    seconds; the exception."""
    end = time.monotonic() + limit
    while True:
        try:
            attempt()
        except cls as e:
            return e
        if time.monotonic() > end:
            raise AssertionError(f"{what}: no {cls.__name__} within {limit} s")
        time.sleep(0.02)


def cache_sizes(seg: perfabi.Segment) -> tuple[int, int]:
    """How many family handles and Family objects ``seg`` keeps (a hook of
    the native module for the tests, not in the stubs)."""
    handles, families = getattr(seg, "_cache_sizes")()
    assert isinstance(handles, int) and isinstance(families, int)
    return handles, families


class Child:
    """A child process, killed and reaped when the test ends."""

    def __init__(self, argv: list[str], extra_env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            argv,
            env={**os.environ, **(extra_env or {})},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def send(self, sig: signal.Signals) -> None:
        self.proc.send_signal(sig)

    def stop(self, sig: signal.Signals = signal.SIGKILL) -> int:
        """Sends ``sig`` and waits for the end; the exit status."""
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=10)


def opened_by(path: Path, pid: int) -> perfabi.Segment | None:
    """A Segment of ``path`` once the writer ``pid`` wrote it."""
    seg = perfabi.Segment(path)
    return seg if seg.info().writer_pid == pid else None


class Exportd:
    """perfabi-exportd writing ``path`` every 0.1 s and replaying a DAMON
    record ten times faster than recorded; started again by ``start``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.record = Path(env("PERFABI_TEST_RECORD"))
        self.child: Child | None = None
        self.start()

    def start(self) -> None:
        argv = [env("PERFABI_TEST_EXPORTD"), "--path", str(self.path), "--interval", "0.1"]
        argv += ["--replay", str(self.record), "--replay-speed", "10"]
        self.child = Child(argv)
        pid = self.child.pid
        seg = eventually("perfabi-exportd writes its segment", lambda: opened_by(self.path, pid))
        eventually("its families are there", lambda: seg.family("kernel.cpu.time"))
        seg.close()

    @property
    def pid(self) -> int:
        assert self.child is not None
        return self.child.pid

    def send(self, sig: signal.Signals) -> None:
        assert self.child is not None
        self.child.send(sig)

    def stop(self, sig: signal.Signals = signal.SIGKILL) -> int:
        """Stops it with ``sig``; its exit status."""
        assert self.child is not None
        status = self.child.stop(sig)
        self.child = None
        return status


def writer_argv() -> list[str]:
    argv = json.loads(env("PERFABI_TEST_WRITER"))
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv)
    return argv


def writer_env(path: Path, mode: str) -> dict[str, str]:
    return {
        env("PERFABI_TEST_WRITER_PATH_ENV"): str(path),
        env("PERFABI_TEST_WRITER_MODE_ENV"): mode,
    }


def live_writer(path: Path) -> Child:
    """The test's own writer, updating its families (``EXPECTED``) from two
    threads and publishing ``AGGREGATION`` every 100 ms; returns once
    they are all there."""
    child = Child(writer_argv(), writer_env(path, "live"))
    seg = eventually("the test writer writes its segment", lambda: opened_by(path, child.pid))
    eventually("its families are there", lambda: seg.family("app.size"))
    seg.close()
    return child


class ScriptedWriter:
    """The test writer doing what it is told, one line at a time (venv.rs,
    ``scripted``): ``add NAME``/``del NAME`` a family of one instance,
    ``add-counter NAME``/``del-counter NAME`` a flat counter, ``busy``/``idle``
    CPU 0's block. Its values never move."""

    ANSWER = "perfabi-writer> "

    def __init__(self, path: Path) -> None:
        self.path = path
        self.proc = subprocess.Popen(
            writer_argv(),
            env={**os.environ, **writer_env(path, "scripted")},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self._answer()

    def do(self, command: str) -> None:
        """Has the writer do ``command``; fails the test if it could not."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        self._answer(command)

    def _answer(self, command: str = "start") -> None:
        assert self.proc.stdout is not None
        # libtest prints its own lines on the same output.
        for line in self.proc.stdout:
            _, found, answer = line.partition(self.ANSWER)
            if found:
                assert answer.strip() == "ok", f"{command}: {answer.strip()}"
                return
        raise AssertionError(f"{command}: the scripted writer ended ({self.proc.wait(timeout=10)})")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=10)
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None:
                pipe.close()


def stuck_writer(path: Path) -> None:
    """Writes ``EXPECTED``'s families once, then dies mid-update: CPU 0's
    block left busy, the segment not closed."""
    subprocess.run(
        writer_argv(),
        env={**os.environ, **writer_env(path, "stuck")},
        stdout=subprocess.DEVNULL,
        check=True,
        timeout=30,
    )


# What the test writer (venv.rs, `register`) registers: name -> (help,
# kind, unit text, dimension, value type, buckets, {instance: labels}).
EXPECTED: dict[
    str,
    tuple[str, str, str, str, str, tuple[int | None, ...] | None, dict[str, dict[str, str]]],
] = {
    "app.ticks": ("", "counter", "count", "", "u64", None, {"": {}}),
    "app.requests": (
        "Requests served",
        "counter",
        "count",
        "route",
        "u64",
        None,
        {"get": {"method": "GET"}, "put": {"method": "PUT", "idempotent": "yes"}},
    ),
    "app.temperature": ("Temperature offset", "gauge", "", "sensor", "i64", None, {"cpu": {}, "gpu": {}}),
    "app.queue_depth": ("Deepest queue", "peak", "count", "", "u64", None, {"": {}}),
    "app.latency": (
        "Request latency",
        "histogram",
        "ns",
        "route",
        "u64",
        (1000, 10000, 100000, None),
        {"get": {}, "put": {}},
    ),
    "app.size": ("Request size", "histogram", "KiB", "", "u64", (1024, 2048, 4096, None), {"": {}}),
}

# The aggregation the test writer publishes (venv.rs, `aggregation`).
AGGREGATION = perfabi.Aggregation(
    monitor_id=7,
    target_id=1,
    aggregation=0,  # the writer numbers them
    sample_us=5000,
    aggr_us=100000,
    regions=(
        perfabi.Region(start=0x100000, end=0x300000, nr_accesses=20, age=3, frequency=1.0),
        perfabi.Region(start=0x300000, end=0x800000, nr_accesses=5, age=1, frequency=0.25),
    ),
)


def wrapped(total: int, value_type: str) -> int:
    """``total`` as the reader sums: modulo 2**64, read as signed for
    ``i64``."""
    total %= 1 << 64
    if value_type == "i64" and total >= 1 << 63:
        total -= 1 << 64
    return total


def check_totals(snap: perfabi.Snapshot) -> int:
    """Checks that every instance's total is its per-CPU values combined
    as the family's kind says; the number of instances checked."""
    checked = 0
    for fv in snap.families:
        f = fv.family
        for v in fv.values:
            assert len(v.per_cpu) == snap.nr_cpus, f.name
            if f.kind == "histogram":
                assert isinstance(v.total, perfabi.Histogram)
                hs = [h for h in v.per_cpu if isinstance(h, perfabi.Histogram)]
                assert len(hs) == snap.nr_cpus
                assert v.total.count == sum(h.count for h in hs), f.name
                assert v.total.buckets == tuple(map(sum, zip(*(h.buckets for h in hs)))), f.name
            else:
                values = [x for x in v.per_cpu if isinstance(x, int)]
                assert len(values) == snap.nr_cpus and isinstance(v.total, int)
                if f.kind == "peak":
                    assert v.total == max(values), f.name
                else:
                    assert v.total == wrapped(sum(values), f.value_type), f.name
            checked += 1
    return checked
