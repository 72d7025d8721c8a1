//! [`Segment`]: an open, mapped, validated segment that follows its writer.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use perfabi::damon::DamonRead;
use perfabi::{Info, Instance, InstanceTable, Snapshot};

use crate::error::Error;
use crate::liveness::{self, Liveness};
use crate::trust::{self, Found, Trust};
use perfabi_shm::{MapError, SegmentMap};

/// Runs `$attempt` (an expression making one consistent read, bounded by
/// `Options::retries`) again while it reports busy, for at most
/// `Options::busy_timeout` from the first busy result (`spec/PERFABI.md`
/// §7.5), with [`Patience`] between attempts. A read that succeeds at once
/// reads no clock: the deadline is set only when there is something to
/// wait for (a clock read was a third of the cost of reading one counter
/// on 16 CPUs). A macro, not a function taking a closure: the first
/// attempt is written out where the read is, so the compiler inlines the
/// read's hot path there (a closure called from two places was kept out
/// of line, its result passed through memory), and only the retries,
/// out of line in [`patiently_again`], call it as a closure.
macro_rules! patiently {
    ($opts:expr, $attempt:expr) => {
        match $attempt {
            Err(e) if e.is_busy() => $crate::segment::patiently_again($opts, e, || $attempt),
            r => r,
        }
    };
}

mod dead;
mod families;
pub use families::{FamilyHandle, FamilyValues};

/// The default of [`Options::busy_timeout`]: 200 ms.
pub const DEFAULT_BUSY_TIMEOUT: Duration = Duration::from_millis(200);

/// The default of [`Options::max_segment_bytes`]: 4 GiB, more than a
/// writer's default geometry needs on 8,192 CPUs.
pub const DEFAULT_MAX_SEGMENT_BYTES: u64 = 4 << 30;

/// How a [`Segment`] is opened and read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Whose segment files to believe (default: this user's and root's).
    pub trust: Trust,
    /// Largest segment to map (its header's `segment_size`): a reader's
    /// time and memory grow with it, so a larger one is refused unless the
    /// limit is raised.
    pub max_segment_bytes: u64,
    /// Retry bound of each attempt at a consistent read, in tight
    /// iterations (see `spec/PERFABI.md` §7.5).
    pub retries: u32,
    /// How long a read keeps trying, with back-off between attempts, while
    /// the writer keeps a block or the metadata busy, before it reports
    /// [`Error::Busy`] (a writer that died mid-update is busy forever).
    pub busy_timeout: Duration,
    /// Reads fail with [`Error::Stale`] / [`Error::Closed`] when the writer
    /// is gone, instead of returning its last values.
    pub require_live: bool,
    /// Longest heartbeat silence accepted (at least 3 promised intervals).
    pub max_silence: Duration,
    /// How often the reader looks at the path (new file, grown file) and the
    /// writer's process. Reads in between cost no system call. Measured on
    /// the coarse monotonic clock, so a re-check may come a timer tick
    /// (1–10 ms) late.
    pub recheck: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            trust: Trust::default(),
            max_segment_bytes: DEFAULT_MAX_SEGMENT_BYTES,
            retries: perfabi::view::DEFAULT_RETRIES,
            busy_timeout: DEFAULT_BUSY_TIMEOUT,
            require_live: true,
            max_silence: Duration::from_secs(5),
            recheck: Duration::from_secs(1),
        }
    }
}

/// Counts of what the reader ran into (for monitoring the monitor).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct ReadStats {
    /// Reads that stayed busy for their whole retry bound.
    pub busy: u64,
    /// Reads refused because the writer was gone or silent.
    pub stale: u64,
    /// Times the segment was mapped again (new file, new epoch, growth,
    /// truncation).
    pub remaps: u64,
    /// Reads whose data was discarded because the file was truncated.
    pub truncations: u64,
}

/// Header state plus what the reader knows about the writer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SegmentInfo {
    /// Header fields.
    pub header: Info,
    /// The writer's state.
    pub liveness: Liveness,
    /// Where the segment was opened from (`None`: a file descriptor).
    pub path: Option<PathBuf>,
    /// Bytes mapped.
    pub mapped: usize,
    /// The owner (uid) of the segment file or device.
    pub owner: u32,
    /// A file, or the kernel module's device (the kernel flag is believed
    /// only from the device).
    pub origin: perfabi::trust::Origin,
}

