//! The live DAMON source: `damon_aggregated` events read from the perf ring
//! buffers of every CPU, decoded with the running kernel's `format` file,
//! rebuilt into complete aggregations per (kdamond thread, target) and
//! published. Passive: it works with whatever kdamond runs and never
//! changes one.
//!
//! A kdamond can migrate between CPUs in the middle of an aggregation, so
//! events are merged across rings by timestamp (CLOCK_MONOTONIC). An event
//! can still be on its way into a ring we already drained, so events newer
//! than [`HOLD_BACK`] wait for the next round before being fed, in order.

use std::path::Path;
use std::time::Duration;

use perfabi::damon::{Aggregation, Intervals, Region};
use perfabi_record::damon::{Assembler, Event};
use perfabi_shm::writer::Writer;

use super::tracefs::{self, Field};
use super::{intervals_of, DamonCounters};
use perfabi_shm::perf_ring::{self as perf, Record, Ring};

/// How long an event waits for earlier ones still being written elsewhere.
pub const HOLD_BACK: Duration = Duration::from_millis(20);

struct Fields {
    target_id: Field,
    nr_regions: Field,
    start: Field,
    end: Field,
    nr_accesses: Field,
    age: Field,
}

impl Fields {
    fn decode(&self, ts_ns: u64, tid: u32, raw: &[u8]) -> Option<Event> {
        Some(Event {
            ts_ns,
            monitor: u64::from(tid),
            target: self.target_id.read(raw)?,
            nr_regions: u32::try_from(self.nr_regions.read(raw)?).ok()?,
            region: Region {
                start: self.start.read(raw)?,
                end: self.end.read(raw)?,
                nr_accesses: u32::try_from(self.nr_accesses.read(raw)?).ok()?,
                age: u32::try_from(self.age.read(raw)?).ok()?,
            },
        })
    }
}

/// The open source, ready to run.
pub struct TracepointSource {
    rings: Vec<Ring>,
    fields: Fields,
    asm: Assembler,
    pending: Vec<Event>,
    /// Events the kernel dropped (full ring buffers).
    pub lost: u64,
}

impl TracepointSource {
    /// Finds (mounting if needed) tracefs, reads the event's format and
    /// opens it on every CPU with `1 << pages_log2` pages of buffer each.
    pub fn open(pages_log2: u32) -> Result<TracepointSource, String> {
        let root = tracefs::root(true)?;
        let fmt = tracefs::Format::load(&root, "damon", "damon_aggregated")?;
        let fields = Fields {
            target_id: fmt.field("target_id")?,
            nr_regions: fmt.field("nr_regions")?,
            start: fmt.field("start")?,
            end: fmt.field("end")?,
            nr_accesses: fmt.field("nr_accesses")?,
            age: fmt.field("age")?,
        };
        let cpus = perfabi_shm::host::possible_cpus()
            .ok_or("cannot read /sys/devices/system/cpu/possible")?;
        let cpus: Vec<u32> = (0..cpus as u32).collect();
        let rings = perf::open_all(fmt.id, &cpus, pages_log2)?;
        Ok(TracepointSource {
            rings,
            fields,
            asm: Assembler::default(),
            pending: Vec::new(),
            lost: 0,
        })
    }

    /// Rings opened (one per online CPU).
    pub fn cpus(&self) -> usize {
        self.rings.len()
    }

    /// Waits up to `timeout` for events, then feeds every event old enough
    /// and returns the aggregations they complete.
    /// `intervals` gives the intervals of a monitor's completed
    /// aggregations.
    pub fn poll(
        &mut self,
        timeout: Duration,
        intervals: &dyn Fn(u64) -> Intervals,
    ) -> Result<Vec<(u64, Aggregation)>, String> {
        let mut fds: Vec<_> = self
            .rings
            .iter()
            .map(|r| rustix::event::PollFd::new(r.fd(), rustix::event::PollFlags::IN))
            .collect();
        let ts = rustix::time::Timespec {
            tv_sec: timeout.as_secs() as _,
            tv_nsec: timeout.subsec_nanos() as _,
        };
        match rustix::event::poll(&mut fds, Some(&ts)) {
            Ok(_) | Err(rustix::io::Errno::INTR) => {}
            Err(e) => return Err(format!("poll on the perf events: {e}")),
        }
        drop(fds);
        // Everything stamped before `cut` is in its ring by the time we read.
        let cut = monotonic_ns().saturating_sub(HOLD_BACK.as_nanos() as u64);
        let mut gap = false;
        let (pending, fields) = (&mut self.pending, &self.fields);
        let mut lost = 0;
        for r in &mut self.rings {
            let res = r.drain(&mut |rec| match rec {
                // A record whose fields do not decode is skipped (its
                // aggregation then never completes).
                Record::Sample { ts_ns, tid, raw } => {
                    pending.extend(fields.decode(ts_ns, tid, &raw))
                }
                Record::Lost(n) => {
                    lost += n;
                    gap = true;
                }
            });
            if let Err(e) = res {
                eprintln!("perfabi-exportd: tracepoint: {e}");
                gap = true;
            }
        }
        self.lost += lost;
        self.pending.sort_by_key(|e| e.ts_ns);
        let ready = self.pending.partition_point(|e| e.ts_ns <= cut);
        let mut out = Vec::new();
        for e in self.pending.drain(..ready) {
            out.extend(self.asm.push(e, intervals));
        }
        if gap {
            self.asm.gap();
        }
        Ok(out)
    }

    /// Publishes aggregations into `w` until `stop` says so.
    pub fn run(
        &mut self,
        w: &Writer,
        counters: &DamonCounters,
        default_intervals: Intervals,
        stop: &dyn Fn() -> bool,
    ) -> Result<(), String> {
        while !stop() {
            let intervals = |monitor| {
                intervals_of(Path::new(super::sysfs::ADMIN), monitor).unwrap_or(default_intervals)
            };
            for (_, a) in self.poll(Duration::from_millis(50), &intervals)? {
                counters.publish(w, &a);
            }
            counters.lost(w, self.lost)?;
            counters.dropped(w, self.asm.dropped)?;
        }
        Ok(())
    }
}

fn monotonic_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::Monotonic);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}
