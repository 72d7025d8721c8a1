"""The exceptions of :mod:`perfabi`: the Rust reader's errors, with the same
meaning.

Every one is a :class:`Error`, whose ``str()`` is the reader's message
(it says what to do; :class:`UnknownInstanceError`'s is the module's own), ``code`` the stable code of ``spec/PERFABI.md``
§11.6 (or of §8 for a malformed segment: ``"bad-magic"``,
``"unsupported-major"``, …) and ``transient`` whether a later read may
succeed by itself. Some are also the built-in exception that means the
same, so ``except FileNotFoundError`` or ``except KeyError`` work too::

    Error
    ├── NotFoundError (FileNotFoundError)   not-found
    ├── IoError (OSError)                   io
    ├── UntrustedError (PermissionError)    untrusted-owner, writable-by-others
    │   └── SymlinkError                    symlink, foreign-link
    ├── RacedError                          raced
    ├── NotASegmentError                    not-a-segment-file, sparse, too-large
    ├── AbiError                            a malformed segment or unknown ABI (§8)
    ├── BusyError                           busy-cpu, busy-metadata
    ├── StaleError                          stale
    ├── ClosedError                         closed
    ├── TruncatedError                      truncated-while-mapped
    ├── HeaderChangedError                  header-changed
    ├── NoSuchFamilyError (KeyError)        no-such-family
    ├── NoSuchCounterError (KeyError)       no-such-counter
    ├── UnknownInstanceError (KeyError)     unknown-instance
    └── WriterError (ValueError)            the Rust writer's refusal (§5 codes: duplicate-name, table-full, …; io)
"""

from __future__ import annotations

from typing import Any


class Error(Exception):
    """A read of a perfabi segment failed (the base of every perfabi
    exception)."""

    message: str
    """The reader's message, which says what to do."""
    code: str
    """The stable, hyphenated code (``spec/PERFABI.md`` §11.6)."""
    transient: bool
    """Whether a later read may succeed by itself (a busy, gone or
    restarting writer, a file being replaced)."""

    def __init__(self, message: str, code: str, transient: bool) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.transient = transient

    def __str__(self) -> str:
        # Not KeyError's repr() of the message.
        return self.message

    def _args(self) -> tuple[Any, ...]:
        return (self.message, self.code, self.transient)

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), self._args())


class NotFoundError(Error, FileNotFoundError):
    """Nothing exists at the path (is the writer running?)."""


class IoError(Error, OSError):
    """The segment could not be opened, inspected or mapped; ``errno`` is
    the system's error number, if there is one."""

    def __init__(
        self, message: str, code: str, transient: bool, errno: int | None = None
    ) -> None:
        super().__init__(message, code, transient)
        self.errno = errno

    def _args(self) -> tuple[Any, ...]:
        return (*super()._args(), self.errno)


class UntrustedError(Error, PermissionError):
    """The segment file belongs to a user this reader does not trust (see
    ``trust_uid`` and ``trust_anyone``), or others than its owner may write
    it."""


class SymlinkError(UntrustedError):
    """The path is a symbolic link, or leads through another user's
    symbolic link: readers do not follow them; give the segment's own
    path."""


class RacedError(Error):
    """The file at the path was replaced while it was being opened; try
    again."""


class NotASegmentError(Error):
    """What is at the path cannot be read as a segment: a directory, a FIFO,
    a device other than the kernel module's, a file too short, with a hole,
    or larger than the reader's limit."""


class AbiError(Error):
    """The segment is malformed or of an ABI this reader does not know
    (``code`` names the broken rule, such as ``"bad-magic"``,
    ``"bad-histogram"`` or ``"unsupported-major"``)."""


class BusyError(Error):
    """A consistent read did not succeed within ``busy_timeout``: the
    writer is updating too fast, or died mid-update."""


class StaleError(Error):
    """The writer is gone (``dead``: its process no longer exists) or
    silent; ``pid`` is its process id (0: unknown), ``silent_for`` the
    seconds since its last heartbeat. A writer started again at the path is
    followed by the next read."""

    def __init__(
        self,
        message: str,
        code: str,
        transient: bool,
        pid: int = 0,
        silent_for: float = 0.0,
        dead: bool = False,
    ) -> None:
        super().__init__(message, code, transient)
        self.pid = pid
        self.silent_for = silent_for
        self.dead = dead

    def _args(self) -> tuple[Any, ...]:
        return (*super()._args(), self.pid, self.silent_for, self.dead)


class ClosedError(Error):
    """The writer closed the segment cleanly; its last values are final. A
    writer started again at the path is followed by the next read."""


class TruncatedError(Error):
    """The segment file was truncated under the reader; the read's data was
    discarded. Reading again opens the file again."""


class HeaderChangedError(Error):
    """The segment's header changed under the reader (zeroed, overwritten
    or created again); the read's data was discarded. Reading again maps
    the segment again."""


class NoSuchFamilyError(Error, KeyError):
    """No live metric family has this name."""


class NoSuchCounterError(Error, KeyError):
    """No live flat (ABI 1.0) counter has this name."""


class UnknownInstanceError(Error, KeyError):
    """The family or counter being read was deleted, or the segment created
    again by a new writer, during the read (after it was looked up). It is
    transient: read it again, which looks it up afresh (NoSuchFamilyError or
    NoSuchCounterError if it is gone for good)."""


class WriterError(Error, ValueError):
    """The writer (:mod:`perfabi.client`) refused a metric, a label or a
    segment: the Rust writer's message and code (``duplicate-name``,
    ``bad-name``, ``table-full``, ``io``, …); nothing was changed."""