/// One counter: its description, per-CPU values and total.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Counter {
    /// The instance.
    pub instance: Instance,
    /// Value on each CPU.
    pub per_cpu: Vec<u64>,
    /// Wrapping sum over CPUs.
    pub total: u64,
    /// Generation the values were read at.
    pub generation: u64,
}

/// A counter looked up once and read many times with [`Segment::read`].
/// What it names is fixed when it is made ([`Segment::handle`]).
#[derive(Clone, Debug)]
pub struct Handle {
    instance: Instance,
    epoch: u64,
    /// This handle's lookup among all made in this process (a clone
    /// keeps it): two handles with the same token name the same (slot,
    /// registration, epoch), so [`Segment::read_many`] knows its handles
    /// are those it read last by one word each.
    token: u64,
}

impl Handle {
    /// The instance it names.
    pub fn instance(&self) -> &Instance {
        &self.instance
    }

    /// The key [`Segment::read`] reads: (slot, registration id).
    #[inline]
    fn key(&self) -> (u32, u64) {
        (self.instance.slot, self.instance.reg_id)
    }

    /// A token no handle made before has.
    fn next_token() -> u64 {
        static TOKENS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
        TOKENS.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    }
}

/// Handles are equal when they name the same instance (slot,
/// registration, name, ...) of a segment of the same epoch, whether or not
/// one was looked up apart from the other.
impl PartialEq for Handle {
    fn eq(&self, other: &Self) -> bool {
        self.instance == other.instance && self.epoch == other.epoch
    }
}

impl Eq for Handle {}

enum Source {
    Path(PathBuf),
    Fd(OwnedFd),
}

/// An open segment.
///
/// Every method is bounded: consistent reads retry at most
/// [`Options::retries`] times, then report [`Error::Busy`]; at most every
/// [`Options::recheck`] (and whenever the writer looks gone or the file was
/// truncated) one `stat` of the path decides whether to map it again.
pub struct Segment {
    source: Source,
    opts: Options,
    map: SegmentMap,
    /// Origin and owner of what `map` maps.
    found: Found,
    /// A read found the header changed: map again before the next read.
    remap: bool,
    /// The instance table as last decoded, for name look-ups.
    names: InstanceTable,
    /// When the path and the writer are next looked at: the last look
    /// plus [`Options::recheck`], in ns of [`coarse_ns`] (saturating).
    next_check: u64,
    liveness: Liveness,
    stats: ReadStats,
    /// (slot, registration id) of the handles of the current `read_many`.
    keys: Vec<(u32, u64)>,
    /// Their tokens, in the same order, and the epoch all of them were
    /// of: the same tokens again are the same keys.
    tokens: Vec<u64>,
    tokens_epoch: u64,
    /// (epoch, generation) at which a read found every one of `keys`
    /// live: while the segment is still at it, their entries need no new
    /// look ([`perfabi::Values::read_slots_at`]).
    keys_at: Option<(u64, u64)>,
    /// The token of the last handle [`read`](Self::read) found live, with
    /// the (epoch, generation) it was live at: `keys_at`'s rule for one
    /// handle, kept apart so that reads of one handle and `read_many`s
    /// in turn keep both.
    key_at: Option<(u64, u64, u64)>,
}

impl Segment {
    /// Opens the segment file at `path` (a tmpfs segment, or the kernel
    /// module's `/dev/perfabi`) with default [`Options`].
    pub fn open(path: impl AsRef<Path>) -> Result<Self, Error> {
        Self::open_with(path, Options::default())
    }

    /// Opens the segment file at `path`.
    pub fn open_with(path: impl AsRef<Path>, opts: Options) -> Result<Self, Error> {
        let path = path.as_ref().to_path_buf();
        let (map, found) = map_path(&path, &opts)?;
        Self::new(Source::Path(path), map, found, opts)
    }

    /// Uses a segment handed over as a file descriptor (a writer's memfd).
    pub fn from_fd(fd: OwnedFd) -> Result<Self, Error> {
        Self::from_fd_with(fd, Options::default())
    }

    /// Uses a segment handed over as a file descriptor.
    pub fn from_fd_with(fd: OwnedFd, opts: Options) -> Result<Self, Error> {
        let (map, found) = map_fd(&fd, &opts)?;
        Self::new(Source::Fd(fd), map, found, opts)
    }

