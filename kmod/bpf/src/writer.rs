//! The eBPF writer's life: the segment laid out ([`crate::image`]), the
//! programs loaded with their read-only globals, the map filled page by
//! page, frozen, the programs attached (`tp_btf/`, or `raw_tp/` where BTF
//! tracepoints are refused), the tables published and the map pinned; then
//! closed by the `control` program on a clean stop.
//!
//! Links are held by this process only (nothing pins them): when it exits,
//! however it exits (`kill -9` included), the kernel closes them and the
//! programs detach, so the heartbeat they keep stops and readers see the
//! writer silent. The map lives on while pinned: its values stay readable.

use std::mem::MaybeUninit;
use std::os::fd::{AsFd, AsRawFd};
use std::path::{Path, PathBuf};
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, Skel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};
use perfabi_shm::safe_open::{escape_path, FileId};

use crate::control::{self, Op};
use crate::error::Error;
use crate::groups::{self, Found, Source};
use crate::image::{Capacity, Image};
use crate::pin::{self, Place};
use crate::skel::{PerfabiSkel, PerfabiSkelBuilder};
use crate::system;
use crate::tables::{Change, Tables};

/// How often the instances are looked for: a device that comes or goes is
/// published or retired within this (and the time a scan takes).
pub const SCAN_EVERY: Duration = Duration::from_millis(250);

/// How the writer is started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Where the map is pinned.
    pub pin: PathBuf,
    /// The heartbeat promise (`heartbeat_interval_ns`); the context switch
    /// program refreshes the heartbeat when it is half as old.
    pub heartbeat_interval: Duration,
    /// Which program flavour attaches.
    pub attach: Attach,
    /// DAMON region records per CPU ring (0: no DAMON regions); a ring is
    /// made only where the kernel has `damon:damon_aggregated`.
    pub damon_capacity: u32,
    /// The sampling and aggregation intervals (µs) recorded with each
    /// region: the tracepoint carries neither (as the module's
    /// `damon_sample_us` and `damon_aggr_us`).
    pub damon_intervals_us: (u32, u32),
}

impl Default for Options {
    fn default() -> Self {
        Self {
            pin: PathBuf::from(pin::DEFAULT_PIN),
            heartbeat_interval: Duration::from_secs(1),
            attach: Attach::Auto,
            damon_capacity: DEFAULT_DAMON_CAPACITY,
            damon_intervals_us: (5_000, 100_000),
        }
    }
}

/// DAMON region records per CPU ring by default: twice DAMON's default
/// most regions (1,000) and some, so that the previous complete
/// aggregation survives while the next is written (spec §6.3).
pub const DEFAULT_DAMON_CAPACITY: u32 = 2048;

/// Which programs attach to the tracepoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attach {
    /// `tp_btf/` programs, or the `raw_tp/` ones if those fail to load.
    Auto,
    /// The `raw_tp/` programs only (the fallback, forced).
    RawTp,
}

/// Which flavour is attached.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavour {
    /// BTF tracepoints (`tp_btf/`).
    TpBtf,
    /// Raw tracepoints (`raw_tp/`).
    RawTp,
}

/// Counts the programs keep beside the segment (their `.bss`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Wakeup latency observations made (histogram updates).
    pub observed: u64,
    /// Wakeups whose timestamp could not be stored.
    pub unrecorded: u64,
    /// Updates that found their CPU's seq odd: nested inside another
    /// program's update on the same CPU (spec §7.1 "Nesting").
    pub nested: u64,
    /// Full request completions of published disks.
    pub disk_done: u64,
    /// Of those, completions without an issue stamp (no latency observed).
    pub disk_unstamped: u64,
    /// Runs of the attached programs the kernel skipped, summed: an event
    /// that fired on a CPU where the same program was still running (in
    /// an interrupt that came in the middle of it) runs no program, and
    /// what it would have counted is lost. The kernel's
    /// `recursion_misses` of each program (`/proc/self/fdinfo`).
    pub missed: u64,
}

