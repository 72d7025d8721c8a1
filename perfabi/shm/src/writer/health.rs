//! Keeping the promises of the header: the heartbeat, the repair of
//! blocks left busy, and the segment kept whole (`spec/PERFABI.md` §10,
//! §11.5).

use std::io;

use perfabi::layout::*;
use std::sync::atomic::Ordering;

use super::state::State;
use super::{boottime_ns, new_epoch, store_header, Health};

impl State {
    /// One heartbeat: see [`Writer::heartbeat`](super::Writer::heartbeat).
    pub(crate) fn heartbeat(&self) -> Health {
        let health = match self.diagnose() {
            None => Health::Intact,
            Some(why) => match self.recreate() {
                Ok(epoch) => Health::Recreated { why, epoch },
                Err(e) => Health::Damaged {
                    why,
                    error: e.to_string(),
                },
            },
        };
        self.damaged
            .store(matches!(health, Health::Damaged { .. }), Ordering::Relaxed);
        self.beat();
        *self.health.lock().unwrap_or_else(|p| p.into_inner()) = health.clone();
        health
    }

    /// What the last heartbeat found.
    pub(crate) fn last_health(&self) -> Health {
        self.health
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Repairs blocks left busy, then stores the heartbeat.
    fn beat(&self) {
        self.engine.sweep(self.words(), &self.layout);
        self.words()[HEADER_HEARTBEAT_WORD].store(boottime_ns(), Ordering::Release);
    }

    /// What is wrong with the segment, if anything: a page truncated away,
    /// a file shorter than the segment or with a hole in it, a fixed header
    /// field that is no longer what this writer wrote, or a path that no
    /// longer names it.
    ///
    /// Damage that the writer's own stores cover up before a heartbeat (a
    /// hole punched in a counter page that the next update fills again) is
    /// not seen: only the file's owner can do that (`spec/PERFABI.md` §11.5).
    fn diagnose(&self) -> Option<String> {
        if self.backing.faulted() {
            return Some("a page of it was truncated away under the writer".into());
        }
        if let Some(place) = &self.place {
            let size = self.backing.len();
            match self.backing.extent() {
                Some((len, _)) if len < size => {
                    return Some(format!("it was truncated to {len} of {size} bytes"))
                }
                Some((_, hole)) if hole < size => {
                    return Some(format!(
                        "it has a hole at byte {hole} (truncated and grown again, or punched)"
                    ))
                }
                _ => {}
            }
            let ours = self.backing.id().ok();
            match place.current() {
                Ok(None) => return Some("it was removed from its path".into()),
                Ok(Some(id)) if Some(id) != ours => {
                    return Some("its path names another file now".into())
                }
                _ => {}
            }
        }
        let expected: [u64; HEADER_WORDS] =
            bytemuck::cast(*self.header.lock().unwrap_or_else(|p| p.into_inner()));
        let words = self.words();
        // The fixed words of the 1.1 fields too: all but the two counts.
        let ext: [u64; FAMILY_HEADER_WORDS] = bytemuck::cast(self.family_header);
        let fixed_ext = if self.layout.families.is_some() {
            HEADER_FAMILIES_USED_WORD - HEADER_WORDS
        } else {
            0
        };
        let changed = (0..HEADER_GEN1_WORD)
            .any(|i| words[i].load(Ordering::Relaxed) != expected[i])
            || (0..fixed_ext).any(|i| words[HEADER_WORDS + i].load(Ordering::Relaxed) != ext[i]);
        changed.then(|| "its header was overwritten".into())
    }

    /// Creates the segment again at its path: a new file under a new epoch,
    /// mapped where the old one was (so updates running meanwhile keep
    /// going), with this writer's live instances in their slots under their
    /// ids, then renamed over the damaged file. Returns the new epoch.
    fn recreate(&self) -> io::Result<u64> {
        let place = self.place.as_ref().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::Unsupported,
                "a memfd segment has no path to be created again at",
            )
        })?;
        let m = self.meta.lock().unwrap_or_else(|p| p.into_inner());
        if self.diagnose().is_none() {
            // Another thread's heartbeat mended it meanwhile.
            return Ok(self.epoch());
        }
        // Never over another writer's segment: only where ours is (the
        // file mapped, or the published one whose lock is still held after
        // a publish that failed), or nothing.
        let ours = self.backing.id()?;
        let published = self.live_lock.id();
        if place
            .current()?
            .is_some_and(|id| id != ours && Some(id) != published)
        {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "its path names another file now (another writer's?): not replacing it",
            ));
        }
        let mut h = *self.header.lock().unwrap_or_else(|p| p.into_inner());
        h.epoch = new_epoch()?;
        let tmp = self.backing.replace(place)?;
        // The new file's liveness lock, held before it is published. The
        // damaged file's is held until the new file has its name: a fold
        // that sees it released then finds the name naming another file,
        // and never folds the live writer's counts under its identity
        // (§10, §15.5).
        let live = match place.live_lock(&tmp, self.backing.file()) {
            Ok(live) => live,
            Err(e) => {
                place.discard(&tmp);
                return Err(e);
            }
        };
        h.flags &= !FLAG_LIVE_LOCK;
        if live.held() {
            h.flags |= FLAG_LIVE_LOCK;
        }
        h.heartbeat_ns = boottime_ns();
        h.instances_used = u64::from(m.used);
        let words = self.words();
        store_header(words, &h, &self.family_header);
        for (&slot, e) in &m.entries {
            self.store_entry(slot, e);
        }
        for (&slot, f) in &m.fams.families {
            self.store_family(slot, &f.entry);
        }
        for (&slot, e) in &m.fams.members {
            self.store_member(slot, e);
        }
        if self.layout.families.is_some() {
            words[HEADER_FAMILIES_USED_WORD]
                .store(u64::from(m.fams.families_used), Ordering::Relaxed);
            words[HEADER_MEMBERS_USED_WORD]
                .store(u64::from(m.fams.members_used), Ordering::Relaxed);
        }
        // The mapping holds the new segment now, published or not.
        self.epoch.store(h.epoch, Ordering::Relaxed);
        *self.header.lock().unwrap_or_else(|p| p.into_inner()) = h;
        // If this fails, the path still names the damaged file, whose lock
        // is still held (its writer lives): the next heartbeat finds it and
        // tries again.
        place.publish(&tmp)?;
        self.live_lock.replace(live);
        Ok(h.epoch)
    }

    /// Marks the segment closed (its last heartbeat first).
    pub(crate) fn mark_closed(&self) {
        self.beat(); // also repairs blocks left busy, so final values read
        self.words()[HEADER_FLAGS_WORD].fetch_or(FLAG_CLOSED, Ordering::Release);
    }
}
