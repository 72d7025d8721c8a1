//! The userspace segment writer.
//!
//! ```no_run
//! use perfabi_shm::writer::{Config, Writer};
//! use perfabi::Semantics;
//!
//! let w = Writer::create("/dev/shm/myapp.perfabi", &Config::default())?;
//! let rx = w.add("net.rx_bytes", "bytes", Semantics::Counter)?;
//! w.adjust(rx, 1500)?; // a few ns (see the README's Performance), from any thread
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Counters live in the block of the CPU the calling thread runs on; readers
//! sum the blocks. For a hot counter, take a [`Counter`] handle once
//! ([`Writer::counter`]) and adjust through it: the id is not looked up
//! again, only its registration checked (one load). Metadata changes
//! (`add`, `del`) are serialised by a mutex and published with the
//! `gen1`/`gen2` protocol. The segment is created
//! complete under a temporary name and renamed into place, so no reader ever
//! sees a half-built header; it never shrinks while it exists.
//!
//! The writer keeps its segment healthy: [`Writer::heartbeat`] checks that
//! the file is still whole (not truncated, zeroed, overwritten or holed by
//! someone else) and, if it is not, creates it again at its path under a new
//! epoch, with the same instances (see [`Health`]).

mod counter;
mod families;
pub mod fold;
mod health;
mod heartbeat;
pub mod live_lock;
mod percpu;
#[cfg(all(target_arch = "x86_64", target_env = "gnu"))]
mod rseq;
mod segment;
pub mod series;
mod state;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use perfabi::damon::{self, Aggregation};
use perfabi::layout::*;
use perfabi::name;
use perfabi::protocol::{gen_write_begin, gen_write_end, Sound, DEFAULT_RETRIES, MAX_GROUP};
use perfabi::view::{SegmentView, Snapshot};
use perfabi::Error;
use perfabi::{validate_header, Geometry, Layout, WriterIdentity};
use std::sync::atomic::{AtomicU64, Ordering};

use self::state::State;
use crate::host::process_start_ns;
pub use crate::host::{boottime_ns, possible_cpus};
pub use counter::Counter;
pub use families::{FamilyId, MemberId};
pub use percpu::{Method, MethodChoice, UpdateStats};
pub use series::{series_instance, series_member, SeriesMember, SERIES_DIMENSION};

/// What a writer creates.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Per-CPU blocks; `None`: one per possible CPU (required for rseq).
    pub nr_cpus: Option<u32>,
    /// Instance table capacity.
    pub max_instances: u32,
    /// Family table capacity (spec §5.1); 0, with `max_members` 0, makes an
    /// ABI 1.0 segment without families.
    pub max_families: u32,
    /// Member (family instance) table capacity. Members' values share the
    /// counter arrays with instances: a histogram member takes
    /// `2 + buckets` of the `max_instances` value slots.
    pub max_members: u32,
    /// DAMON ring slots per CPU. An aggregation must fit in one ring; keep
    /// it at least twice the largest aggregation so the previous complete
    /// one survives while the next is written.
    pub damon_capacity: u32,
    /// Heartbeat interval promised to readers (0: no heartbeat).
    pub heartbeat_interval: Duration,
    /// A thread of the writer's own keeps the promise: it calls
    /// [`Writer::heartbeat`] every half interval (default). Turn it off only
    /// if the application calls `heartbeat` itself often enough.
    pub auto_heartbeat: bool,
    /// How per-CPU updates are made exclusive.
    pub method: MethodChoice,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            nr_cpus: None,
            max_instances: 1024,
            max_families: 128,
            max_members: 1024,
            damon_capacity: 4096,
            heartbeat_interval: Duration::from_secs(1),
            auto_heartbeat: true,
            method: MethodChoice::Auto,
        }
    }
}

/// Why a segment could not be created.
#[derive(Debug)]
pub enum CreateError {
    /// The configuration is outside what the ABI can describe.
    Abi(Error),
    /// The file or memfd could not be created, sized or mapped.
    Io(io::Error),
}

impl fmt::Display for CreateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Abi(e) => write!(f, "invalid segment configuration: {e}"),
            Self::Io(e) => write!(f, "cannot create the segment: {e}"),
        }
    }
}

impl std::error::Error for CreateError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Abi(e) => Some(e),
            Self::Io(e) => Some(e),
        }
    }
}

