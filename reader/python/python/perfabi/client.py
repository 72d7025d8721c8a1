"""Write perfabi metrics from Python with prometheus_client's classes.

A program written for ``prometheus_client`` ports by changing its import::

    from perfabi.client import Counter, Gauge, Histogram

    REQUESTS = Counter("http_requests", "Requests served", ["method"])
    LATENCY = Histogram("http_request_duration_seconds", "Time per request")

    REQUESTS.labels("GET").inc()
    with LATENCY.time():
        ...

Every process writes its own segment, through the Rust writer
(``perfabi_shm::writer``: per-CPU values, consistent snapshots, a
heartbeat): ``<name>.<pid>.<nonce>.perfabi`` in the segment directory,
:func:`configure`'s ``directory``, else ``$PERFABI_DIR``, else
``/dev/shm/perfabi-<euid>`` (``perfabi_shm::directory::default_dir``). ``perfabi-cat``
and the other readers show it.

What differs from prometheus_client, and why:

* **Values are 64-bit integers.** An amount, a value or an observation is
  a whole number, or a ``float`` with no fraction (``2.0``); a fraction is
  refused with :class:`ValueError`. A metric in seconds (``unit="seconds"``
  or a name ending in ``_seconds``) is stored in nanoseconds: its amounts
  and buckets are seconds, as in prometheus_client, scaled by 10^9 and
  rounded; readers that speak OpenMetrics give seconds back. A histogram's
  observations are not negative. ``unit`` is ``""``, ``"seconds"`` or
  ``"bytes"``.
* **Names.** The name is ``namespace_subsystem_name`` and, with a unit,
  ``_<unit>`` appended unless already there, as in prometheus_client; a
  counter's ``_total`` is removed (its samples get it back). The name must
  also follow perfabi's rule (``spec/PERFABI.md`` §5): letters, digits and
  ``_``, a letter first, at most 63 bytes (no ``:``).
* **Labels.** perfabi's members have one dimension and up to four more
  labels (§5.3). One label name is the family's dimension; two to four are
  member labels and the dimension is ``series``, whose value is the label
  values escaped and joined by ``,`` (``x%2Cy,z`` for ``x,y`` and ``z``:
  values with commas never collide, and a series is the same member in
  every process; ``spec/PERFABI.md`` §9.2). A label name is ``[a-z][a-z0-9_]*``, at most 15 bytes, not
  ``cpu``, ``le`` or ``series``; a value at most 47 printable ASCII bytes
  without ``"`` or ``\\`` (and without space for a single label).
* **Gauges.** ``multiprocess_mode`` is the family's gauge mode, how a
  reader of the segment directory merges the processes' values
  (``spec/PERFABI.md`` §15): ``all``/``liveall`` each process apart (the
  default, as in prometheus_client), ``max``/``livemax``,
  ``min``/``livemin``, ``sum``/``livesum``. Only live processes' gauges
  count (an exited process's level describes nothing that still exists),
  so ``max`` is ``livemax`` and so on; ``mostrecent`` and
  ``livemostrecent`` have no perfabi mode and are refused.
* **Not mapped**: ``Summary``, ``Info``, ``Enum``, ``Gauge.set_function``,
  ``remove``/``clear``, exemplars (accepted, ignored), ``registry``
  (accepted, ignored: every metric is in the process's segment).

Thread-safe: every update is one call of the Rust writer, which is
``Sync``. Across ``fork()`` a child never writes into its parent's segment:
right after the fork the child makes a segment of its own, with the same
metrics and children, every value from zero (``os.register_at_fork``).
"""

from __future__ import annotations

import functools
import importlib
import os
import sys
import threading
import time
from types import TracebackType
from typing import Any, Callable, Iterable, Optional, Sequence, TypeVar

from perfabi._errors import WriterError

_native: Any = importlib.import_module("perfabi._perfabi")

__all__ = [
    "CONTENT_TYPE_LATEST",
    "Counter",
    "DEFAULT_BUCKETS",
    "Gauge",
    "Histogram",
    "MULTIPROCESS_MODES",
    "configure",
    "segment_path",
]

