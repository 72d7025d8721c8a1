//! A dead writer's segment through a [`Segment`] (`spec/PERFABI.md` §15.5,
//! "A dead writer's busy block"): a directory reader reads a segment whose
//! writer is gone for sure as the fold will, so that a worker killed
//! inside an update neither drops its counts from the merged view until
//! the next fold nor has them jump back then.

use super::{Liveness, Segment, Snapshot};
use crate::error::Error;

impl Segment {
    /// A snapshot of this segment if its writer is gone for sure (closed,
    /// or its pid no longer the process that started it): a block its
    /// death left busy is read settled ([`perfabi::dead::snapshot`]).
    /// `Ok(None)` if the writer may be live (read it with
    /// [`snapshot`](Self::snapshot)).
    pub fn snapshot_if_dead(&mut self) -> Result<Option<Snapshot>, Error> {
        if !matches!(
            self.status().map(|(_, l)| l),
            Ok(Liveness::Closed | Liveness::Dead { .. })
        ) {
            return Ok(None);
        }
        self.prepare()?;
        let (words, layout) = (self.map.words(), *self.map.layout());
        let r = perfabi::dead::snapshot(words, layout, self.opts.retries).map(|d| d.snapshot);
        self.finish(r).map(Some)
    }
}
