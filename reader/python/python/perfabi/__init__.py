"""Read perfabi counter segments from Python, lock-free, at memory speed.

A writer (the perfabi kernel module, ``perfabi-exportd`` or any program
using the Rust writer) lays out a shared-memory segment; a
:class:`Segment` maps it read-only and reads any counter, family,
histogram or DAMON region with the Rust reader (``perfabi-reader``):
never a torn value, bounded waits for a busy writer (with the GIL
released), a restarted writer followed without re-opening, and a
truncated file an exception, never a crash::

    import perfabi

    with perfabi.Segment("/dev/shm/perfabi.seg") as seg:
        for fam in seg.snapshot().families:
            for v in fam.values:
                print(fam.family.name, v.instance.name, v.total)

Many processes' segments in one directory (``perfabi.client`` writes one
per process) are read as one by :class:`Directory`::

    with perfabi.Directory() as d:  # default_dir()
        for fam in d.read().families:
            for v in fam.values:
                print(fam.family.name, v.instance.name, v.total)

Errors are :class:`Error` and its subclasses (see :mod:`perfabi._errors`).
"""

from perfabi._errors import (
    AbiError,
    BusyError,
    ClosedError,
    Error,
    HeaderChangedError,
    IoError,
    NoSuchCounterError,
    NoSuchFamilyError,
    NotASegmentError,
    NotFoundError,
    RacedError,
    StaleError,
    SymlinkError,
    TruncatedError,
    UnknownInstanceError,
    UntrustedError,
    WriterError,
)
from perfabi._perfabi import Directory, Segment, __version__, default_dir, default_path
from perfabi._types import (
    Aggregation,
    Counter,
    Damon,
    DirectoryRead,
    Family,
    FamilyValues,
    Histogram,
    Info,
    Instance,
    InstanceValues,
    Kind,
    Problem,
    Region,
    Snapshot,
    Stats,
    Unit,
    Value,
    ValueType,
)

__all__ = [
    "AbiError",
    "Aggregation",
    "BusyError",
    "ClosedError",
    "Counter",
    "Damon",
    "Directory",
    "DirectoryRead",
    "Error",
    "Family",
    "FamilyValues",
    "HeaderChangedError",
    "Histogram",
    "Info",
    "Instance",
    "InstanceValues",
    "IoError",
    "Kind",
    "NoSuchCounterError",
    "NoSuchFamilyError",
    "NotASegmentError",
    "NotFoundError",
    "Problem",
    "RacedError",
    "Region",
    "Segment",
    "Snapshot",
    "StaleError",
    "Stats",
    "SymlinkError",
    "TruncatedError",
    "Unit",
    "UnknownInstanceError",
    "UntrustedError",
    "Value",
    "ValueType",
    "WriterError",
    "__version__",
    "default_dir",
    "default_path",
]