    fn new(source: Source, map: SegmentMap, found: Found, opts: Options) -> Result<Self, Error> {
        let liveness = assess(&map, found, &opts, &source);
        Ok(Self {
            source,
            map,
            found,
            remap: false,
            names: InstanceTable::default(),
            next_check: next_check(&opts),
            liveness,
            stats: ReadStats::default(),
            keys: Vec::new(),
            tokens: Vec::new(),
            tokens_epoch: 0,
            keys_at: None,
            key_at: None,
            opts,
        })
    }

    /// Where the segment was opened from.
    pub fn path(&self) -> Option<&Path> {
        match &self.source {
            Source::Path(p) => Some(p),
            Source::Fd(_) => None,
        }
    }

    fn display_path(&self) -> PathBuf {
        self.path().map_or_else(fd_path, Path::to_path_buf)
    }

    /// What the reader ran into so far.
    pub fn stats(&self) -> ReadStats {
        self.stats
    }

    /// Looks at the path and the writer now (normally done at most every
    /// [`Options::recheck`]): maps the segment again if the file at the path
    /// was replaced (new inode, new epoch), changed length, was truncated or
    /// had its header changed, and re-assesses liveness.
    pub fn refresh(&mut self) -> Result<(), Error> {
        self.next_check = next_check(&self.opts);
        let damaged = self.remap || self.map.faulted() || !self.map.intact();
        if let Source::Path(path) = &self.source {
            // The writer removed it: keep the old mapping, report the
            // liveness it shows.
            if let Some(now) = trust::stat_path(path)? {
                let moved = now.id != self.map.id();
                let resized = self.map.file_len().is_some_and(|len| now.len != len);
                let lost = !moved
                    && self.map.lost_data(&now, || {
                        match trust::open_path(path, &self.opts.trust) {
                            Ok((trust::Opened::File(f, _), _)) => Some(f),
                            _ => None,
                        }
                    });
                if moved || resized || lost || damaged {
                    let path = path.clone();
                    // The very file this reader mapped, now shorter: it was
                    // truncated under the reader (a writer re-creates its
                    // segment under a new inode, renamed over the path),
                    // which a later read may find re-created, not a file
                    // that never was a segment.
                    // Likewise the very file whose header changed under the
                    // reader, now malformed: damaged in place after
                    // publication, which its writer repairs at its next
                    // heartbeat (spec §11.5): read again.
                    let shrunk = !moved && self.map.file_len().is_some_and(|len| now.len < len);
                    let mapped = match map_path(&path, &self.opts) {
                        Err(Error::NotASegmentFile(..) | Error::Abi(_) | Error::Sparse { .. })
                            if shrunk =>
                        {
                            self.stats.truncations += 1;
                            return Err(Error::Truncated(path));
                        }
                        Err(Error::Abi(_)) if !moved && damaged => {
                            return Err(Error::HeaderChanged(path));
                        }
                        r => r?,
                    };
                    self.remapped(mapped);
                }
            }
        }
        if let Source::Fd(fd) = &self.source {
            let resized = file_len(fd) != self.map.file_len();
            if resized || damaged {
                self.remapped(map_fd(fd, &self.opts)?);
            }
        }
        self.liveness = assess(&self.map, self.found, &self.opts, &self.source);
        Ok(())
    }

    /// What every method but the hot paths ([`read`](Self::read),
    /// [`read_many`](Self::read_many), [`read_family`](Self::read_family))
    /// does first: looks at the path and the writer if
    /// [`Options::recheck`] has passed since the last look, or at once if
    /// the writer looks gone or the mapping was damaged (see
    /// [`refresh`](Self::refresh)), then reports a gone writer
    /// ([`Error::Stale`], [`Error::Closed`]) if [`Options::require_live`].
    /// Between rechecks it makes no system call: call it before a hot-path
    /// read to follow a writer that restarts, as every other method does.
    pub fn check(&mut self) -> Result<(), Error> {
        self.prepare()
    }

