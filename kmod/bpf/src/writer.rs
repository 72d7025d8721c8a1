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
use std::path::{Path, PathBuf};
use std::time::Duration;

use libbpf_rs::skel::{OpenSkel, SkelBuilder};
use libbpf_rs::{Link, MapCore, MapFlags, OpenObject};
use perfabi_shm::safe_open::{escape_path, FileId};

use crate::control::{self, Op};
use crate::error::Error;
use crate::families;
use crate::image::Image;
use crate::pin::{self, Place};
use crate::skel::{PerfabiSkel, PerfabiSkelBuilder};
use crate::system;

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
}

impl Default for Options {
    fn default() -> Self {
        Self {
            pin: PathBuf::from(pin::DEFAULT_PIN),
            heartbeat_interval: Duration::from_secs(1),
            attach: Attach::Auto,
        }
    }
}

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
}

/// A running eBPF writer: the programs attached, the map pinned.
pub struct Running {
    skel: PerfabiSkel<'static>,
    links: Vec<Link>,
    place: Place,
    pin: FileId,
    flavour: Flavour,
    image: Image,
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
        let image = Image::new(nr_cpus, epoch()?, now, interval)?;
        let (skel, flavour) = match opts.attach {
            Attach::RawTp => (load(&image, interval, Flavour::RawTp)?, Flavour::RawTp),
            Attach::Auto => match load(&image, interval, Flavour::TpBtf) {
                Ok(s) => (s, Flavour::TpBtf),
                Err(_) => (load(&image, interval, Flavour::RawTp)?, Flavour::RawTp),
            },
        };
        fill_and_freeze(&skel, &image)?;
        let links = attach(&skel, flavour)?;
        // The tables become visible once the programs count.
        control::run(&skel.progs.control, Op::Meta, &image.used)?;
        control::run(&skel.progs.control, Op::Beat, &[])?;
        let (tmp, tmp_path) = place.temp_path();
        place.clear(&tmp);
        pin_at(&skel, &tmp_path)?;
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
        let pin = place.publish(&tmp, mode)?;
        Ok(Self {
            skel,
            links,
            place,
            pin,
            flavour,
            image,
        })
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
        Stats {
            observed: word(std::mem::offset_of!(crate::skel::types::bss, nr_observed)),
            unrecorded: word(std::mem::offset_of!(crate::skel::types::bss, nr_unrecorded)),
        }
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
        let r = control::run(&self.skel.progs.control, Op::Close, &[]);
        drop(self.links);
        r
    }

    /// Stops cleanly as [`Self::close`] does, and removes the pin if it is
    /// still this writer's.
    pub fn close_and_unpin(self) -> Result<(), Error> {
        let r = control::run(&self.skel.progs.control, Op::Close, &[]);
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

/// Opens the object, sets its read-only globals and the segment map's
/// size, keeps the programs of `flavour` (and `control`), and loads it.
fn load(image: &Image, interval: u64, flavour: Flavour) -> Result<PerfabiSkel<'static>, Error> {
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
    ro.w_pswitch = image.value_word[families::PSWITCH];
    ro.w_wakeups = image.value_word[families::WAKEUPS];
    ro.w_migrations = image.value_word[families::MIGRATIONS];
    ro.w_latency = image.value_word[families::WAKEUP_LATENCY];
    ro.beat_every_ns = interval / 2;
    open.maps
        .segment
        .set_max_entries(image.pages())
        .map_err(|e| Error::Load(e.to_string()))?;
    let btf = flavour == Flavour::TpBtf;
    let p = &mut open.progs;
    for (prog, keep) in [
        (&mut p.tp_switch, btf),
        (&mut p.tp_wakeup, btf),
        (&mut p.tp_wakeup_new, btf),
        (&mut p.tp_migrate, btf),
        (&mut p.raw_switch, !btf),
        (&mut p.raw_wakeup, !btf),
        (&mut p.raw_wakeup_new, !btf),
        (&mut p.raw_migrate, !btf),
    ] {
        prog.set_autoload(keep);
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

/// Attaches the loaded programs of `flavour`.
fn attach(skel: &PerfabiSkel<'_>, flavour: Flavour) -> Result<Vec<Link>, Error> {
    let p = &skel.progs;
    let progs = match flavour {
        Flavour::TpBtf => [&p.tp_switch, &p.tp_wakeup, &p.tp_wakeup_new, &p.tp_migrate],
        Flavour::RawTp => [
            &p.raw_switch,
            &p.raw_wakeup,
            &p.raw_wakeup_new,
            &p.raw_migrate,
        ],
    };
    progs
        .iter()
        .map(|prog| {
            prog.attach()
                .map_err(|e| Error::Attach(format!("{}: {e}", prog.name().to_string_lossy())))
        })
        .collect()
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