/// A running eBPF writer: the programs attached, the map pinned.
pub struct Running {
    skel: PerfabiSkel<'static>,
    links: Vec<Link>,
    place: Place,
    pin: FileId,
    flavour: Flavour,
    image: Image,
    tables: Tables,
    sources: Vec<Box<dyn Source>>,
    /// What a scan could not publish, said once each.
    said: std::collections::HashSet<String>,
}

impl Running {
    /// Starts the writer as `opts` says.
    pub fn start(opts: &Options) -> Result<Self, Error> {
        system::preflight()?;
        let place = Place::new(&opts.pin)?;
        let nr_cpus = libbpf_rs::num_possible_cpus()
            .map_err(|e| Error::Load(format!("cannot count the possible CPUs: {e}")))?;
        let nr_cpus =
            u32::try_from(nr_cpus).map_err(|_| Error::Layout(perfabi::Error::BadConfig))?;
        let now = perfabi_shm::host::boottime_ns();
        let interval = u64::try_from(opts.heartbeat_interval.as_nanos())
            .unwrap_or(u64::MAX)
            .max(1_000_000);
        let mut sources = groups::sources();
        let found: Vec<Vec<Found>> = sources
            .iter_mut()
            .map(|s| s.scan())
            .collect::<Result<_, _>>()?;
        let runs: Vec<_> = sources
            .iter()
            .zip(&found)
            .map(|(s, f)| (s.group(), f.len()))
            .collect();
        // The kernel's BTF, read once: what the programs are loaded with
        // depends on it (the DAMON form, the flush-sequence flag).
        let btf = libbpf_rs::btf::Btf::from_vmlinux().ok();
        let damon = crate::damon::tracepoint(btf.as_ref());
        let capacity = Capacity {
            damon: if damon.is_some() {
                opts.damon_capacity
            } else {
                0
            },
            ..Capacity::for_start(&runs)
        };
        let image = Image::new(nr_cpus, epoch()?, now, interval, capacity)?;
        let setup = Setup {
            interval,
            damon,
            damon_intervals_us: opts.damon_intervals_us,
            rqf_flush_seq_bit: crate::block::rqf_flush_seq_bit(btf.as_ref()),
        };
        drop(btf);
        let (skel, flavour) = match opts.attach {
            Attach::RawTp => (load(&image, &setup, Flavour::RawTp)?, Flavour::RawTp),
            Attach::Auto => match load(&image, &setup, Flavour::TpBtf) {
                Ok(s) => (s, Flavour::TpBtf),
                Err(_) => (load(&image, &setup, Flavour::RawTp)?, Flavour::RawTp),
            },
        };
        fill_and_freeze(&skel, &image)?;
        let links = attach(&skel)?;
        // The tables become visible once the programs count.
        let tables = Tables::new(&image);
        control::apply(&skel.progs.control, &skel.maps.stage, &[tables.counts()])?;
        let mut w = Self {
            skel,
            links,
            place,
            // The pin's identity, set once pinned (below).
            pin: FileId { dev: 0, ino: 0 },
            flavour,
            image,
            tables,
            sources,
            said: Default::default(),
        };
        w.publish(found);
        control::run(&w.skel.progs.control, Op::Beat)?;
        let (skel, place) = (&w.skel, &w.place);
        let (tmp, tmp_path) = place.temp_path();
        place.clear(&tmp);
        pin_at(skel, &tmp_path)?;
        let mode = if perfabi_shm::bpf_pin::unprivileged_bpf_enabled() {
            eprintln!(
                "perfabi-bpfd: unprivileged BPF is enabled (kernel.unprivileged_bpf_disabled=0): \
                 pinning {} mode 0600, readable by root only",
                escape_path(place.path())
            );
            pin::MODE_PRIVATE
        } else {
            pin::MODE_SHARED
        };
        let id = place.publish(&tmp, mode)?;
        w.pin = id;
        Ok(w)
    }