    /// Before a read: re-check if it is time, or if the writer looks gone.
    /// Inlined into every read (it runs before each): the rare ways out
    /// ([`refresh`](Self::refresh), a gone writer's error) are calls.
    #[inline]
    fn prepare(&mut self) -> Result<(), Error> {
        // The one header word that changes what follows (not the whole
        // header: this runs before every read).
        let flags = self.map.words()[perfabi::layout::HEADER_FLAGS_WORD]
            .load(std::sync::atomic::Ordering::Relaxed);
        let gone = flags & perfabi::layout::FLAG_CLOSED != 0
            || !matches!(self.liveness, Liveness::Alive | Liveness::Kernel)
            || self.remap
            || self.map.faulted()
            || !self.map.intact();
        if gone || coarse_ns() >= self.next_check {
            self.refresh()?;
            if self.opts.require_live {
                self.require_live()?;
            }
        }
        Ok(())
    }

    /// Reads through a new mapping from now on: what was decoded from the
    /// old one is void, and which handles' entries were found live, and
    /// when, is forgotten (a new mapping, even of the same file and epoch,
    /// is checked afresh).
    fn remapped(&mut self, (map, found): (SegmentMap, Found)) {
        (self.map, self.found) = (map, found);
        self.remap = false;
        self.names.clear();
        self.keys_at = None;
        self.key_at = None;
        self.stats.remaps += 1;
    }

    /// [`Options::require_live`]: a closed, dead or silent writer's error.
    /// Only a [`refresh`](Self::refresh) changes the liveness, so
    /// [`prepare`](Self::prepare) asks after one (or when the liveness
    /// it kept is not alive, which makes it refresh).
    #[cold]
    fn require_live(&mut self) -> Result<(), Error> {
        match self.liveness {
            Liveness::Closed => Err(Error::Closed),
            Liveness::Dead { silent_for } | Liveness::Silent { silent_for } => {
                self.stats.stale += 1;
                Err(Error::Stale {
                    pid: self.map.layout().writer_pid,
                    silent_for,
                    dead: matches!(self.liveness, Liveness::Dead { .. }),
                })
            }
            Liveness::Alive | Liveness::Kernel => Ok(()),
        }
    }

    /// After a read: the data is void if the file was truncated under it
    /// or its header changed (checked after the data was copied, so a copy
    /// made of a truncated file's fresh zero pages is never returned); a
    /// busy read is counted. Inlined into every read but the hot paths,
    /// like [`prepare`](Self::prepare): a read's result stays in
    /// registers, and the ways out are calls; the hot paths look at
    /// [`SegmentMap::sound`] themselves and call it only through
    /// [`unserved`](Self::unserved).
    #[inline]
    fn finish<T>(&mut self, r: Result<T, perfabi::Error>) -> Result<T, Error> {
        if !self.map.sound() {
            return Err(self.damaged());
        }
        r.map_err(|e| self.failed(e))
    }

    /// [`finish`](Self::finish) of what a hot path does not serve itself
    /// (it serves a generation read from a [sound](SegmentMap::sound)
    /// mapping, and so no more than the generation moves out of the
    /// `Result`): a failed read, or one of a void mapping; an error, unless
    /// the mapping was sound again by the time `finish` looked.
    #[cold]
    #[inline(never)]
    fn unserved(&mut self, r: Result<u64, perfabi::Error>) -> Result<u64, Error> {
        self.finish(r)
    }

    /// [`finish`](Self::finish) of a read of a mapping that a truncation
    /// or a changed header made void.
    #[cold]
    fn damaged(&mut self) -> Error {
        if self.map.faulted() {
            self.stats.truncations += 1;
            return Error::Truncated(self.display_path());
        }
        self.remap = true;
        Error::HeaderChanged(self.display_path())
    }

    /// [`finish`](Self::finish) of a read that failed: a busy one counted.
    #[cold]
    fn failed(&mut self, e: perfabi::Error) -> Error {
        if e.is_busy() {
            self.stats.busy += 1;
        }
        Error::from(e)
    }

    /// Header state and writer liveness (re-checked now).
    pub fn info(&mut self) -> Result<SegmentInfo, Error> {
        self.refresh()?;
        let header = self.map.view().info();
        let info = SegmentInfo {
            header,
            liveness: self.liveness,
            path: self.path().map(Path::to_path_buf),
            mapped: self.map.len(),
            owner: self.found.owner,
            origin: self.found.origin,
        };
        self.finish(Ok(info))
    }

    /// The live instances (decoded again only when the generation moved).
    pub fn instances(&mut self) -> Result<Vec<Instance>, Error> {
        self.refresh_names()?;
        Ok(self.names.instances.clone())
    }