INF = float("inf")
DEFAULT_BUCKETS: tuple[float, ...] = (
    0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, INF,
)  # fmt: skip
"""prometheus_client's default buckets, in seconds."""
MULTIPROCESS_MODES = frozenset(
    ("all", "liveall", "min", "livemin", "max", "livemax", "sum", "livesum",
     "mostrecent", "livemostrecent")
)  # fmt: skip
"""The values of prometheus_client's ``Gauge(multiprocess_mode=...)``."""
_GAUGE_MODES = {
    "all": "all", "liveall": "all", "max": "max", "livemax": "max",
    "min": "min", "livemin": "min", "sum": "sum", "livesum": "sum",
}  # fmt: skip
"""How each ``multiprocess_mode`` merges across a directory's writers
(``spec/PERFABI.md`` §15); perfabi counts live writers' gauges only."""
CONTENT_TYPE_LATEST = "text/plain; version=0.0.4; charset=utf-8"
"""prometheus_client's constant, for code that imports it from here."""

_NS = 1_000_000_000
_F = TypeVar("_F", bound=Callable[..., Any])


class _Process:
    """This process's writer and every metric made in it."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.directory: Optional[str] = None
        self.name: Optional[str] = None
        self.writer: Any = None
        self.metrics: list[_Metric] = []

    def get(self) -> Any:
        """The writer, created at the first metric."""
        with self.lock:
            if self.writer is None:
                directory = self.directory or str(_native.default_dir())
                name = self.name or _program_name()
                self.writer = _native.Writer.create_in(directory, name)
            return self.writer

    def after_fork_in_child(self) -> None:
        # Another thread of the parent may have held the lock at the fork.
        self.lock = threading.RLock()
        old, self.writer = self.writer, None
        if old is None:
            return
        # The parent's writer, copied: never written, never closed.
        old.abandon()
        # Nothing of the child may reach the parent's segment, even if its
        # own segment cannot be made: every handle is unbound first.
        unbound = _Unbound()
        for m in self.metrics:
            m._family = unbound
            for c in m._children.values():
                c._m = unbound
        try:
            for m in self.metrics:
                m._rebind()
        except Exception as e:  # an at-fork hook must not raise
            unbound.why = (
                "this process, a child of fork(), has no segment of its own "
                f"({e}): its metrics made before the fork are not written"
            )


class _Unbound:
    """A fork child's handle until its own segment has the member: every
    update raises, none reaches the parent's segment."""

    def __init__(self) -> None:
        self.why = "this process, a child of fork(), is still making its segment"

    def _fail(self, *args: Any) -> Any:
        raise WriterError(self.why, "io", False)

    add = set = observe = add_member = add_family = _fail


_PROCESS = _Process()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_PROCESS.after_fork_in_child)


def _program_name() -> str:
    """The script's name (``sys.argv[0]``'s stem), else the program's."""
    script = os.path.splitext(os.path.basename(sys.argv[0] if sys.argv else ""))[0]
    return str(_native.sanitize_name(script)) if script else str(_native.program_name())


def configure(directory: Optional[str] = None, name: Optional[str] = None) -> None:
    """Where this process's segment goes: ``directory`` (default
    ``$PERFABI_DIR``, else ``/dev/shm/perfabi-<euid>``) and the writer
    ``name`` in its file name (default: the script's name; 1 to 64
    letters, digits, ``_`` or ``-``). Call it before the first metric is
    made; later, it raises :class:`RuntimeError`."""
    with _PROCESS.lock:
        if _PROCESS.writer is not None:
            raise RuntimeError(
                "perfabi.client.configure() after the first metric: call it first"
            )
        _PROCESS.directory = None if directory is None else os.fspath(directory)
        _PROCESS.name = None if name is None else _native.sanitize_name(name)


def segment_path() -> str:
    """The path of this process's segment (created if not yet)."""
    return str(_PROCESS.get().path)


def _whole(name: str, amount: float) -> int:
    """``amount`` as the integer perfabi stores, or ValueError."""
    if isinstance(amount, int):
        return int(amount)
    if isinstance(amount, float) and amount.is_integer():
        return int(amount)
    raise ValueError(
        f"{name}: perfabi values are 64-bit integers and {amount!r} is not a "
        "whole number: give whole amounts, or make the metric in seconds "
        "(unit='seconds'), which stores nanoseconds"
    )