impl From<io::Error> for CreateError {
    fn from(e: io::Error) -> Self {
        Self::Io(e)
    }
}

/// A registered instance: its slot and registration id. Stale ids (deleted
/// instances, or ids of another segment) are refused, not misapplied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct InstanceId {
    slot: u32,
    reg_id: u64,
}

impl InstanceId {
    /// The instance's slot in the table and counter arrays.
    pub fn slot(&self) -> u32 {
        self.slot
    }
    /// Its registration id.
    pub fn reg_id(&self) -> u64 {
        self.reg_id
    }
}

/// An instance whose per-CPU values come from outside (such as `/proc/stat`)
/// and are stored whole with [`Writer::publish_per_cpu`]. It cannot be
/// adjusted, so its stores never race a per-CPU update.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ExternalId(InstanceId);

pub(crate) struct Meta {
    /// The live slots by their names' clash keys (spec §5): live names must
    /// be distinct to consumers, not only as bytes.
    pub(crate) names: HashMap<String, perfabi::Named>,
    /// The entry of every live slot (to lay the table out again in a
    /// re-created segment).
    pub(crate) entries: BTreeMap<u32, InstanceEntry>,
    /// Freed single value slots, reused oldest first.
    pub(crate) free: VecDeque<u32>,
    /// Freed ranges of several value slots (histogram members): (start, len).
    pub(crate) runs: Vec<(u32, u32)>,
    /// One counter for the registration ids of entries, families and
    /// members: an id names one registration in the whole segment.
    pub(crate) next_reg: u64,
    /// Value slots `0..used` may be in use (`instances_used`).
    pub(crate) used: u32,
    /// Families and their members.
    pub(crate) fams: families::FamilyMeta,
}

/// What [`Writer::heartbeat`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Health {
    /// The segment is whole.
    Intact,
    /// Someone damaged the segment (`why`); the writer created it again at
    /// its path, under the new `epoch`, with the same instances (whose
    /// values start again from zero) and the same ids.
    Recreated {
        /// What was wrong.
        why: String,
        /// The new epoch.
        epoch: u64,
    },
    /// Someone damaged the segment (`why`) and it could not be created
    /// again (`error`; a memfd has no path to create it at). Readers see an
    /// error; the writer keeps accepting updates and tries again at the
    /// next heartbeat.
    Damaged {
        /// What is wrong.
        why: String,
        /// Why it could not be created again.
        error: String,
    },
}

/// The writer of one segment.
///
/// Unless [`Config::auto_heartbeat`] is off, a thread of its own refreshes
/// the heartbeat and keeps the segment whole (see [`Writer::heartbeat`])
/// every half `heartbeat_interval`; it stops when the writer is closed or
/// dropped.
pub struct Writer {
    state: Arc<State>,
    heart: Option<heartbeat::Thread>,
}

