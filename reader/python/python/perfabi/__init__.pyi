# Type stubs of the perfabi package. The values and errors are pure Python
# (perfabi/_types.py, perfabi/_errors.py, typed inline); Segment and
# default_path are the native module's (perfabi._perfabi, in Rust), declared
# here. The venv test checks this file with mypy's stubtest against the
# built module (with tests/stubtest-allowlist.txt).

from os import PathLike
from types import TracebackType
from typing import Iterable, final

from perfabi._errors import AbiError as AbiError
from perfabi._errors import BusyError as BusyError
from perfabi._errors import ClosedError as ClosedError
from perfabi._errors import Error as Error
from perfabi._errors import HeaderChangedError as HeaderChangedError
from perfabi._errors import IoError as IoError
from perfabi._errors import NoSuchCounterError as NoSuchCounterError
from perfabi._errors import NoSuchFamilyError as NoSuchFamilyError
from perfabi._errors import NotASegmentError as NotASegmentError
from perfabi._errors import NotFoundError as NotFoundError
from perfabi._errors import RacedError as RacedError
from perfabi._errors import StaleError as StaleError
from perfabi._errors import SymlinkError as SymlinkError
from perfabi._errors import TruncatedError as TruncatedError
from perfabi._errors import UnknownInstanceError as UnknownInstanceError
from perfabi._errors import WriterError as WriterError
from perfabi._errors import UntrustedError as UntrustedError
from perfabi._types import Aggregation as Aggregation
from perfabi._types import Counter as Counter
from perfabi._types import Damon as Damon
from perfabi._types import DirectoryRead as DirectoryRead
from perfabi._types import Family as Family
from perfabi._types import FamilyValues as FamilyValues
from perfabi._types import Histogram as Histogram
from perfabi._types import Info as Info
from perfabi._types import Instance as Instance
from perfabi._types import InstanceValues as InstanceValues
from perfabi._types import Kind as Kind
from perfabi._types import Problem as Problem
from perfabi._types import Region as Region
from perfabi._types import Snapshot as Snapshot
from perfabi._types import Stats as Stats
from perfabi._types import Unit as Unit
from perfabi._types import Value as Value
from perfabi._types import ValueType as ValueType

__version__: str
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

def default_dir() -> str:
    """The directory Directory() reads and perfabi.client's processes write
    in when given none: $PERFABI_DIR, else /dev/shm/perfabi-<euid>."""

def default_path() -> str:
    """The path Segment() opens when given none: $PERFABI_SEGMENT, else
    /dev/perfabi if the kernel module is loaded, else /dev/shm/perfabi.seg."""

# A native class: not subclassable.
@final
class Segment:
    """An open segment, read by the Rust reader. Every method that reads
    releases the GIL; a Segment may be shared by threads (they take turns).
    """

    def __new__(
        cls,
        path: str | bytes | PathLike[str] | PathLike[bytes] | None = None,
        *,
        trust_uid: int | Iterable[int] | None = None,
        trust_anyone: bool = False,
        busy_timeout: float = 0.2,
        require_live: bool = True,
    ) -> Segment:
        """Opens the segment at path (default: default_path()): a str,
        bytes or os.PathLike, as the os module takes paths.

        trust_uid, trust_anyone: whose files to believe besides this user's
        and root's (a uid, or uids: ints from 0 to 4294967294). busy_timeout: seconds a read waits for a busy writer
        before BusyError. require_live: reads of a gone writer's segment
        raise StaleError or ClosedError rather than return its last values.
        """

    @property
    def path(self) -> str:
        """The path the segment was opened at."""

    @property
    def nr_cpus(self) -> int:
        """Per-CPU blocks of the segment."""

    def info(self) -> Info:
        """Header fields and the writer's liveness, looked at now."""

    def families(self) -> list[Family]:
        """Every metric family with its live instances."""

    def family(self, name: str) -> Family:
        """The family called name (NoSuchFamilyError if none)."""

    def read(self, name: str) -> FamilyValues:
        """One family's values, every instance on every CPU, in one
        generation, through a handle kept for the next read
        (NoSuchFamilyError if none; UnknownInstanceError, transient, if it
        was deleted during the read)."""

    def snapshot(self) -> Snapshot:
        """Every family's values in one consistent generation."""

    def counter(self, name: str) -> Counter:
        """One flat (ABI 1.0) counter (NoSuchCounterError if none;
        UnknownInstanceError, transient, if it was deleted during the read)."""

    def damon(self) -> Damon:
        """The latest complete DAMON aggregation of every (monitor, target)."""

    def stats(self) -> Stats:
        """What this Segment's reads ran into so far."""

    def close(self) -> None:
        """Unmaps the segment and forgets its families; later calls raise
        ValueError."""

    def __enter__(self) -> Segment: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

# A native class: not subclassable.
@final
class Directory:
    """A directory of segments (one per writer process), read as one by
    the Rust reader. A read releases the GIL; a Directory may be shared by
    threads (they take turns).
    """

    def __new__(
        cls,
        path: str | bytes | PathLike[str] | PathLike[bytes] | None = None,
        *,
        writer_label: str | None = None,
        trust_uid: int | Iterable[int] | None = None,
        trust_anyone: bool = False,
        busy_timeout: float = 0.2,
        max_segments: int = 10000,
    ) -> Directory:
        """Opens the directory at path (default: default_dir()). Raises if
        the directory as a whole is refused: NotFoundError, SymlinkError
        (a link of another user on the way), UntrustedError (owned by an
        untrusted user, or writable by others without the sticky bit).

        writer_label: a label key keeping each writer's series apart (its
        value the writer's "<name>.<pid>") instead of merging them.
        trust_uid, trust_anyone: whose files to believe besides this user's
        and root's. busy_timeout: seconds a read waits for a busy writer or
        a fold. max_segments: most segment files one read reads.
        """

    @property
    def path(self) -> str:
        """The directory's path."""

    def read(self) -> DirectoryRead:
        """Every family merged over the directory's segments, with the
        problems met (a file refused, a family whose metadata differ, a
        limit: never an exception) and the number of segments merged.
        IoError if a fold held the directory's lock past busy_timeout
        (read again)."""

    def close(self) -> None:
        """Unmaps its segments; later reads raise ValueError."""

    def __enter__(self) -> Directory: ...
    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...