    /// Looks for instances that came or went since the last scan, and
    /// publishes or retires them. What cannot be published (no room, a
    /// name clash) is said on stderr once and skipped.
    pub fn scan(&mut self) -> Result<(), Error> {
        self.tables.release();
        let found: Vec<Vec<Found>> = self
            .sources
            .iter_mut()
            .map(|s| s.scan())
            .collect::<Result<_, _>>()?;
        self.publish(found);
        Ok(())
    }

    /// Brings each group's published instances in line with `found` (one
    /// list per source): keys of those gone out of their map first, then
    /// their members freed; then the new ones published, then their keys
    /// put in the map.
    fn publish(&mut self, found: Vec<Vec<Found>>) {
        let mut parts = Vec::new();
        let mut added = Vec::new();
        for (src, found) in self.sources.iter().zip(found) {
            let group = src.group();
            let Some(map) = instance_map(&self.skel, src.map_name()) else {
                say(&mut self.said, format!("no BPF map {}", src.map_name()));
                continue;
            };
            for key in self.tables.keys(group) {
                let same = |f: &Found| {
                    f.key == key
                        && self
                            .tables
                            .get(group, &key)
                            .is_some_and(|l| l.instance == f.instance)
                };
                // Gone, or renamed (a device's new name, an IRQ's actions
                // changed: the same key under another instance string,
                // published again below under the new one): no program
                // finds it from now on.
                if !found.iter().any(same) {
                    let _ = map.delete(&key);
                    parts.push(self.tables.remove(group, &key));
                }
            }
            for f in &found {
                if self.tables.get(group, &f.key).is_some() {
                    continue;
                }
                match self.tables.add(group, f) {
                    Ok(c) => {
                        parts.push(c);
                        added.push((src.map_name(), group, f.key.clone()));
                    }
                    Err(e) => say(&mut self.said, e.to_string()),
                }
            }
        }
        parts.retain(|c: &Change| !c.is_empty());
        if parts.is_empty() {
            return;
        }
        if let Err(e) = control::apply(&self.skel.progs.control, &self.skel.maps.stage, &parts) {
            say(&mut self.said, e.to_string());
            return;
        }
        for (name, group, key) in added {
            let (Some(map), Some(live)) =
                (instance_map(&self.skel, name), self.tables.get(group, &key))
            else {
                continue;
            };
            if let Err(e) = map.update(&key, &live.slot.to_ne_bytes(), MapFlags::ANY) {
                say(
                    &mut self.said,
                    format!("cannot put {} in map {name}: {e}", live.instance),
                );
            }
        }
    }

    /// The pin's path.
    pub fn pin_path(&self) -> &Path {
        self.place.path()
    }

    /// Which program flavour is attached.
    pub fn flavour(&self) -> Flavour {
        self.flavour
    }

    /// The segment as laid out (before the programs' updates).
    pub fn image(&self) -> &Image {
        &self.image
    }

    /// Whether the pin is still this writer's (not removed, not replaced).
    pub fn pin_intact(&self) -> bool {
        self.place.current() == Some(self.pin)
    }