impl Writer {
    /// Creates a segment file at `path` (normally on tmpfs, e.g. under
    /// `/dev/shm`): built under a temporary name with `O_EXCL`, then renamed
    /// into place, replacing an older segment (whose readers see a new inode
    /// and epoch).
    pub fn create(path: impl AsRef<Path>, config: &Config) -> Result<Self, CreateError> {
        let path = path.as_ref();
        if let Ok(md) = std::fs::symlink_metadata(path) {
            if md.is_dir() {
                return Err(CreateError::Io(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} is a directory", crate::safe_open::escape_path(path)),
                )));
            }
        }
        let geometry = geometry(config)?;
        let (mut h, fh, layout) = first_header(&geometry, config)?;
        let place = segment::Place::of(path)?;
        let (backing, tmp) = segment::Backing::temp_file(&place, h.segment_size)?;
        // Held before the segment is published, for the writer's life.
        let live = place.live_lock(&tmp, backing.file()).inspect_err(|_| {
            place.discard(&tmp);
        })?;
        if live.held() {
            h.flags |= FLAG_LIVE_LOCK;
        }
        let mut state = Self::init(
            backing,
            Some((path.to_path_buf(), place)),
            (h, fh),
            layout,
            config,
        );
        state.live_lock = live;
        let place = state.place.as_ref().expect("a file segment has a place");
        place.publish(&tmp)?;
        Ok(Self::start(state, config))
    }

    /// Creates a segment of the writer `name` in the segment directory
    /// `dir` (`spec/PERFABI.md` §15), under a file name of its own,
    /// `<name>.<pid>.<nonce>.perfabi`, new at each creation (a restarted
    /// worker never reuses a dead one's file). The directory is created
    /// (mode `0755`) if absent, and refused if another user could replace
    /// its files ([`directory::prepare`](crate::directory::prepare)).
    /// `name`: 1 to 64 ASCII letters, digits, `_` or `-`
    /// ([`directory::program_name`](crate::directory::program_name) is a
    /// good default); [`directory::default_dir`](crate::directory::default_dir)
    /// is the directory readers look in by default.
    pub fn create_in(
        dir: impl AsRef<Path>,
        name: &str,
        config: &Config,
    ) -> Result<Self, CreateError> {
        let dir = dir.as_ref();
        let file = crate::directory::SegmentName::new(name)?;
        crate::directory::prepare(dir).map_err(|e| {
            CreateError::Io(match e.problem {
                crate::safe_open::Problem::Io(io) => io::Error::new(
                    io.kind(),
                    format!(
                        "cannot use the segment directory {}: {io}",
                        crate::safe_open::escape_path(dir)
                    ),
                ),
                _ => io::Error::new(io::ErrorKind::PermissionDenied, e.to_string()),
            })
        })?;
        let w = Self::create(dir.join(file.to_string()), config)?;
        // Dead writers' counts of this user are folded now and then: at
        // every creation in a directory, and every `heartbeat::FOLD_EVERY`
        // beats of the writer's heartbeat thread. Never fatal: a fold that
        // cannot run leaves the files, which readers still count.
        let _ = w.state.fold_dir.set(dir.to_path_buf());
        let _ = fold::fold(dir);
        Ok(w)
    }

    /// Creates an anonymous segment in a memfd sealed against shrinking;
    /// hand [`fd`](Self::fd) to readers (over a Unix socket, or as
    /// `/proc/PID/fd/N`).
    pub fn create_memfd(name: &str, config: &Config) -> Result<Self, CreateError> {
        let geometry = geometry(config)?;
        let (h, fh, layout) = first_header(&geometry, config)?;
        let backing = segment::Backing::memfd(name, h.segment_size)?;
        Ok(Self::start(
            Self::init(backing, None, (h, fh), layout, config),
            config,
        ))
    }

    /// The writer of `state`, with its heartbeat thread if configured.
    fn start(state: State, config: &Config) -> Self {
        let state = Arc::new(state);
        let heart = (config.auto_heartbeat && !config.heartbeat_interval.is_zero())
            .then(|| heartbeat::Thread::start(&state, config.heartbeat_interval / 2));
        Self { state, heart }
    }

    /// The writer's state, around a `backing` that holds the segment of
    /// header `h`, laid out as `layout`.
    fn init(
        backing: segment::Backing,
        file: Option<(PathBuf, segment::Place)>,
        (h, fh): (Header, FamilyHeader),
        layout: Layout,
        config: &Config,
    ) -> State {
        store_header(backing.words(), &h, &fh);
        let n = layout.max_instances;
        let (path, place) = file.unzip();
        State {
            engine: percpu::Engine::new(backing.words(), &layout, config.method),
            backing,
            path,
            place,
            layout,
            header: Mutex::new(h),
            family_header: fh,
            epoch: AtomicU64::new(h.epoch),
            damaged: std::sync::atomic::AtomicBool::new(false),
            health: Mutex::new(Health::Intact),
            meta: Mutex::new(Meta {
                names: HashMap::new(),
                entries: BTreeMap::new(),
                free: VecDeque::new(),
                runs: Vec::new(),
                // Random per writer (from its first epoch), so that an id
                // of another writer is refused, not misapplied.
                next_reg: (h.epoch >> 20) | 1,
                used: 0,
                fams: Default::default(),
            }),
            live: (0..n).map(|_| AtomicU64::new(0)).collect(),
            external: (0..n).map(|_| AtomicU64::new(0)).collect(),
            shape: (0..n).map(|_| AtomicU64::new(0)).collect(),
            set_lock: Mutex::new(()),
            aggregations: Mutex::new(BTreeMap::new()),
            fold_dir: std::sync::OnceLock::new(),
            live_lock: live_lock::LiveLock::none(),
        }
    }

    /// The segment's validated geometry.
    pub fn layout(&self) -> &Layout {
        &self.state.layout
    }
    /// Where the segment file is (`None` for a memfd).
    pub fn path(&self) -> Option<&Path> {
        self.state.path.as_deref()
    }
    /// The segment's file descriptor (to pass a memfd to readers).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.state.backing.file().as_fd()
    }
    /// This incarnation's epoch (a new one after the segment was created
    /// again, see [`Health::Recreated`]).
    pub fn epoch(&self) -> u64 {
        self.state.epoch.load(Ordering::Relaxed)
    }
    /// How per-CPU updates are made exclusive in this process.
    pub fn method(&self) -> Method {
        self.state.engine.method()
    }
    /// True while the segment is known to be damaged by someone else (an
    /// access found the file truncated, or the last [`heartbeat`](Self::heartbeat)
    /// found it damaged and could not create it again): readers see an
    /// error. The writer itself keeps running.
    pub fn damaged(&self) -> bool {
        self.state.backing.faulted() || self.state.damaged.load(Ordering::Relaxed)
    }

    /// How often the update engine took its slow paths in this process.
    pub fn update_stats(&self) -> UpdateStats {
        self.state.engine.stats()
    }
    /// A reader's view of this writer's own segment (through the geometry
    /// the writer laid out, which holds even if someone damaged the file).
    pub fn view(&self) -> SegmentView<'_> {
        let layout = Layout {
            epoch: self.epoch(),
            ..self.state.layout
        };
        SegmentView::from_validated(self.state.words(), layout)
            .expect("the writer maps its whole segment")
    }
    /// A consistent snapshot of this writer's own segment.
    pub fn snapshot(&self) -> Result<Snapshot, Error> {
        self.view().snapshot(DEFAULT_RETRIES)
    }

    /// Registers an unsigned instance. May block on other metadata changes.
    pub fn add(&self, name: &str, unit: &str, semantics: Semantics) -> Result<InstanceId, Error> {
        self.add_typed(name, unit, semantics, ValueType::U64)
    }

    /// Registers an instance of the given value type.
    pub fn add_typed(
        &self,
        name: &str,
        unit: &str,
        semantics: Semantics,
        value_type: ValueType,
    ) -> Result<InstanceId, Error> {
        name::check_name(name)?;
        name::check_unit(unit)?;
        let mut m = self.state.meta.lock().unwrap_or_else(|p| p.into_inner());
        let key = name::clash_key(name);
        if m.names.contains_key(&key) || m.prefix_of_family(name) {
            return Err(Error::DuplicateName);
        }
        let slot = m.alloc_values(1, self.state.layout.max_instances)?;
        let reg_id = m.next_reg;
        m.next_reg += 1;
        let entry = InstanceEntry {
            name: name::encode(name),
            unit: name::encode(unit),
            reg_id,
            state: SlotState::Live as u32,
            semantics: semantics as u32,
            value_type: value_type as u32,
            reserved0: 0,
            reserved: [0; 3],
        };
        let words = self.state.words();
        let g = gen_write_begin::<Sound>(&words[HEADER_GEN1_WORD]);
        // The slot is free: no adjust writes it, so zeroing it on every CPU
        // cannot race with a per-CPU update; readers ignore the in-between
        // state because the generation is moving.
        for cpu in 0..self.state.layout.nr_cpus {
            words[self.state.layout.counter_word(cpu, slot as usize)].store(0, Ordering::Relaxed);
        }
        self.state.store_entry(slot, &entry);
        if slot == m.used {
            m.used += 1;
            words[HEADER_USED_WORD].store(u64::from(m.used), Ordering::Relaxed);
        }
        gen_write_end::<Sound>(&words[HEADER_GEN2_WORD], g);
        m.names.insert(key, perfabi::Named::Entry(slot));
        m.entries.insert(slot, entry);
        self.state.shape[slot as usize].store(state::shape(semantics.into(), 1), Ordering::Relaxed);
        self.state.live[slot as usize].store(reg_id, Ordering::Release);
        Ok(InstanceId { slot, reg_id })
    }

    /// Registers an instance whose per-CPU values are published from outside
    /// with [`publish_per_cpu`](Self::publish_per_cpu).
    pub fn add_external(
        &self,
        name: &str,
        unit: &str,
        semantics: Semantics,
        value_type: ValueType,
    ) -> Result<ExternalId, Error> {
        let id = self.add_typed(name, unit, semantics, value_type)?;
        // Only publish_per_cpu writes it: take it out of adjust's reach.
        self.state.live[id.slot as usize].store(0, Ordering::Relaxed);
        self.state.external[id.slot as usize].store(id.reg_id, Ordering::Relaxed);
        Ok(ExternalId(id))
    }

    /// Stores `values[cpu]` as the value of `id` on each CPU (CPUs past
    /// `values.len()` get 0). Each value is one atomic word; a reader sees
    /// every value whole, but values of different CPUs may come from
    /// different publications.
    pub fn publish_per_cpu(&self, id: ExternalId, values: &[u64]) -> Result<(), Error> {
        let slot = self.external_slot(id)?;
        let words = self.state.words();
        for cpu in 0..self.state.layout.nr_cpus {
            let v = values.get(cpu).copied().unwrap_or(0);
            words[self.state.layout.counter_word(cpu, slot)].store(v, Ordering::Relaxed);
        }
        Ok(())
    }

    /// The slot of a live external instance, or `UnknownInstance`.
    fn external_slot(&self, id: ExternalId) -> Result<usize, Error> {
        let slot = id.0.slot as usize;
        let live = self
            .state
            .external
            .get(slot)
            .map(|r| r.load(Ordering::Relaxed));
        if live == Some(id.0.reg_id) {
            Ok(slot)
        } else {
            Err(Error::UnknownInstance)
        }
    }

    /// Unregisters an external instance.
    pub fn del_external(&self, id: ExternalId) -> Result<(), Error> {
        let slot = self.external_slot(id)?;
        // del() checks `live`: give the id back to it for the removal.
        self.state.external[slot].store(0, Ordering::Relaxed);
        self.state.live[slot].store(id.0.reg_id, Ordering::Relaxed);
        self.del(id.0)
    }

    /// Unregisters an instance. Its slot is reused last, under a new
    /// registration id, so a reader holding the old id sees it vanish.
    /// Adjusting an id concurrently with deleting it is a caller bug; its
    /// only effect is on that slot's values.
    pub fn del(&self, id: InstanceId) -> Result<(), Error> {
        let mut m = self.state.meta.lock().unwrap_or_else(|p| p.into_inner());
        self.check(id)?;
        self.state.live[id.slot as usize].store(0, Ordering::Relaxed);
        let words = self.state.words();
        let g = gen_write_begin::<Sound>(&words[HEADER_GEN1_WORD]);
        let base = self.state.layout.instance_word(id.slot as usize);
        let state_word = core::mem::offset_of!(InstanceEntry, state) / 8;
        let mut e: [u64; INSTANCE_ENTRY_WORDS] = [0; INSTANCE_ENTRY_WORDS];
        perfabi::protocol::load_words(words, base, &mut e);
        let mut entry: InstanceEntry = bytemuck::cast(e);
        entry.state = SlotState::Free as u32;
        let ew: [u64; INSTANCE_ENTRY_WORDS] = bytemuck::cast(entry);
        words[base + state_word].store(ew[state_word], Ordering::Relaxed);
        gen_write_end::<Sound>(&words[HEADER_GEN2_WORD], g);
        if let Some(old) = m.entries.remove(&id.slot) {
            m.names.remove(&name::clash_key(
                name::decode(&old.name).unwrap_or_default(),
            ));
        }
        m.free.push_back(id.slot);
        Ok(())
    }

    /// The registration check of every use of an id: one load of the
    /// slot's live registration id (and the bounds check of the slot, which
    /// may come from another writer's larger table).
    #[inline(always)]
    fn check(&self, id: InstanceId) -> Result<(), Error> {
        match self.state.live.get(id.slot as usize) {
            Some(live) if state::registered(live, id.reg_id) => Ok(()),
            _ => Err(Error::UnknownInstance),
        }
    }

    /// Adds `delta` (wrapping) to the instance's value on the current CPU.
    /// Callable from any number of threads at once; never blocks.
    ///
    /// Inlined into the caller: with the rseq method the committed path is
    /// one straight line of about 22 instructions (the registration check,
    /// the engine's fields, then one rseq section), with no call and no
    /// taken branch; `perfabi/shm/benches/adjust-instructions` counts them.
    /// A [`Counter`] ([`counter`](Self::counter)) checks the id once and
    /// adjusts with less work (13 instructions in a loop).
    #[inline(always)]
    pub fn adjust(&self, id: InstanceId, delta: i64) -> Result<(), Error> {
        self.check(id)?;
        let state = &*self.state;
        // SAFETY: the word is made by `state.engine`, for a slot `check`
        // found in `live`, whose length is `max_instances` of
        // `state.layout`, the engine's layout.
        unsafe { state.add(state.engine.counter(id.slot as usize), delta) }
    }

    /// A handle that adjusts `id` with less work than [`adjust`](Self::adjust)
    /// (see [`Counter`]): `id` is checked now, and at every adjust only by
    /// one load of its slot's registration id. `UnknownInstance` if `id` is
    /// not live (deleted, external, or of another writer).
    #[inline]
    pub fn counter(&self, id: InstanceId) -> Result<Counter<'_>, Error> {
        Counter::new(&self.state, id)
    }

    /// Adds several deltas as one update: a reader sees all of them or none
    /// (at most [`MAX_GROUP`] members).
    pub fn adjust_group(&self, deltas: &[(InstanceId, i64)]) -> Result<(), Error> {
        if deltas.len() > MAX_GROUP {
            return Err(Error::GroupTooLarge);
        }
        let mut ops = [percpu::WordDelta::default(); MAX_GROUP];
        for (o, &(id, d)) in ops.iter_mut().zip(deltas) {
            self.check(id)?;
            *o = percpu::WordDelta {
                index: self.state.layout.counters_offset / 8 + id.slot as usize,
                val: d as u64,
            };
        }
        self.state
            .engine
            .group(self.state.words(), &self.state.layout, &ops[..deltas.len()])
    }

    /// Sets an [`Semantics::Instant`] instance so that its value (the sum
    /// over CPUs) becomes `value`: the current CPU's contribution absorbs the
    /// difference. Adjusts racing with `set` count as happening before or
    /// after it; concurrent `set`s are serialised.
    pub fn set(&self, id: InstanceId, value: i64) -> Result<(), Error> {
        self.check(id)?;
        if self.state.kind(id.slot) != Some(Kind::Gauge) {
            return Err(Error::NotInstant);
        }
        let _g = self
            .state
            .set_lock
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let words = self.state.words();
        let total = (0..self.state.layout.nr_cpus)
            .map(|c| {
                words[self.state.layout.counter_word(c, id.slot as usize)].load(Ordering::Relaxed)
            })
            .fold(0u64, u64::wrapping_add);
        self.adjust(id, (value as u64).wrapping_sub(total) as i64)
    }

    /// Publishes one DAMON aggregation: its records go to the current CPU's
    /// ring (or rings, if the thread migrates), in updates of up to 32
    /// records (rseq method) or in one update (lock method). The
    /// writer numbers it (1, 2, 3… per monitor and target; `a.aggregation`
    /// is ignored) and returns the index it gave.
    pub fn publish_damon(&self, a: &Aggregation) -> Result<u64, Error> {
        let regions = &a.regions;
        if regions.len() > self.state.layout.damon_capacity {
            // It could never be complete in a ring: count it as dropped.
            self.count_dropped_regions(regions.len() as u64)?;
        }
        damon::check_regions(regions, a.intervals, self.state.layout.damon_capacity)?;
        let n = regions.len() as u32;
        let mut aggs = self
            .state
            .aggregations
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let agg = aggs.entry((a.monitor_id, a.target_id)).or_insert(0);
        *agg += 1;
        // Every record is this one with its region's index and fields.
        let template = damon::to_record(
            a.monitor_id,
            a.target_id,
            *agg,
            0,
            n,
            a.intervals,
            &regions[0],
        );
        self.state.engine.write_records(
            self.state.words(),
            &self.state.layout,
            regions,
            &template,
        )?;
        Ok(*agg)
    }

    /// Records that `n` DAMON regions could not be published (a source that
    /// lost events), in the current CPU's `damon_dropped`.
    pub fn count_dropped_regions(&self, n: u64) -> Result<(), Error> {
        self.state.engine.adjust(
            self.state.words(),
            &self.state.layout,
            CPU_DAMON_DROPPED_WORD,
            n,
        )
    }

    /// Refreshes the heartbeat (done by the writer's own thread unless
    /// [`Config::auto_heartbeat`] is off; then call it at least every
    /// `heartbeat_interval`). Also repairs any block an aborted update left
    /// busy (see [`UpdateStats::repairs`]; the calling thread may briefly
    /// pin itself to that block's CPU), and checks that the segment is still
    /// whole: if someone truncated, zeroed, overwrote or punched a hole in
    /// it, the writer creates it again at its path (see [`Health`]).
    pub fn heartbeat(&self) -> Health {
        self.state.heartbeat()
    }

    /// What the last heartbeat found (by the writer's thread or a call of
    /// [`heartbeat`](Self::heartbeat)); `Intact` before the first.
    pub fn health(&self) -> Health {
        self.state.last_health()
    }

    /// For a child of `fork()` that will never use this writer (its
    /// parent's, copied): lets go of this process's share of the segment's
    /// liveness lock (`spec/PERFABI.md` §10), so that readers see the
    /// parent's death when the parent dies, not when this child does; the
    /// parent keeps its lock. The writer must then be neither used nor
    /// dropped (dropping it marks the parent's segment closed): forget it,
    /// as the Python writer does at a fork.
    pub fn abandon_in_fork_child(&self) {
        self.state.live_lock.release();
    }

    /// Marks the segment closed: readers report the writer as gone, with the
    /// last values intact. Also done on drop.
    pub fn close(self) {
        drop(self);
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        // The heartbeat thread first: it must not refresh a closed segment.
        drop(self.heart.take());
        self.state.mark_closed();
    }
}

