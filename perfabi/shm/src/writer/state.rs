//! The writer's state: everything a [`Writer`](super::Writer) and its
//! heartbeat thread share.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

use perfabi::layout::{FamilyHeader, Header, InstanceEntry, INSTANCE_ENTRY_WORDS};
use perfabi::validate::Layout;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{percpu, segment, Health, Meta};

/// The writer's state, shared with its heartbeat thread.
pub(crate) struct State {
    pub(crate) backing: segment::Backing,
    pub(crate) path: Option<PathBuf>,
    /// The folder and name of the segment file (`None`: a memfd).
    pub(crate) place: Option<segment::Place>,
    /// The geometry; its `epoch` is the first one (see [`Writer::epoch`]).
    pub(crate) layout: Layout,
    /// The header as this writer laid it out (its fixed part is compared
    /// with the segment's at every heartbeat).
    pub(crate) header: Mutex<Header>,
    /// The ABI 1.1 header fields as laid out (zero without family tables);
    /// only `families_used` and `members_used` change.
    pub(crate) family_header: FamilyHeader,
    /// The current epoch (new after a re-creation).
    pub(crate) epoch: AtomicU64,
    /// The last heartbeat found the segment damaged and could not mend it.
    pub(crate) damaged: AtomicBool,
    /// What the last heartbeat found.
    pub(crate) health: Mutex<Health>,
    pub(crate) engine: percpu::Engine,
    pub(crate) meta: Mutex<Meta>,
    /// `live[slot]`: registration id of the live instance in `slot`, or 0.
    pub(crate) live: Box<[AtomicU64]>,
    /// `external[slot]`: registration id of a live external instance, or 0.
    pub(crate) external: Box<[AtomicU64]>,
    /// The shape of the registration live in each value slot (see
    /// [`shape`]): what the hot paths check, from the writer's own books,
    /// before they write (a handle's own claims are not believed).
    pub(crate) shape: Box<[AtomicU64]>,
    pub(crate) set_lock: Mutex<()>,
    pub(crate) aggregations: Mutex<BTreeMap<(u64, u64), u64>>,
    /// The segment directory the writer was created in
    /// ([`super::Writer::create_in`]): its heartbeat thread folds it now
    /// and then (`spec/PERFABI.md` §15.5).
    pub(crate) fold_dir: std::sync::OnceLock<PathBuf>,
    /// The liveness lock on the segment file, held for the writer's life
    /// (none for a memfd, `spec/PERFABI.md` §10).
    pub(crate) live_lock: super::live_lock::LiveLock,
}

/// True if `live` (a slot's entry in [`State::live`]) holds `reg_id`: the
/// registration check of every use of an id or a handle, one load.
#[inline(always)]
pub(crate) fn registered(live: &AtomicU64, reg_id: u64) -> bool {
    // Acquire: the slot's shape was stored before its id.
    live.load(Ordering::Acquire) == reg_id
}

/// A value slot's shape word: its kind (bits 0..8) and the words of its
/// registration (bits 32..; 1 except for a histogram member).
pub(crate) fn shape(kind: perfabi::Kind, words: usize) -> u64 {
    kind as u64 | (words as u64) << 32
}

impl State {
    /// The kind of the registration live in value slot `slot`, if any.
    pub(crate) fn kind(&self, slot: u32) -> Option<perfabi::Kind> {
        let s = self.shape.get(slot as usize)?.load(Ordering::Relaxed);
        perfabi::Kind::from_raw((s & 0xff) as u32)
    }

    /// The value words of the registration live in value slot `slot`.
    pub(crate) fn words_at(&self, slot: u32) -> usize {
        self.shape
            .get(slot as usize)
            .map_or(0, |s| (s.load(Ordering::Relaxed) >> 32) as usize)
    }

    /// Adds `delta` (wrapping) to word `w` on the current CPU: the one
    /// path of `Writer::adjust` and `Counter::adjust` after their
    /// registration check (see [`percpu::Engine::add`]).
    ///
    /// # Safety
    ///
    /// `w` was made by `self.engine`.
    #[inline(always)]
    pub(crate) unsafe fn add(&self, w: percpu::Word, delta: i64) -> Result<(), perfabi::Error> {
        // SAFETY: `w` is this engine's (the caller's contract), and the
        // segment and layout are the ones the engine was made for.
        unsafe {
            self.engine
                .add(w, || (self.words(), &self.layout), delta as u64)
        }
    }

    /// The segment as atomic words.
    pub(crate) fn words(&self) -> &[AtomicU64] {
        self.backing.words()
    }

    /// The current epoch.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch.load(Ordering::Relaxed)
    }

    /// Stores instance entry `e` in `slot` of the table.
    pub(crate) fn store_entry(&self, slot: u32, e: &InstanceEntry) {
        let ew: [u64; INSTANCE_ENTRY_WORDS] = bytemuck::cast(*e);
        let base = self.layout.instance_word(slot as usize);
        for (i, v) in ew.into_iter().enumerate() {
            self.words()[base + i].store(v, Ordering::Relaxed);
        }
    }
}