class _Timer:
    """A context manager and decorator timing a block (``.time()``)."""

    def __init__(self, record: Callable[[int], None]) -> None:
        self._record = record
        self._start = 0

    def __enter__(self) -> _Timer:
        self._start = time.perf_counter_ns()
        return self

    def __exit__(
        self,
        t: Optional[type[BaseException]],
        v: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self._record(time.perf_counter_ns() - self._start)

    def __call__(self, f: _F) -> _F:
        @functools.wraps(f)
        def timed(*args: Any, **kwargs: Any) -> Any:
            with _Timer(self._record):
                return f(*args, **kwargs)

        return timed  # type: ignore[return-value]


class _InProgress:
    """``Gauge.track_inprogress()``: +1 on entry, -1 on exit."""

    def __init__(self, gauge: _GaugeChild) -> None:
        self._gauge = gauge

    def __enter__(self) -> None:
        self._gauge.inc()

    def __exit__(
        self,
        t: Optional[type[BaseException]],
        v: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        self._gauge.dec()

    def __call__(self, f: _F) -> _F:
        @functools.wraps(f)
        def tracked(*args: Any, **kwargs: Any) -> Any:
            with self:
                return f(*args, **kwargs)

        return tracked  # type: ignore[return-value]


class _ExceptionCounter:
    """``Counter.count_exceptions()``: +1 when the block raises
    ``exception`` (the exception goes on)."""

    def __init__(self, counter: _CounterChild, exception: Any) -> None:
        self._counter = counter
        self._exception = exception

    def __enter__(self) -> None:
        pass

    def __exit__(
        self,
        t: Optional[type[BaseException]],
        v: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None:
        if t is not None and issubclass(t, self._exception):
            self._counter.inc()

    def __call__(self, f: _F) -> _F:
        @functools.wraps(f)
        def counted(*args: Any, **kwargs: Any) -> Any:
            with self:
                return f(*args, **kwargs)

        return counted  # type: ignore[return-value]


class _Child:
    """One labelled child of a metric: its member in the segment."""

    def __init__(self, metric: _Metric, instance: str, labels: list[tuple[str, str]]):
        self._metric = metric
        self._instance = instance
        self._labels = labels
        self._seconds = metric._seconds
        self._m: Any = metric._family.add_member(instance, labels)

    def _rebind(self) -> None:
        self._m = self._metric._family.add_member(self._instance, self._labels)

    def _value(self, amount: float) -> int:
        if type(amount) is int and not self._seconds:
            return amount  # the common case, first
        if self._seconds:
            return round(amount * _NS)
        return _whole(self._metric._name, amount)

    def _timed(self) -> Callable[[int], None]:
        raise NotImplementedError

    def time(self) -> _Timer:
        """Times a block or function (a context manager and a decorator)
        in seconds; the metric must be in seconds."""
        if not self._metric._seconds:
            raise ValueError(
                f"{self._metric._name}: time() records seconds: make the metric "
                "with unit='seconds' or a name ending in _seconds"
            )
        return _Timer(self._timed())


class _CounterChild(_Child):
    """A counter's child: ``inc``, ``count_exceptions``."""

    def inc(self, amount: float = 1, exemplar: Optional[dict[str, str]] = None) -> None:
        """Adds ``amount`` (not negative)."""
        if type(amount) is int and amount >= 0 and not self._seconds:
            self._m.add(amount)  # the hot path: one call into the writer
            return
        if amount < 0:
            raise ValueError("Counters can only be incremented by non-negative amounts.")
        self._m.add(self._value(amount))

    def count_exceptions(self, exception: Any = Exception) -> _ExceptionCounter:
        """Counts the exceptions of type ``exception`` a block or function
        raises (a context manager and a decorator)."""
        return _ExceptionCounter(self, exception)


class _GaugeChild(_Child):
    """A gauge's child: ``inc``, ``dec``, ``set`` and the helpers."""

    def inc(self, amount: float = 1) -> None:
        """Adds ``amount``."""
        self._m.add(self._value(amount))

    def dec(self, amount: float = 1) -> None:
        """Subtracts ``amount``."""
        self._m.add(-self._value(amount))

    def set(self, value: float) -> None:
        """Sets the value."""
        self._m.set(self._value(value))

    def set_to_current_time(self) -> None:
        """Sets the value to the time since the Unix epoch: nanoseconds in a
        metric in seconds, else whole seconds."""
        now = time.time_ns()
        self._m.set(now if self._metric._seconds else now // _NS)

    def track_inprogress(self) -> _InProgress:
        """+1 while a block or function runs (a context manager and a
        decorator)."""
        return _InProgress(self)

    def _timed(self) -> Callable[[int], None]:
        return lambda ns: self._m.set(ns)


class _HistogramChild(_Child):
    """A histogram's child: ``observe``, ``time``."""

    def observe(self, amount: float, exemplar: Optional[dict[str, str]] = None) -> None:
        """Records one observation (not negative)."""
        v = round(amount * _NS) if self._seconds else self._value(amount)
        if v < 0:
            raise ValueError(f"{self._metric._name}: perfabi histograms observe no negative values")
        self._m.observe(v)

    def _timed(self) -> Callable[[int], None]:
        return lambda ns: self._m.observe(ns)


class _Metric:
    """What every metric class shares: name, unit, labels, children."""

    _kind = ""
    _child_class: type[_Child] = _Child

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Iterable[str] = (),
        namespace: str = "",
        subsystem: str = "",
        unit: str = "",
        registry: Any = None,
        _labelvalues: Optional[Sequence[str]] = None,
    ) -> None:
        full = "_".join(p for p in (namespace, subsystem, name) if p)
        if unit not in ("", "seconds", "bytes"):
            raise ValueError(f"{full}: unit {unit!r}: perfabi writes '', 'seconds' or 'bytes'")
        if unit and not full.endswith("_" + unit):
            full += "_" + unit
        if self._kind == "counter" and full.endswith("_total"):
            full = full[: -len("_total")]
        self._name = full
        self._seconds = unit == "seconds" or full.endswith("_seconds")
        native_unit = "ns" if self._seconds else "bytes" if full.endswith("_bytes") else ""
        self._labelnames = tuple(labelnames)
        for label in self._labelnames:
            if label in ("series", "cpu", "le"):
                raise ValueError(f"{full}: the label name {label!r} is the reader's")
        if len(self._labelnames) > 4:
            raise ValueError(
                f"{full}: {len(self._labelnames)} label names: perfabi members have at most 4"
            )
        if len(set(self._labelnames)) != len(self._labelnames):
            raise ValueError(f"{full}: a label name twice")
        # The writer's one rule for labels (spec §9.2): the dimension
        # depends on the label names only.
        self._dimension = str(_native.series_member([(n, "") for n in self._labelnames])[0])
        self._documentation = documentation
        self._native_unit = native_unit
        self._children: dict[tuple[str, ...], _Child] = {}
        self._bounds: Optional[list[int]] = None
        self._prepare()
        with _PROCESS.lock:
            self._family: Any = self._add_family(_PROCESS.get())
            _PROCESS.metrics.append(self)
        self._only: Optional[_Child] = None
        if not self._labelnames:
            self._only = self._child(())

    def _prepare(self) -> None:
        pass

    def _add_family(self, writer: Any) -> Any:
        return writer.add_family(
            self._name,
            self._documentation,
            self._dimension,
            self._kind,
            self._native_unit,
            self._bounds,
        )

    def _rebind(self) -> None:
        self._family = self._add_family(_PROCESS.get())
        for child in self._children.values():
            child._rebind()

    def _child(self, values: tuple[str, ...]) -> _Child:
        with _PROCESS.lock:
            child = self._children.get(values)
            if child is not None:
                return child
            # The writer's one rule (spec §9.2): two to four values are
            # escaped into an instance no other values have, the same in
            # every process, so the series merge across a directory's
            # writers; a value the member labels cannot hold is refused.
            _, instance, labels = _native.series_member(list(zip(self._labelnames, values)))
            child = self._child_class(self, instance, labels)
            self._children[values] = child
            return child

    def labels(self, *labelvalues: Any, **labelkwargs: Any) -> Any:
        """The child of these label values (by position or by name), made
        at its first use and the same object after."""
        if not self._labelnames:
            raise ValueError(f"No label names were set when constructing {self._name}")
        if labelvalues and labelkwargs:
            raise ValueError("Can't pass both *args and **kwargs")
        if labelkwargs:
            if sorted(labelkwargs) != sorted(self._labelnames):
                raise ValueError("Incorrect label names")
            values = tuple(str(labelkwargs[n]) for n in self._labelnames)
        else:
            if len(labelvalues) != len(self._labelnames):
                raise ValueError("Incorrect label count")
            values = tuple(str(v) for v in labelvalues)
        return self._child(values)

    def _single(self) -> Any:
        if self._only is None:
            raise self._missing()
        return self._only

    def _missing(self) -> ValueError:
        return ValueError(f"{self._name} metric is missing label values")

    def __repr__(self) -> str:
        return f"perfabi.client.{type(self).__name__}({self._name!r})"


class Counter(_Metric):
    """prometheus_client's ``Counter``: a total that only goes up."""

    _kind = "counter"
    _child_class = _CounterChild

    def inc(self, amount: float = 1, exemplar: Optional[dict[str, str]] = None) -> None:
        """Adds ``amount`` (not negative)."""
        only = self._only
        if only is None:
            raise self._missing()
        only.inc(amount)  # type: ignore[attr-defined]

    def count_exceptions(self, exception: Any = Exception) -> _ExceptionCounter:
        """Counts the exceptions a block or function raises."""
        return self._single().count_exceptions(exception)  # type: ignore[no-any-return]


class Gauge(_Metric):
    """prometheus_client's ``Gauge``: a level, up and down."""

    _kind = "gauge"
    _child_class = _GaugeChild

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Iterable[str] = (),
        namespace: str = "",
        subsystem: str = "",
        unit: str = "",
        registry: Any = None,
        _labelvalues: Optional[Sequence[str]] = None,
        multiprocess_mode: str = "all",
    ) -> None:
        if multiprocess_mode not in MULTIPROCESS_MODES:
            raise ValueError("Invalid multiprocess mode: " + multiprocess_mode)
        merged = _GAUGE_MODES.get(multiprocess_mode)
        if merged is None:
            raise ValueError(
                f"multiprocess_mode {multiprocess_mode!r}: perfabi keeps no exited "
                "process's gauge, so has no most recent one; use 'liveall' (each "
                "process apart), 'livemax', 'livemin' or 'livesum'"
            )
        self.multiprocess_mode = multiprocess_mode
        self._kind = "gauge:" + merged
        super().__init__(name, documentation, labelnames, namespace, subsystem, unit, registry)

    def inc(self, amount: float = 1) -> None:
        """Adds ``amount``."""
        self._single().inc(amount)

    def dec(self, amount: float = 1) -> None:
        """Subtracts ``amount``."""
        self._single().dec(amount)

    def set(self, value: float) -> None:
        """Sets the value."""
        self._single().set(value)

    def set_to_current_time(self) -> None:
        """Sets the value to now (see :meth:`_GaugeChild.set_to_current_time`)."""
        self._single().set_to_current_time()

    def track_inprogress(self) -> _InProgress:
        """+1 while a block or function runs."""
        return self._single().track_inprogress()  # type: ignore[no-any-return]

    def time(self) -> _Timer:
        """Sets the gauge to how long a block or function took, in seconds."""
        return self._single().time()  # type: ignore[no-any-return]


class Histogram(_Metric):
    """prometheus_client's ``Histogram``: observations in buckets."""

    _kind = "histogram"
    _child_class = _HistogramChild

    def __init__(
        self,
        name: str,
        documentation: str,
        labelnames: Iterable[str] = (),
        namespace: str = "",
        subsystem: str = "",
        unit: str = "",
        registry: Any = None,
        _labelvalues: Optional[Sequence[str]] = None,
        buckets: Sequence[float] = DEFAULT_BUCKETS,
    ) -> None:
        self._buckets = tuple(float(b) for b in buckets)
        super().__init__(name, documentation, labelnames, namespace, subsystem, unit, registry)

    def _prepare(self) -> None:
        finite = [b for b in self._buckets if b != INF]
        if not finite:
            raise ValueError(f"{self._name}: a histogram needs a finite bucket bound")
        if self._seconds:
            bounds = [round(b * _NS) for b in finite]
        else:
            bounds = [_whole(self._name, b) for b in finite]
        if any(b < 0 for b in bounds) or bounds != sorted(set(bounds)):
            raise ValueError(
                f"{self._name}: bucket bounds must be increasing and not negative"
                + (" (at nanosecond resolution)" if self._seconds else "")
            )
        self._bounds = bounds

    def observe(self, amount: float, exemplar: Optional[dict[str, str]] = None) -> None:
        """Records one observation (not negative)."""
        only = self._only
        if only is None:
            raise self._missing()
        only.observe(amount)  # type: ignore[attr-defined]

    def time(self) -> _Timer:
        """Observes how long a block or function took, in seconds."""
        return self._single().time()  # type: ignore[no-any-return]


# WriterError is what the Rust writer raises (a bad name, label or
# instance, a full segment); re-exported for `except` clauses.
__all__ += ["WriterError"]
