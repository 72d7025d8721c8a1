//! [`Counter`]: a handle that adjusts one instance without looking its id
//! up again.

use std::fmt;
use std::sync::atomic::AtomicU64;

use perfabi::Error;

use super::percpu::Word;
use super::state::{self, State};
use super::InstanceId;

/// A handle to adjust one registered instance (made by
/// [`Writer::counter`](super::Writer::counter)): the id, checked once, and
/// everything the fast path needs, kept ready.
///
/// [`adjust`](Self::adjust) through a handle does what
/// [`Writer::adjust`](super::Writer::adjust) does, with less work: it still
/// loads the slot's live registration id and compares it with the handle's
/// (one load, one compare), so a handle of a deleted instance, whose slot
/// may hold another registration by now, is refused
/// ([`Error::UnknownInstance`]) and never changes that registration's
/// values; but it skips the lookup of the slot through the writer's state
/// and the bounds check of the slot, and takes the addresses of the
/// counter's words and the method's values (glibc's `__rseq_offset`, the
/// number of blocks) from the handle, not from the writer.
///
/// A handle is small, `Copy`, `Send` and `Sync`, and borrows its writer:
/// keep one per hot counter (in a struct, or a local in a loop, where the
/// compiler can hold all of it in registers). It works with either
/// [`Method`](super::Method). Adjusting through a handle while its instance
/// is deleted is a caller bug, as with [`Writer::adjust`](super::Writer::adjust):
/// its only effect is on that slot's values.
///
/// ```no_run
/// use perfabi_shm::writer::{Config, Writer};
/// use perfabi::Semantics;
///
/// let w = Writer::create("/dev/shm/myapp.perfabi", &Config::default())?;
/// let rx = w.counter(w.add("net.rx_bytes", "bytes", Semantics::Counter)?)?;
/// for packet in [1500, 60, 1500] {
///     rx.adjust(packet)?;
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy)]
pub struct Counter<'w> {
    state: &'w State,
    /// `state.live[id.slot]`: the slot's live registration id.
    live: &'w AtomicU64,
    id: InstanceId,
    /// Counter `id.slot` of every block, made by `state.engine`.
    word: Word,
}

impl<'w> Counter<'w> {
    /// The handle of `id`, if `id` is live in `state`: the check of
    /// [`Writer::counter`](super::Writer::counter).
    #[inline]
    pub(super) fn new(state: &'w State, id: InstanceId) -> Result<Self, Error> {
        let live = state
            .live
            .get(id.slot as usize)
            .ok_or(Error::UnknownInstance)?;
        if !state::registered(live, id.reg_id) {
            return Err(Error::UnknownInstance);
        }
        Ok(Self {
            state,
            live,
            id,
            // SAFETY: the slot is in `live`, whose length is
            // `max_instances` of `state.layout`, the engine's layout.
            word: unsafe { state.engine.counter(id.slot as usize) },
        })
    }

    /// The instance it adjusts.
    pub fn id(&self) -> InstanceId {
        self.id
    }

    /// Adds `delta` (wrapping) to the instance's value on the current CPU,
    /// as [`Writer::adjust`](super::Writer::adjust) does: callable from any
    /// number of threads at once; never blocks. Returns
    /// [`Error::UnknownInstance`], without a write, once the instance was
    /// deleted (its slot may belong to another registration by then).
    ///
    /// Inlined into the caller: with the rseq method the committed path is
    /// one load and compare of the slot's registration id, then one rseq
    /// section, with no call and no taken branch: 13 instructions in a loop
    /// that keeps the handle in registers, a few loads more where it is
    /// read from memory; `perfabi/shm/benches/adjust-instructions --counter`
    /// counts them.
    #[inline(always)]
    pub fn adjust(&self, delta: i64) -> Result<(), Error> {
        if !state::registered(self.live, self.id.reg_id) {
            return Err(Error::UnknownInstance);
        }
        // SAFETY: `word` was made by `state.engine` (`new`).
        unsafe { self.state.add(self.word, delta) }
    }
}

impl fmt::Debug for Counter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Counter")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}
