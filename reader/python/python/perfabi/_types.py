"""The values a :class:`perfabi.Segment` returns: plain, frozen dataclasses.

The native module builds them from what the Rust reader read; they hold no
reference to the segment and stay valid after it is closed. They are
immutable, so a Segment shares a family's objects between its reads, and
hashable: sequences are tuples, labels a read-only :class:`Labels`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, Literal, NoReturn, TypeVar, Union


Kind = Literal["counter", "gauge", "peak", "histogram"]
"""What a family's values are: a counter (the total is the sum over CPUs,
it only grows), a gauge (a level, summed over CPUs), a peak (a high-water
mark per CPU, the total is the maximum) or a histogram."""

ValueType = Literal["u64", "i64"]
"""How a value's 8 bytes are read: unsigned, or signed two's complement."""


@dataclass(frozen=True)
class Unit:
    """A family's unit (PCP's ``pmUnits``: powers of space, time and count,
    each with a scale).

    ``text`` is its short name (``"bytes"``, ``"KiB"``, ``"us"``,
    ``"count"``, ``"bytes/s"``; empty for a plain number). A value times
    ``factor`` is in ``base`` units (``"bytes"``, ``"seconds"``,
    ``"pages"``, ``"ratio"``, ``"bytes_per_second"``; empty for a plain
    number or count): ``KiB`` is ``("bytes", 1024.0)``, ``us`` is
    ``("seconds", 1e-06)``.
    """

    text: str
    dim_space: int
    dim_time: int
    dim_count: int
    scale_space: int
    scale_time: int
    scale_count: int
    quantity: Literal["plain", "pages", "ratio", "unknown"]
    base: str
    factor: float


class Labels(Mapping[str, str]):
    """An instance's extra labels, key to value: a read-only mapping
    (``dict(labels)`` is a copy to change), hashable, and equal to any
    mapping with the same items, a dict included."""

    __slots__ = ("_items",)
    _items: dict[str, str]

    def __init__(self, items: Mapping[str, str] | Iterable[tuple[str, str]] = ()) -> None:
        # A copy: the caller's mapping may change later.
        object.__setattr__(self, "_items", dict(items))

    def __getitem__(self, key: str) -> str:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Labels):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == dict(other.items())
        return NotImplemented

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return f"Labels({self._items!r})"

    def __setattr__(self, name: str, value: object) -> NoReturn:
        raise AttributeError(f"Labels are read-only: cannot set {name}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (Labels, (self._items,))


@dataclass(frozen=True)
class Instance:
    """One instance of a family: its value of the family's dimension
    (``"sda"``; ``""`` for the only instance of a family without one), its
    instance number (stable for that name within the family) and its extra
    labels (any mapping given is kept as a read-only :class:`Labels`
    copy)."""

    name: str
    id: int
    labels: Mapping[str, str]

    def __post_init__(self) -> None:
        if not isinstance(self.labels, Labels):
            object.__setattr__(self, "labels", Labels(self.labels))


@dataclass(frozen=True)
class Family:
    """A metric family with its live instances.

    ``buckets`` are a histogram's inclusive upper bounds, the last ``None``
    (``+Inf``); ``None`` for the other kinds. ``unit_text`` is a flat
    (ABI 1.0) counter's own unit string, else ``unit.text``. A flat counter
    is a family of one instance named ``""``.
    """

    name: str
    help: str
    kind: Kind
    unit: Unit
    unit_text: str
    dimension: str
    value_type: ValueType
    buckets: tuple[int | None, ...] | None
    instances: tuple[Instance, ...]
    gauge_mode: Literal["sum", "max", "min", "all"] | None = None
    """A gauge's mode: how a reader of a segment directory merges its
    writers' values (``spec/PERFABI.md`` §15); ``None`` for the other
    kinds."""

    def instance(self, name: str = "") -> Instance:
        """The instance called ``name``; ``KeyError`` if there is none."""
        return _named(self.instances, name, lambda i: i.name)


@dataclass(frozen=True)
class Histogram:
    """A histogram's observations, their sum (wrapping at 2**64) and the
    observations in each bucket (not cumulative; the last is ``+Inf``)."""

    count: int
    sum: int
    buckets: tuple[int, ...]


Value = Union[int, Histogram]
"""One value: an int (a counter, gauge or peak), or a :class:`Histogram`."""


@dataclass(frozen=True)
class InstanceValues:
    """One instance's values: on each CPU, and the total over CPUs (the
    sum; the maximum for a peak; bucket by bucket for a histogram)."""

    instance: Instance
    total: Value
    per_cpu: tuple[Value, ...]


@dataclass(frozen=True)
class FamilyValues:
    """The values of one family's instances, read in one metadata
    generation (each CPU's values one consistent copy)."""

    family: Family
    generation: int
    values: tuple[InstanceValues, ...]

    def instance(self, name: str = "") -> InstanceValues:
        """The values of the instance called ``name``; ``KeyError`` if there
        is none."""
        return _named(self.values, name, lambda v: v.instance.name)


@dataclass(frozen=True)
class Snapshot:
    """Every family's values in one consistent generation of the segment
    (of incarnation ``epoch``) with ``nr_cpus`` per-CPU blocks."""

    generation: int
    epoch: int
    nr_cpus: int
    families: tuple[FamilyValues, ...]

    def family(self, name: str) -> FamilyValues:
        """The values of the family called ``name``; ``KeyError`` if there
        is none."""
        return _named(self.families, name, lambda f: f.family.name)


@dataclass(frozen=True)
class Problem:
    """Something a :class:`perfabi.Directory` read left out; it spoils only
    itself. ``code`` is the reader's code of a file refused or unreadable
    (``"symlink"``, ``"untrusted-owner"``, ``"sparse"``... as the
    exceptions' ``code``), ``"family-conflict"`` for a family whose
    identity metadata differ between two files (``family`` names it;
    ``message`` both files and what differs: a family refused, if both
    writers live, else this file's counts of it left out), or
    ``"limit"``. ``file`` is the file it
    concerns (the directory, for a limit); ``message`` one line."""

    file: str
    family: str | None
    code: str
    message: str


@dataclass(frozen=True)
class DirectoryRead:
    """One read of a :class:`perfabi.Directory`: every family merged over
    its ``segments`` segment files (``spec/PERFABI.md`` §15.4), shaped as a
    :class:`Snapshot`'s, and the ``problems`` met.

    Each family's values are its merged series: with a ``writer_label``,
    each writer's apart under that label. ``total`` is the merged value
    (counters and histograms summed over every writer, live or dead;
    gauges over live writers by the family's ``gauge_mode``; peaks the
    largest); ``per_cpu`` is empty (the values are several files'), and
    ``generation`` 0 (no one segment's)."""

    families: tuple[FamilyValues, ...]
    problems: tuple[Problem, ...]
    segments: int

    def family(self, name: str) -> FamilyValues:
        """The values of the family called ``name``; ``KeyError`` if there
        is none (no file has it, or it was refused: see ``problems``)."""
        return _named(self.families, name, lambda f: f.family.name)


@dataclass(frozen=True)
class Counter:
    """A flat (ABI 1.0) counter: its unit string, semantics
    (``"counter"`` or ``"instant"``), value on each CPU and total."""

    name: str
    unit: str
    semantics: Literal["counter", "instant"]
    value_type: ValueType
    total: int
    per_cpu: tuple[int, ...]
    generation: int


@dataclass(frozen=True)
class Info:
    """The segment's header fields, and what the reader knows of its writer.

    ``liveness`` is ``"alive"``, ``"kernel"`` (the kernel module writes
    it), ``"closed"`` (closed cleanly), ``"silent"`` (no heartbeat for too
    long) or ``"dead"`` (its process is gone); ``silent_for`` is the time
    since the last heartbeat, in seconds, for the last two. ``owner`` is
    the uid of the file, ``origin`` ``"file"``, ``"kernel-device"`` or ``"kernel-map"``,
    ``mapped`` the bytes mapped.
    """

    abi_major: int
    abi_minor: int
    epoch: int
    generation: int
    metadata_busy: bool
    writer_pid: int
    writer_start_ns: int
    heartbeat_ns: int
    heartbeat_interval_ns: int
    flags: int
    nr_cpus: int
    max_instances: int
    damon_capacity: int
    segment_size: int
    liveness: Literal["alive", "kernel", "closed", "silent", "dead"]
    silent_for: float | None
    path: str | None
    mapped: int
    owner: int
    origin: Literal["file", "kernel-device", "kernel-map"]


@dataclass(frozen=True)
class Region:
    """One DAMON region: addresses ``start`` up to ``end`` (excluded), the
    samples of the aggregation interval that saw an access, the intervals
    it kept its access pattern, and its access frequency (0 to 1)."""

    start: int
    end: int
    nr_accesses: int
    age: int
    frequency: float

    @property
    def size(self) -> int:
        """Bytes the region covers."""
        return self.end - self.start


@dataclass(frozen=True)
class Aggregation:
    """The latest complete DAMON aggregation of one (monitor, target):
    its index, its sampling and aggregation intervals (microseconds) and
    its regions, sorted by address."""

    monitor_id: int
    target_id: int
    aggregation: int
    sample_us: int
    aggr_us: int
    regions: tuple[Region, ...]


@dataclass(frozen=True)
class Damon:
    """What a DAMON read found: the aggregations; the CPUs whose block
    stayed busy (their regions left out, so an aggregation with regions
    there may be missing or an older one); the records its writer could not
    store."""

    aggregations: tuple[Aggregation, ...]
    busy_cpus: tuple[int, ...]
    dropped: int


@dataclass(frozen=True)
class Stats:
    """What a Segment's reads ran into: reads busy for their whole bound,
    reads refused for a gone writer, times the segment was mapped again, and
    reads whose data was discarded because the file was truncated."""

    busy: int
    stale: int
    remaps: int
    truncations: int


_T = TypeVar("_T")


def _named(items: Iterable[_T], name: str, name_of: Callable[[_T], str]) -> _T:
    """The item called ``name``; ``KeyError`` if there is none."""
    for item in items:
        if name_of(item) == name:
            return item
    raise KeyError(name)