    /// The programs' own counts.
    pub fn stats(&self) -> Stats {
        let bss = self
            .skel
            .maps
            .bss
            .lookup(&0u32.to_ne_bytes(), MapFlags::ANY)
            .ok()
            .flatten()
            .unwrap_or_default();
        let word = |at: usize| {
            bss.get(at..at + 8)
                .map_or(0, |b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
        };
        use crate::skel::types::bss;
        Stats {
            observed: word(std::mem::offset_of!(bss, nr_observed)),
            unrecorded: word(std::mem::offset_of!(bss, nr_unrecorded)),
            nested: word(std::mem::offset_of!(bss, nr_nested)),
            disk_done: word(std::mem::offset_of!(bss, nr_disk_done)),
            disk_unstamped: word(std::mem::offset_of!(bss, nr_disk_unstamped)),
            missed: self.missed(),
        }
    }

    /// [`Stats::missed`]: the attached programs' `recursion_misses`, as
    /// the kernel shows them in each one's `/proc/self/fdinfo` (0 for a
    /// program whose entry cannot be read, or a kernel before 5.12, which
    /// shows none).
    fn missed(&self) -> u64 {
        self.skel
            .object()
            .progs()
            .filter(|p| attaches(p))
            .map(|p| {
                let info = format!("/proc/self/fdinfo/{}", p.as_fd().as_raw_fd());
                std::fs::read_to_string(info)
                    .ok()
                    .and_then(|t| {
                        t.lines()
                            .find_map(|l| l.strip_prefix("recursion_misses:"))
                            .and_then(|n| n.trim().parse::<u64>().ok())
                    })
                    .unwrap_or(0)
            })
            .sum()
    }

    /// Detaches the programs (as the kernel does when this process exits):
    /// no value or heartbeat changes from then on. [`Self::close`] still
    /// marks the segment closed.
    pub fn detach(&mut self) {
        self.links.clear();
    }

    /// Stops cleanly: the heartbeat refreshed and `FLAG_CLOSED` set (from
    /// BPF: the map is frozen), then the programs detached. The pin stays,
    /// with the final values, until removed or replaced by the next start.
    pub fn close(self) -> Result<(), Error> {
        let r = control::run(&self.skel.progs.control, Op::Close);
        drop(self.links);
        r
    }

    /// Stops cleanly as [`Self::close`] does, and removes the pin if it is
    /// still this writer's.
    pub fn close_and_unpin(self) -> Result<(), Error> {
        let r = control::run(&self.skel.progs.control, Op::Close);
        self.place.remove(self.pin);
        drop(self.links);
        r
    }
}

/// A random non-zero epoch.
fn epoch() -> Result<u64, Error> {
    let mut b = [0u8; 8];
    loop {
        rustix::rand::getrandom(&mut b, rustix::rand::GetRandomFlags::empty())
            .map_err(|e| Error::Io("cannot draw a random epoch".into(), e.into()))?;
        let e = u64::from_ne_bytes(b);
        if e != 0 {
            return Ok(e);
        }
    }
}

/// What the programs are loaded with, beside the image.
struct Setup {
    /// The heartbeat promise, ns.
    interval: u64,
    /// The kernel's form of `damon_aggregated`, if it has one.
    damon: Option<crate::damon::Tracepoint>,
    /// The intervals recorded with DAMON regions.
    damon_intervals_us: (u32, u32),
    /// `RQF_FLUSH_SEQ`'s bit in `rq_flags` on this kernel.
    rqf_flush_seq_bit: u32,
}

/// Opens the object, sets its read-only globals and the segment map's
/// size, keeps the programs of `flavour` (and `control`), and loads it.
fn load(image: &Image, setup: &Setup, flavour: Flavour) -> Result<PerfabiSkel<'static>, Error> {
    let interval = setup.interval;
    // The skeleton borrows its object storage for its whole life, which is
    // the writer's: a few bytes per start, given up (the object itself is
    // freed when the skeleton is dropped).
    let storage: &'static mut MaybeUninit<OpenObject> = Box::leak(Box::new(MaybeUninit::uninit()));
    let mut open = PerfabiSkelBuilder::default()
        .open(storage)
        .map_err(|e| Error::Load(e.to_string()))?;
    let ro = open
        .maps
        .rodata_data
        .as_deref_mut()
        .ok_or_else(|| Error::Load("the object has no read-only data".into()))?;
    ro.nr_cpus = image.geometry.nr_cpus;
    ro.cpu_page0 = image.cpu_page0();
    ro.pages_per_cpu = image.pages_per_cpu();
    ro.counters_word = (image.layout.counters_offset / 8) as u32;
    ro.sched_slot = image.sched_slot;
    ro.table_lo = image.table_lo;
    ro.table_hi = image.table_hi;
    ro.beat_every_ns = interval / 2;
    ro.rqf_flush_seq_bit = setup.rqf_flush_seq_bit;
    ro.damon_word = image.damon_word();
    ro.damon_capacity = image.geometry.damon_capacity;
    (ro.damon_sample_us, ro.damon_aggr_us) = setup.damon_intervals_us;
    open.maps
        .segment
        .set_max_entries(image.pages())
        .map_err(|e| Error::Load(e.to_string()))?;
    // One flavour of every tracepoint program, by section prefix.
    let keep = match flavour {
        Flavour::TpBtf => "tp_btf/",
        Flavour::RawTp => "raw_tp/",
    };
    // The DAMON programs of the kernel's form of the tracepoint only.
    for mut prog in open.open_object_mut().progs_mut() {
        let section = prog.section().to_string_lossy().into_owned();
        let name = prog.name().to_string_lossy().into_owned();
        let form =
            !crate::damon::is_damon_program(&name) || setup.damon.is_some_and(|t| t.matches(&name));
        if section != "syscall" {
            prog.set_autoload(section.starts_with(keep) && form);
        }
    }
    open.load().map_err(|e| Error::Load(load_hint(&e)))
}

