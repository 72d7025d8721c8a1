"""What perfabi raises: for paths that are not a trusted segment, for a
closed Segment, and the exception hierarchy itself."""

from __future__ import annotations

import os
import pickle
import shutil
import threading
import time
from pathlib import Path
from typing import Callable, Iterator

import perfabi
import pytest
from support import ScriptedWriter


def test_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "none.seg"
    with pytest.raises(perfabi.NotFoundError) as e:
        perfabi.Segment(path)
    assert isinstance(e.value, FileNotFoundError)
    assert (e.value.code, e.value.transient) == ("not-found", True)
    assert str(e.value) == f"no segment at {path}: is the exporter running?"


def test_a_symbolic_link_is_not_followed(tmp_path: Path, writer: Path) -> None:
    link = tmp_path / "link.seg"
    link.symlink_to(writer)
    with pytest.raises(perfabi.SymlinkError) as e:
        perfabi.Segment(link)
    assert isinstance(e.value, perfabi.UntrustedError) and isinstance(e.value, PermissionError)
    assert (e.value.code, e.value.transient) == ("symlink", False)
    assert "links are not followed" in str(e.value)


def test_a_file_others_may_write_is_refused(tmp_path: Path, writer: Path) -> None:
    copy = tmp_path / "copy.seg"
    shutil.copyfile(writer, copy)
    copy.chmod(0o666)
    with pytest.raises(perfabi.UntrustedError) as e:
        perfabi.Segment(copy)
    assert e.value.code == "writable-by-others" and "chmod go-w" in str(e.value)