    /// Brings the cached instance table up to date.
    fn refresh_names(&mut self) -> Result<(), Error> {
        self.prepare()?;
        let (view, retries) = (self.map.view(), self.opts.retries);
        let names = &mut self.names;
        let r = patiently!(&self.opts, view.instances_into(names, retries));
        let r = self.finish(r).map(drop);
        if r.is_err() {
            // What was decoded from a truncated or replaced mapping is void.
            self.names.clear();
        }
        r
    }

    /// A consistent snapshot of every counter on every CPU.
    pub fn snapshot(&mut self) -> Result<Snapshot, Error> {
        let mut s = Snapshot::default();
        self.snapshot_into(&mut s)?;
        Ok(s)
    }

    /// Fills `snap` with a consistent snapshot, reusing its buffers (and its
    /// decoded names while the generation is unchanged).
    pub fn snapshot_into(&mut self, snap: &mut Snapshot) -> Result<(), Error> {
        self.prepare()?;
        let (view, retries) = (self.map.view(), self.opts.retries);
        let r = patiently!(&self.opts, view.snapshot_into(snap, retries));
        self.finish(r)
    }

    /// One counter by name: per-CPU values and total, consistent with its
    /// registration.
    pub fn counter(&mut self, name: &str) -> Result<Counter, Error> {
        let h = self.handle(name)?;
        let mut per_cpu = vec![0u64; self.map.layout().nr_cpus];
        let generation = self.read(&h, &mut per_cpu)?;
        let total = per_cpu.iter().fold(0u64, |a, &v| a.wrapping_add(v));
        Ok(Counter {
            instance: h.instance,
            per_cpu,
            total,
            generation,
        })
    }

    /// Looks a counter up by name, for repeated [`read`](Self::read)s.
    pub fn handle(&mut self, name: &str) -> Result<Handle, Error> {
        // read() still checks each registration id.
        self.refresh_names()?;
        let instance = self
            .names
            .instances
            .iter()
            .find(|i| i.name == name)
            .cloned()
            .ok_or_else(|| Error::NoSuchCounter(name.to_string()))?;
        Ok(Handle {
            instance,
            epoch: self.map.layout().epoch,
            token: Handle::next_token(),
        })
    }

    /// Number of per-CPU values a [`read`](Self::read) fills per handle.
    pub fn nr_cpus(&self) -> usize {
        self.map.layout().nr_cpus
    }

    /// The hot path: reads a counter's per-CPU values into `out` (length
    /// [`nr_cpus`](Self::nr_cpus)) with no system call and no allocation.
    /// Fails with [`Error::Abi`]`(UnknownInstance)` if the counter was deleted
    /// or the segment re-created; look it up again then. The handle's
    /// instance entry is loaded again only when the metadata generation
    /// moved since a read of this very handle found it live (as
    /// [`read_many`](Self::read_many) does; spec §7.4). Does not re-check
    /// the path or the writer: call [`refresh`](Self::refresh) (or any other
    /// method) from time to time to follow a restarted writer.
    pub fn read(&mut self, h: &Handle, out: &mut [u64]) -> Result<u64, Error> {
        if h.epoch != self.map.layout().epoch {
            return Err(Error::Abi(perfabi::Error::UnknownInstance));
        }
        let (key, epoch) = (h.key(), h.epoch);
        let verified = self
            .key_at
            .filter(|&(t, e, _)| t == h.token && e == epoch)
            .map(|(_, _, g)| g);
        let (values, retries) = (self.map.values(), self.opts.retries);
        let r = patiently!(&self.opts, values.read_slot_at(key, verified, out, retries));
        match r {
            Ok(g) if self.map.sound() => {
                self.key_at = Some((h.token, epoch, g));
                Ok(g)
            }
            r => {
                self.key_at = None;
                self.unserved(r)
            }
        }
    }