/// libbpf's error, with what an `EPERM` most likely means.
fn load_hint(e: &libbpf_rs::Error) -> String {
    // EPERM: refused for want of privilege (EACCES is the verifier's).
    let mut cause: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    let mut eperm = false;
    while let Some(c) = cause {
        eperm |= c
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::EPERM));
        cause = c.source();
    }
    if eperm {
        format!("{e} (missing CAP_BPF/CAP_PERFMON, or kernel lockdown)")
    } else {
        e.to_string()
    }
}

/// Copies the image into the map, one element per page, and freezes it.
fn fill_and_freeze(skel: &PerfabiSkel<'_>, image: &Image) -> Result<(), Error> {
    let seg = &skel.maps.segment;
    for i in 0..image.pages() {
        seg.update(&i.to_ne_bytes(), image.page(i as usize), MapFlags::ANY)
            .map_err(|e| Error::Map(format!("cannot fill the segment map: {e}")))?;
    }
    handle(skel)?
        .freeze()
        .map_err(|e| Error::Map(format!("cannot freeze the segment map: {e}")))
}

/// Whether `prog` is one [`attach`] attaches: a tracepoint program of
/// the flavour loaded (not the `syscall` program the loader runs).
fn attaches(prog: &libbpf_rs::Program<'_>) -> bool {
    prog.autoload() && prog.section() != "syscall"
}

/// Attaches every loaded tracepoint program (one flavour was loaded).
fn attach(skel: &PerfabiSkel<'_>) -> Result<Vec<Link>, Error> {
    skel.object()
        .progs_mut()
        .filter(|p| attaches(p))
        .map(|prog| {
            prog.attach()
                .map_err(|e| Error::Attach(format!("{}: {e}", prog.name().to_string_lossy())))
        })
        .collect()
}

/// The group instance map named `name`.
fn instance_map<'a>(skel: &'a PerfabiSkel<'_>, name: &str) -> Option<libbpf_rs::Map<'a>> {
    skel.object().maps().find(|m| m.name() == name)
}

/// Says `what` on stderr, once.
fn say(said: &mut std::collections::HashSet<String>, what: String) {
    if said.insert(what.clone()) {
        eprintln!("perfabi-bpfd: {}", perfabi::text::escape(what.as_bytes()));
    }
}

/// A handle of its own on the segment map (a duplicated descriptor).
fn handle(skel: &PerfabiSkel<'_>) -> Result<libbpf_rs::MapHandle, Error> {
    libbpf_rs::MapHandle::try_from(&skel.maps.segment)
        .map_err(|e| Error::Map(format!("cannot use the segment map: {e}")))
}

/// Pins the segment map at `path`.
fn pin_at(skel: &PerfabiSkel<'_>, path: &Path) -> Result<(), Error> {
    handle(skel)?.pin(path).map_err(|e| {
        Error::Map(format!(
            "cannot pin the segment map at {}: {e}",
            escape_path(path)
        ))
    })
}