/// A new random, non-zero epoch.
pub(crate) fn new_epoch() -> io::Result<u64> {
    let mut epoch = [0u8; 8];
    rustix::rand::getrandom(&mut epoch, rustix::rand::GetRandomFlags::empty())?;
    Ok(u64::from_ne_bytes(epoch) | 1)
}

/// The header of a new segment of geometry `g` written by this process,
/// and its layout.
fn first_header(
    g: &Geometry,
    config: &Config,
) -> Result<(Header, FamilyHeader, Layout), CreateError> {
    let now = boottime_ns();
    let h = g
        .header(&WriterIdentity {
            epoch: new_epoch()?,
            pid: u64::from(std::process::id()),
            start_ns: process_start_ns(None).unwrap_or(now),
            first_heartbeat_ns: now,
            heartbeat_interval_ns: u64::try_from(config.heartbeat_interval.as_nanos())
                .unwrap_or(u64::MAX),
        })
        .map_err(CreateError::Abi)?;
    let fh = g.sizes().map_err(CreateError::Abi)?.families;
    let layout = validate_header(&h, &fh, h.segment_size).map_err(CreateError::Abi)?;
    Ok((h, fh, layout))
}

/// Stores the words of `h` at the start of the segment, and those of `fh`
/// after them if the segment has family tables (ABI 1.1).
pub(crate) fn store_header(words: &[AtomicU64], h: &Header, fh: &FamilyHeader) {
    let hw: [u64; HEADER_WORDS] = bytemuck::cast(*h);
    for (w, v) in words.iter().zip(hw) {
        w.store(v, Ordering::Relaxed);
    }
    if h.header_size as usize >= HEADER_SIZE_V1_1 {
        let fw: [u64; FAMILY_HEADER_WORDS] = bytemuck::cast(*fh);
        for (w, v) in words[HEADER_WORDS..].iter().zip(fw) {
            w.store(v, Ordering::Relaxed);
        }
    }
}

fn geometry(config: &Config) -> Result<Geometry, CreateError> {
    let page = rustix::param::page_size();
    let nr_cpus = match config.nr_cpus {
        Some(n) => n,
        None => possible_cpus()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                CreateError::Io(io::Error::other(
                    "cannot read /sys/devices/system/cpu/possible",
                ))
            })?,
    };
    Ok(Geometry {
        page_size: u32::try_from(page).map_err(|_| CreateError::Abi(Error::BadPageSize(0)))?,
        nr_cpus,
        max_instances: config.max_instances,
        damon_capacity: config.damon_capacity,
        max_families: config.max_families,
        max_members: config.max_members,
    })
}