    /// [`read`](Self::read) for several counters at once, inside one
    /// generation: `out` holds `nr_cpus` values per handle, in order. It
    /// allocates only when given more handles than ever before.
    pub fn read_many(&mut self, hs: &[Handle], out: &mut [u64]) -> Result<u64, Error> {
        let epoch = self.map.layout().epoch;
        // The handles of the last call again (the common case), known by
        // one word each: a token names a fixed key, and every kept one
        // was of `tokens_epoch`. Compared without a branch per handle.
        let mut differ = self.tokens.len() != hs.len() || self.tokens_epoch != epoch;
        if !differ {
            let mut diff = 0;
            for (t, h) in self.tokens.iter().zip(hs) {
                diff |= t ^ h.token;
            }
            differ = diff != 0;
        }
        if differ {
            if hs.iter().any(|h| h.epoch != epoch) {
                return Err(Error::Abi(perfabi::Error::UnknownInstance));
            }
            self.keys.clear();
            self.keys.extend(hs.iter().map(Handle::key));
            self.tokens.clear();
            self.tokens.extend(hs.iter().map(|h| h.token));
            self.tokens_epoch = epoch;
            self.keys_at = None;
        }
        let verified = self.keys_at.filter(|&(e, _)| e == epoch).map(|(_, g)| g);
        let (values, retries, keys) = (self.map.values(), self.opts.retries, &self.keys);
        let r = patiently!(
            &self.opts,
            values.read_slots_at(keys, verified, out, retries)
        );
        match r {
            Ok(g) if self.map.sound() => {
                self.keys_at = Some((epoch, g));
                Ok(g)
            }
            r => {
                self.keys_at = None;
                self.unserved(r)
            }
        }
    }

    /// The hot path for runs of value slots (a [`Snapshot`]'s
    /// `values` columns, of any families): copies run `(first, len)` of
    /// every CPU into `out` as [`Values::read_ranges`] does (`out`
    /// holds `nr_cpus` rows of the runs' words, in order), inside one
    /// metadata generation, each CPU's runs one consistent copy (a group
    /// update, a histogram observation, seen whole). Returns the
    /// generation: the caller checks that its runs still describe that
    /// generation's members (decoded by [`snapshot_into`](Self::snapshot_into)
    /// or [`families`](Self::families)). No system call, no allocation;
    /// like [`read`](Self::read), it does not re-check the path or the
    /// writer (see [`status`](Self::status)).
    ///
    /// [`Values::read_ranges`]: perfabi::Values::read_ranges
    pub fn read_ranges(&mut self, runs: &[(usize, usize)], out: &mut [u64]) -> Result<u64, Error> {
        let (values, retries) = (self.map.values(), self.opts.retries);
        match patiently!(&self.opts, values.read_ranges(runs, out, retries)) {
            Ok(g) if self.map.sound() => Ok(g),
            r => self.unserved(r),
        }
    }

    /// Header state and writer liveness, looked at as every method but the
    /// hot paths does ([`check`](Self::check): the path and the writer
    /// re-checked only every [`Options::recheck`], or at once when the
    /// writer looks gone or the mapping was damaged). Unlike
    /// [`info`](Self::info), which re-checks at every call and copies the
    /// path, it makes no system call between rechecks and no allocation:
    /// for an agent that looks at the header before every request.
    pub fn status(&mut self) -> Result<(Info, Liveness), Error> {
        self.prepare()?;
        let header = self.map.view().info();
        let liveness = self.liveness;
        self.finish(Ok((header, liveness)))
    }

    /// The writer's liveness as the last read judged it (no look at the
    /// header or the writer: a directory's read asks right after a
    /// snapshot, which looked).
    pub(crate) fn liveness(&self) -> Liveness {
        self.liveness
    }

    /// The most recent complete DAMON aggregation of every (monitor,
    /// target). A CPU whose block stays busy for [`Options::busy_timeout`]
    /// is left out and named in [`DamonRead::busy_cpus`]: the other CPUs'
    /// regions are still returned.
    pub fn damon(&mut self) -> Result<DamonRead, Error> {
        self.prepare()?;
        let view = self.map.view();
        let mut records = Vec::new();
        let mut busy_cpus = Vec::new();
        let mut patience = Patience::new(&self.opts);
        for cpu in 0..self.map.layout().nr_cpus {
            let mut from = 0;
            while let Err(slot) = view.damon_cpu_records(cpu, from, self.opts.retries, &mut records)
            {
                from = slot;
                if !patience.wait(Some(cpu as u32)) {
                    busy_cpus.push(cpu as u32);
                    break;
                }
            }
        }
        drop(patience);
        self.stats.busy += busy_cpus.len() as u64;
        let read = DamonRead {
            aggregations: perfabi::damon::rebuild(records),
            busy_cpus,
        };
        self.finish(Ok(read))
    }

    /// DAMON region records the writer could not store, summed over CPUs.
    pub fn damon_dropped(&self) -> u64 {
        let v = self.map.view();
        (0..self.map.layout().nr_cpus)
            .map(|c| v.damon_dropped(c))
            .sum()
    }
}