def test_another_users_file_is_read_only_if_trusted(tmp_path: Path, writer: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root: gives a segment file to another uid")
    other = 64123  # no account's (perfabi_test_harness::OTHER_UID)
    copy = tmp_path / "theirs.seg"
    shutil.copyfile(writer, copy)
    os.chown(copy, other, other)
    with pytest.raises(perfabi.UntrustedError) as e:
        perfabi.Segment(copy)
    assert e.value.code == "untrusted-owner" and f"uid {other}" in str(e.value)
    for trusted in (
        perfabi.Segment(copy, trust_uid=other),
        perfabi.Segment(copy, trust_uid=[1, other]),
        perfabi.Segment(copy, trust_anyone=True),
    ):
        assert trusted.info().owner == other
        # The header names a writer of another user than the file's: gone.
        with pytest.raises(perfabi.StaleError) as stale:
            trusted.snapshot()
        assert stale.value.dead
    values = perfabi.Segment(copy, trust_uid=other, require_live=False).snapshot()
    assert values.family("app.latency").family.kind == "histogram"


def test_what_cannot_be_a_segment(tmp_path: Path) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    short = tmp_path / "short"
    short.write_bytes(b"PERFABI\0")
    zeros = tmp_path / "zeros"
    zeros.write_bytes(bytes(8192))
    for path, cls, code in [
        (fifo, perfabi.NotASegmentError, "not-a-segment-file"),  # and no hang
        (tmp_path, perfabi.NotASegmentError, "not-a-segment-file"),
        (short, perfabi.NotASegmentError, "not-a-segment-file"),
        (zeros, perfabi.AbiError, "bad-magic"),
    ]:
        with pytest.raises(cls) as e:
            perfabi.Segment(path)
        assert (e.value.code, e.value.transient) == (code, False), path


def test_paths_as_the_os_module_takes_them(writer: Path) -> None:
    class BytesPath:
        def __fspath__(self) -> bytes:
            return os.fsencode(writer)

    paths: list[str | bytes | os.PathLike[str] | os.PathLike[bytes]] = [
        str(writer),
        writer,
        os.fsencode(writer),
        BytesPath(),
    ]
    for path in paths:
        with perfabi.Segment(path) as seg:
            assert seg.path == str(writer)
            assert seg.read("app.ticks").values
    # A name that is not UTF-8, as bytes and as os.fsdecode gives it.
    odd = os.fsencode(writer.parent) + b"/\xff\x1b.seg"
    for name in (odd, os.fsdecode(odd)):
        with pytest.raises(perfabi.NotFoundError):
            perfabi.Segment(name)
    for empty in ("", b""):
        with pytest.raises(perfabi.IoError, match="^the path is empty: name a file$"):
            perfabi.Segment(empty)
    with pytest.raises(ValueError, match="null byte"):
        perfabi.Segment(str(writer) + "\0x")
    with pytest.raises(TypeError, match="os.PathLike"):
        perfabi.Segment(5)  # type: ignore[arg-type]


def test_a_pseudo_file_is_not_a_segment() -> None:
    # A sysfs attribute: its size says a page, it holds a line.
    with pytest.raises(perfabi.NotASegmentError, match="fewer bytes than its size says"):
        perfabi.Segment("/sys/devices/system/cpu/online")


def test_trust_uid_must_be_uids(writer: Path) -> None:
    uids: list[int | list[int] | tuple[int] | Iterator[int]] = [
        0,
        [0, 1],
        (65534,),
        iter([4294967294]),
    ]
    for uid in uids:
        perfabi.Segment(writer, trust_uid=uid).close()
    bad: int | list[int]
    for bad in (2**40, -1, 4294967295, [1, 2**64]):
        with pytest.raises(ValueError, match="is not a uid"):
            perfabi.Segment(writer, trust_uid=bad)
    for wrong in (True, 1.5, "0", b"0", [1, "x"], object()):
        with pytest.raises(TypeError, match="trust_uid"):
            perfabi.Segment(writer, trust_uid=wrong)  # type: ignore[arg-type]


def test_bad_arguments(writer: Path) -> None:
    for busy_timeout in (-1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="busy_timeout"):
            perfabi.Segment(writer, busy_timeout=busy_timeout)
    with pytest.raises(TypeError):
        perfabi.Segment(writer, trust_uid="root")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        perfabi.Segment(writer, 0.5)  # type: ignore[call-arg, arg-type]


def test_a_closed_segment(writer: Path) -> None:
    with perfabi.Segment(writer) as seg:
        assert seg.read("app.ticks").values
        assert repr(seg) == f"perfabi.Segment({str(writer)!r})"
    with pytest.raises(ValueError, match="closed"):
        seg.snapshot()
    with pytest.raises(ValueError, match="closed"):
        seg.nr_cpus
    seg.close()  # again: nothing
    assert seg.path == str(writer)
    # Entering a closed Segment is refused, as entering a closed file is.
    with pytest.raises(ValueError, match="closed"):
        with seg:
            pass


def test_the_segment_default_path(writer: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PERFABI_SEGMENT", str(writer))
    assert perfabi.default_path() == str(writer)
    assert perfabi.Segment().path == str(writer)


def test_a_family_or_counter_deleted_between_reads_is_no_longer_there(scripted: ScriptedWriter) -> None:
    scripted.do("add app.doomed")
    scripted.do("add-counter app.flat")
    seg = perfabi.Segment(scripted.path)
    # The family's handle is kept for the next read, and found stale then.
    assert seg.read("app.doomed").instance().instance.labels == {"pid": "1"}
    assert seg.counter("app.flat").total == 0
    scripted.do("del app.doomed")
    scripted.do("del-counter app.flat")
    with pytest.raises(perfabi.NoSuchFamilyError):
        seg.read("app.doomed")
    with pytest.raises(perfabi.NoSuchCounterError):
        seg.counter("app.flat")


def read_while_deleted(scripted: ScriptedWriter, read: Callable[[], object], delete: str) -> BaseException:
    """What ``read()`` raises when what it reads is deleted during the
    read: after it was looked up, while it waits for CPU 0's block (made
    busy meanwhile)."""
    scripted.do("busy")
    outcome: list[BaseException] = []

    def reading() -> None:
        try:
            read()
        except BaseException as e:  # noqa: BLE001 -- checked below
            outcome.append(e)

    t = time.monotonic()
    reader = threading.Thread(target=reading)
    reader.start()
    time.sleep(0.5)  # it has looked the name up, and waits for CPU 0
    scripted.do(delete)
    scripted.do("idle")
    reader.join()
    assert time.monotonic() - t >= 0.5
    assert len(outcome) == 1, "the read did not fail"
    return outcome[0]


def test_a_family_or_counter_deleted_during_a_read_is_not_a_bad_segment(scripted: ScriptedWriter) -> None:
    scripted.do("add app.doomed")
    scripted.do("add-counter app.flat")
    seg = perfabi.Segment(scripted.path, busy_timeout=10.0)
    for read, delete in [
        (lambda: seg.read("app.doomed"), "del app.doomed"),
        (lambda: seg.counter("app.flat"), "del-counter app.flat"),
    ]:
        error = read_while_deleted(scripted, read, delete)
        # Not a malformed segment: what was read is gone; read it again.
        assert not isinstance(error, perfabi.AbiError), repr(error)
        assert isinstance(error, perfabi.UnknownInstanceError) and isinstance(error, KeyError), repr(error)
        assert (error.code, error.transient) == ("unknown-instance", True)
        assert "deleted" in str(error) and "again" in str(error)
    with pytest.raises(perfabi.NoSuchFamilyError):
        seg.read("app.doomed")
    with pytest.raises(perfabi.NoSuchCounterError):
        seg.counter("app.flat")


ERRORS = [
    perfabi.NotFoundError,
    perfabi.IoError,
    perfabi.UntrustedError,
    perfabi.SymlinkError,
    perfabi.RacedError,
    perfabi.NotASegmentError,
    perfabi.AbiError,
    perfabi.BusyError,
    perfabi.StaleError,
    perfabi.ClosedError,
    perfabi.TruncatedError,
    perfabi.HeaderChangedError,
    perfabi.NoSuchFamilyError,
    perfabi.NoSuchCounterError,
    perfabi.UnknownInstanceError,
]


@pytest.mark.parametrize("cls", ERRORS)
def test_every_error_is_a_perfabi_error_and_survives_pickling(cls: type[perfabi.Error]) -> None:
    e = cls("what to do", "some-code", True)
    assert isinstance(e, perfabi.Error) and isinstance(e, Exception)
    assert (str(e), e.message, e.code, e.transient) == ("what to do", "what to do", "some-code", True)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is cls and (str(back), back.code, back.transient) == ("what to do", "some-code", True)


def test_the_extra_fields_of_errors_survive_pickling() -> None:
    stale = pickle.loads(pickle.dumps(perfabi.StaleError("gone", "stale", True, pid=42, silent_for=1.5, dead=True)))
    assert (stale.pid, stale.silent_for, stale.dead) == (42, 1.5, True)
    io = pickle.loads(pickle.dumps(perfabi.IoError("denied", "io", False, errno=13)))
    assert io.errno == 13 and isinstance(io, OSError)
