//! [`Segment`]: an open, mapped, validated segment that follows its writer.

use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use perfabi::damon::Aggregation;
use perfabi::{Info, Instance, Snapshot};

use crate::error::Error;
use crate::liveness::{self, Liveness};
use crate::mapping::{FileId, MapError, Mapping};
use crate::trust::{self, Found, Trust};

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
    /// Retry bound of each consistent read (see `spec/PERFABI.md` §7.5).
    pub retries: u32,
    /// Reads fail with [`Error::Stale`] / [`Error::Closed`] when the writer
    /// is gone, instead of returning its last values.
    pub require_live: bool,
    /// Longest heartbeat silence accepted (at least 3 promised intervals).
    pub max_silence: Duration,
    /// How often the reader looks at the path (new file, grown file) and the
    /// writer's process. Reads in between cost no system call.
    pub recheck: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            trust: Trust::default(),
            max_segment_bytes: DEFAULT_MAX_SEGMENT_BYTES,
            retries: perfabi::view::DEFAULT_RETRIES,
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Handle {
    /// The instance it names.
    pub instance: Instance,
    epoch: u64,
}

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
    map: Mapping,
    /// Origin and owner of what `map` maps.
    found: Found,
    /// A read found the header changed: map again before the next read.
    remap: bool,
    /// Live instances at generation `names_gen`, for name look-ups.
    names: Vec<Instance>,
    names_gen: Option<u64>,
    checked: Instant,
    liveness: Liveness,
    stats: ReadStats,
    /// (slot, registration id) of the handles of the current `read_many`.
    keys: Vec<(u32, u64)>,
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

    fn new(source: Source, map: Mapping, found: Found, opts: Options) -> Result<Self, Error> {
        let liveness = assess(&map, found, &opts);
        Ok(Self {
            source,
            opts,
            map,
            found,
            remap: false,
            names: Vec::new(),
            names_gen: None,
            checked: Instant::now(),
            liveness,
            stats: ReadStats::default(),
            keys: Vec::new(),
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
        self.checked = Instant::now();
        let damaged = self.remap || self.map.faulted() || !self.map.intact();
        if let Source::Path(path) = &self.source {
            match std::fs::symlink_metadata(path) {
                Ok(md) => {
                    let resized = self.map.file_len.is_some_and(|len| md.len() != len);
                    if FileId::of(&md) != self.map.id || resized || damaged {
                        let path = path.clone();
                        (self.map, self.found) = map_path(&path, &self.opts)?;
                        self.remap = false;
                        self.names_gen = None;
                        self.stats.remaps += 1;
                    }
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // The writer removed it: keep the old mapping, report
                    // the liveness it shows.
                }
                Err(e) => return Err(Error::Io(path.clone(), e)),
            }
        }
        if let Source::Fd(fd) = &self.source {
            let resized = file_len(fd) != self.map.file_len;
            if resized || damaged {
                (self.map, self.found) = map_fd(fd, &self.opts)?;
                self.remap = false;
                self.names_gen = None;
                self.stats.remaps += 1;
            }
        }
        self.liveness = assess(&self.map, self.found, &self.opts);
        Ok(())
    }

    /// Before a read: re-check if it is time, or if the writer looks gone.
    fn prepare(&mut self) -> Result<(), Error> {
        let info = self.map.view().info();
        let gone = info.flags & perfabi::layout::FLAG_CLOSED != 0
            || matches!(
                self.liveness,
                Liveness::Dead { .. } | Liveness::Silent { .. }
            )
            || self.remap
            || self.map.faulted()
            || !self.map.intact();
        if gone || self.checked.elapsed() >= self.opts.recheck {
            self.refresh()?;
        }
        if self.opts.require_live {
            match self.liveness {
                Liveness::Closed => return Err(Error::Closed),
                Liveness::Dead { silent_for } | Liveness::Silent { silent_for } => {
                    self.stats.stale += 1;
                    return Err(Error::Stale {
                        pid: info.writer_pid,
                        silent_for,
                        dead: matches!(self.liveness, Liveness::Dead { .. }),
                    });
                }
                Liveness::Alive | Liveness::Kernel => {}
            }
        }
        Ok(())
    }

    /// After a read: the data is void if the file was truncated under it
    /// or its header changed (checked after the data was copied, so a copy
    /// made of a truncated file's fresh zero pages is never returned); a
    /// busy read is counted.
    fn finish<T>(&mut self, r: Result<T, perfabi::Error>) -> Result<T, Error> {
        if self.map.faulted() {
            self.stats.truncations += 1;
            return Err(Error::Truncated(self.display_path()));
        }
        if !self.map.intact() {
            self.remap = true;
            return Err(Error::HeaderChanged(self.display_path()));
        }
        r.map_err(|e| {
            if e.is_busy() {
                self.stats.busy += 1;
            }
            Error::from(e)
        })
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

    /// The live instances.
    pub fn instances(&mut self) -> Result<Vec<Instance>, Error> {
        self.prepare()?;
        let r = self.map.view().instances(self.opts.retries).map(|(v, _)| v);
        self.finish(r)
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
        let r = self.map.view().snapshot_into(snap, self.opts.retries);
        self.finish(r)
    }

    /// One counter by name: per-CPU values and total, consistent with its
    /// registration.
    pub fn counter(&mut self, name: &str) -> Result<Counter, Error> {
        let h = self.handle(name)?;
        let mut per_cpu = vec![0u64; self.map.layout.nr_cpus];
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
        self.prepare()?;
        // The instance table is decoded again only when the generation moved
        // (one load to check); read() still checks each registration id.
        let generation = self.map.view().info().generation;
        if self.names_gen != Some(generation) {
            let r = self.map.view().instances(self.opts.retries);
            let (names, g) = self.finish(r)?;
            self.names = names;
            self.names_gen = Some(g);
        }
        let instance = self
            .names
            .iter()
            .find(|i| i.name == name)
            .cloned()
            .ok_or_else(|| Error::NoSuchCounter(name.to_string()))?;
        Ok(Handle {
            instance,
            epoch: self.map.layout.epoch,
        })
    }

    /// Number of per-CPU values a [`read`](Self::read) fills per handle.
    pub fn nr_cpus(&self) -> usize {
        self.map.layout.nr_cpus
    }

    /// The hot path: reads a counter's per-CPU values into `out` (length
    /// [`nr_cpus`](Self::nr_cpus)) with no system call and no allocation.
    /// Fails with [`Error::Abi`]`(UnknownInstance)` if the counter was deleted
    /// or the segment re-created; look it up again then. Does not re-check
    /// the path or the writer: call [`refresh`](Self::refresh) (or any other
    /// method) from time to time to follow a restarted writer.
    pub fn read(&mut self, h: &Handle, out: &mut [u64]) -> Result<u64, Error> {
        self.read_many(std::slice::from_ref(h), out)
    }

    /// [`read`](Self::read) for several counters at once, inside one
    /// generation: `out` holds `nr_cpus` values per handle, in order.
    pub fn read_many(&mut self, hs: &[Handle], out: &mut [u64]) -> Result<u64, Error> {
        if hs.iter().any(|h| h.epoch != self.map.layout.epoch) {
            return Err(Error::Abi(perfabi::Error::UnknownInstance));
        }
        self.keys.clear();
        self.keys
            .extend(hs.iter().map(|h| (h.instance.slot, h.instance.reg_id)));
        let r = self
            .map
            .view()
            .read_slots(&self.keys, out, self.opts.retries);
        self.finish(r)
    }

    /// The most recent complete DAMON aggregation of every (monitor, target).
    pub fn damon(&mut self) -> Result<Vec<Aggregation>, Error> {
        self.prepare()?;
        let r = self.map.view().damon(self.opts.retries);
        self.finish(r)
    }

    /// DAMON region records the writer could not store, summed over CPUs.
    pub fn damon_dropped(&self) -> u64 {
        let v = self.map.view();
        (0..self.map.layout.nr_cpus)
            .map(|c| v.damon_dropped(c))
            .sum()
    }
}

/// The length of the file behind `fd` (`None` for devices).
fn file_len(fd: &OwnedFd) -> Option<u64> {
    let md = File::from(fd.try_clone().ok()?).metadata().ok()?;
    md.file_type().is_file().then_some(md.len())
}

fn fd_path() -> PathBuf {
    PathBuf::from("<file descriptor>")
}

fn assess(map: &Mapping, found: Found, opts: &Options) -> Liveness {
    liveness::assess(
        &map.view().info(),
        found.origin,
        found.owner,
        opts.max_silence,
    )
}

fn map_path(path: &Path, opts: &Options) -> Result<(Mapping, Found), Error> {
    let (file, md, found) = trust::open_path(path, &opts.trust)?;
    let map = Mapping::new(file, &md, found.origin, opts.max_segment_bytes)
        .map_err(|e| map_error(path, e, opts))?;
    Ok((map, found))
}

fn map_fd(fd: &OwnedFd, opts: &Options) -> Result<(Mapping, Found), Error> {
    // A descriptor is handed over on purpose (memfds are mode 0777), so
    // only the owner is checked, not the mode.
    let file = File::from(fd.try_clone().map_err(|e| Error::Io(fd_path(), e))?);
    let (md, found) = trust::check_descriptor(&file, &fd_path(), &opts.trust)?;
    let map = Mapping::new(file, &md, found.origin, opts.max_segment_bytes)
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
    }
}