/// The time on `CLOCK_MONOTONIC_COARSE`, in ns: what deciding whether
/// [`Options::recheck`] has passed reads before every read. It is the
/// clock of the last timer tick (a few ms behind at most, so a re-check
/// comes up to a tick late), read from the vDSO without the
/// `CLOCK_MONOTONIC` counter read that cost a fifth of a small snapshot;
/// compared as one integer (no `Duration` arithmetic on the hot path).
#[inline]
fn coarse_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::MonotonicCoarse);
    // A monotonic clock is never negative: 0 would only re-check early.
    let secs = u64::try_from(t.tv_sec).unwrap_or(0);
    let nanos = u64::try_from(t.tv_nsec).unwrap_or(0);
    secs.saturating_mul(1_000_000_000).saturating_add(nanos)
}

/// When the next look at the path and the writer is due: now plus
/// [`Options::recheck`] (saturating: a recheck of centuries never comes).
fn next_check(opts: &Options) -> u64 {
    let every = u64::try_from(opts.recheck.as_nanos()).unwrap_or(u64::MAX);
    coarse_ns().saturating_add(every)
}

/// The length of the file behind `fd` (`None` for devices).
fn file_len(fd: &OwnedFd) -> Option<u64> {
    let md = File::from(fd.try_clone().ok()?).metadata().ok()?;
    md.file_type().is_file().then_some(md.len())
}

fn fd_path() -> PathBuf {
    PathBuf::from("<file descriptor>")
}

fn assess(map: &SegmentMap, found: Found, opts: &Options, source: &Source) -> Liveness {
    let info = map.view().info();
    let lock = (found.origin == perfabi::trust::Origin::File
        && info.flags & perfabi::layout::FLAG_LIVE_LOCK != 0
        && info.flags & perfabi::layout::FLAG_CLOSED == 0)
        .then(|| live_lock(map, source, info.flags))
        .flatten();
    liveness::assess(&info, found.origin, found.owner, opts.max_silence, lock)
}

/// What the writer's liveness lock says (§10), asked through a descriptor
/// of the very file mapped: the path opened again (no link followed,
/// nothing but a regular file), or the descriptor handed over. A lock
/// that cannot be asked about (the path names another file now, `fcntl`
/// fails) leaves the writer unknown, which is never gone: `Some(true)`,
/// as [`alive`](perfabi_shm::writer::live_lock::alive) answers, so only
/// the heartbeat's age judges it (never the pid rule, which is wrong
/// across pid namespaces).
fn live_lock(map: &SegmentMap, source: &Source, flags: u64) -> Option<bool> {
    use perfabi_shm::writer::live_lock::alive;
    let unknown = Some(true);
    match source {
        Source::Path(path) => {
            match perfabi_shm::safe_open::open_read(
                path,
                &[perfabi_shm::safe_open::FileKind::Regular],
            ) {
                Ok((file, md)) if perfabi_shm::safe_open::FileId::of(&md) == map.id() => {
                    alive(&file, flags)
                }
                _ => unknown,
            }
        }
        Source::Fd(fd) => match fd.try_clone() {
            Ok(fd) => alive(&File::from(fd), flags),
            Err(_) => unknown,
        },
    }
}

fn map_path(path: &Path, opts: &Options) -> Result<(SegmentMap, Found), Error> {
    let (opened, found) = trust::open_path(path, &opts.trust)?;
    let map = match opened {
        trust::Opened::File(file, md) => {
            SegmentMap::new(file, &md, found.origin, opts.max_segment_bytes)
        }
        trust::Opened::Map { file, pin, bytes } => {
            SegmentMap::new_bpf_map(file, pin, bytes, opts.max_segment_bytes)
        }
    }
    .map_err(|e| map_error(path, e, opts))?;
    Ok((map, found))
}

fn map_fd(fd: &OwnedFd, opts: &Options) -> Result<(SegmentMap, Found), Error> {
    // A descriptor is handed over on purpose (memfds are mode 0777), so
    // only the owner is checked, not the mode.
    let file = File::from(fd.try_clone().map_err(|e| Error::Io(fd_path(), e))?);
    let (md, found) = trust::check_descriptor(&file, &fd_path(), &opts.trust)?;
    let map = SegmentMap::new(file, &md, found.origin, opts.max_segment_bytes)
        .map_err(|e| map_error(&fd_path(), e, opts))?;
    Ok((map, found))
}

fn map_error(path: &Path, e: MapError, opts: &Options) -> Error {
    let path = path.to_path_buf();
    match e {
        MapError::Io(e) => Error::Io(path, e),
        MapError::Abi(e) => Error::Abi(e),
        MapError::Sparse(at) => Error::Sparse { path, at },
        MapError::TooLarge(size) => Error::TooLarge {
            path,
            size,
            limit: opts.max_segment_bytes,
        },
        MapError::Changed => Error::HeaderChanged(path),
        MapError::TooShort => {
            Error::NotASegmentFile(path, "a file too short to hold a segment header")
        }
        MapError::ShortRead { .. } => Error::NotASegmentFile(
            path,
            "a file holding fewer bytes than its size says (a /sys or /proc file?)",
        ),
    }
}

/// [`patiently!`] after a first attempt found the writer busy (`first`):
/// out of line, so that a read that succeeds at once carries none of it.
#[inline(never)]
pub(crate) fn patiently_again<T>(
    opts: &Options,
    first: perfabi::Error,
    mut attempt: impl FnMut() -> Result<T, perfabi::Error>,
) -> Result<T, perfabi::Error> {
    let mut r = Err(first);
    let mut patience = Patience::new(opts);
    loop {
        let cpu = match &r {
            Err(perfabi::Error::BusyCpu(c)) => Some(*c),
            Err(e) if e.is_busy() => None,
            _ => return r,
        };
        if !patience.wait(cpu) {
            return r;
        }
        r = attempt();
    }
}

/// Waiting for a busy writer, within `Options::busy_timeout`.
///
/// A writer updates only the block of the CPU it runs on (rseq, or the
/// kernel with preemption off). A reader on another CPU can starve: a busy
/// writer never leaves its block quiet for as long as a copy takes. So the
/// reader moves itself onto the busy CPU and yields: while the reader runs
/// there, that CPU's writers do not, and its block stays still (an update
/// that was preempted half-way is undone by the writer's next update there,
/// which the yield lets run). The thread's affinity is restored when the
/// wait ends. Where it cannot move (the CPU is outside its affinity), and
/// for busy metadata, it sleeps, from 10 µs doubling to 1 ms. It gives up
/// when the time is over and it waited at least 16 times.
struct Patience {
    until: Instant,
    /// Waits so far: at least [`MIN_WAITS`] are made, however long they
    /// take, so a reader starved of CPU time still gets its attempts.
    waits: u32,
    pause: Duration,
    /// The affinity to restore, once the thread moved.
    restore: Option<rustix::thread::CpuSet>,
    on: Option<u32>,
}

impl Patience {
    fn new(opts: &Options) -> Self {
        Self {
            until: Instant::now() + opts.busy_timeout,
            waits: 0,
            pause: Duration::from_micros(10),
            restore: None,
            on: None,
        }
    }

    /// Waits before the next attempt, if time is left (false: give up).
    /// `cpu` is the CPU whose block was busy, if it was one.
    fn wait(&mut self, cpu: Option<u32>) -> bool {
        if Instant::now() >= self.until && self.waits >= MIN_WAITS {
            return false;
        }
        self.waits += 1;
        if let Some(c) = cpu.filter(|&c| self.on != Some(c)) {
            self.move_to(c);
        }
        if cpu.is_some() && self.on == cpu {
            std::thread::yield_now();
        } else {
            std::thread::sleep(self.pause);
            self.pause = (self.pause * 2).min(Duration::from_millis(1));
        }
        true
    }

    fn move_to(&mut self, cpu: u32) {
        use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};
        if self.restore.is_none() {
            match sched_getaffinity(None) {
                Ok(old) if old.is_set(cpu as usize) => self.restore = Some(old),
                _ => return,
            }
        }
        let mut only = CpuSet::new();
        only.set(cpu as usize);
        self.on = sched_setaffinity(None, &only).ok().map(|()| cpu);
    }
}

/// Waits a busy read makes at least, even past `Options::busy_timeout`.
const MIN_WAITS: u32 = 16;

impl Drop for Patience {
    fn drop(&mut self) {
        if let Some(old) = &self.restore {
            let _ = rustix::thread::sched_setaffinity(None, old);
        }
    }
}
