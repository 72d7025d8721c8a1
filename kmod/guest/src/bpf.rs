//! The eBPF writer (`perfabi-bpfd`, `kmod/bpf`) in the guest: its pin, its
//! families, its counts against the kernel's, its histogram, a reader of
//! another user, `kill -9` of the loader and a CPU going offline and back,
//! on the guest's stock kernel (no module loaded: `kmod/test/init` runs
//! these before the module's tests).
//!
//! Checks (`PERFABI-TEST bpf-... PASS|FAIL`):
//! * `bpf-pin PIN`: `bpf-pin` (the pin is root's, on bpffs, mode 0666
//!   where unprivileged BPF is off, and a reader believes the kernel
//!   writes it) and `bpf-families` (its families are those the writer
//!   lays out, each as the one definition, `kmod/families`, gives it);
//! * `bpf-pswitch PIN`: `bpf-pswitch` (`kernel.all.pswitch` follows
//!   `/proc/stat`'s `ctxt` within the bracket and tolerance of
//!   `kmod/bpf/tests/writer.rs`) and `bpf-histogram-whole` (every copy of
//!   the wakeup-latency histogram a reader takes meanwhile is whole);
//! * `bpf-histogram FOLDER auto|raw-tp`: the writer started in this
//!   process (the library `perfabi-bpfd` runs) with its pin in FOLDER, so
//!   that the programs' own count of observations can be read once they
//!   are detached: the histogram's count equals it (`bpf-histogram-count`,
//!   or `bpf-raw-tp` for the forced fallback);
//! * `bpf-nonroot PIN DISK`: `perfabi-cat` run as nobody reads the pin, the
//!   kernel believed as its writer, and shows DISK's request latency
//!   histogram after a read of it;
//! * `bpf-stale PIN`: after `kill -9` of `perfabi-bpfd`, readers see the
//!   writer silent (not closed), its values still there;
//! * `bpf-closed PIN`: after a clean stop (SIGTERM) of a `perfabi-bpfd`
//!   started over the killed one's pin, readers see the segment closed;
//! * `bpf-cpu PIN`: CPU 1 offline keeps its values, which stop; online
//!   again, it counts again;
//! * `bpf-cost`: the kernel's run time per run of each of the writer's
//!   programs in this guest, for the record;
//! * `bpf-damon-ring PIN present|absent`: the segment has DAMON rings
//!   where the kernel has `damon:damon_aggregated` (6.12), and none where
//!   it has not (6.1), the writer running either way.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use perfabi::family::Reading;
use perfabi_bpf::{Attach, Flavour, Options as WriterOptions, Running};
use perfabi_families::{Group, Writer};
use perfabi_reader::{Error, FamilyValues, Liveness, Options, Origin, Segment};
use perfabi_test_harness::deadline::Deadline;

use crate::verdict;

/// How long a check waits for what an idle machine shows at once: a guest
/// under TCG beside other work on the host runs many times slower.
const WAIT: Duration = Duration::from_secs(60);

/// The uid and gid of nobody (Debian's).
const NOBODY: u32 = 65534;

const PSWITCH: &str = "kernel.all.pswitch";
const LATENCY: &str = "kernel.sched.wakeup_latency";

/// The pin opened as any reader does, but reporting a gone writer rather
/// than refusing to read.
fn open(pin: &str) -> Result<Segment, Error> {
    Segment::open_with(
        pin,
        Options {
            require_live: false,
            ..Options::default()
        },
    )
}

/// Each CPU's first word of `family`'s one member (a counter's value, a
/// histogram's count).
fn per_cpu(seg: &mut Segment, family: &str) -> Result<Vec<u64>, Error> {
    let mut h = seg.family_handle(family)?;
    let mut out = FamilyValues::default();
    seg.read_family(&mut h, &mut out)?;
    Ok((0..out.nr_cpus()).map(|c| out.words(0, c)[0]).collect())
}

fn total(seg: &mut Segment, family: &str) -> Result<u64, Error> {
    Ok(per_cpu(seg, family)?.iter().sum())
}

/// `ctxt` of `/proc/stat`: context switches since boot.
fn proc_stat_ctxt() -> Result<u64, String> {
    let s = std::fs::read_to_string("/proc/stat").map_err(|e| format!("/proc/stat: {e}"))?;
    s.lines()
        .find_map(|l| l.strip_prefix("ctxt "))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| "/proc/stat has no ctxt line".into())
}

/// Two threads handing a token back and forth until `stop` is set or `d`
/// has passed: context switches and wakeups. Returns the round trips.
fn ping_pong(d: Duration, stop: &AtomicBool) -> u64 {
    let (to_b, from_a) = mpsc::channel::<u64>();
    let (to_a, from_b) = mpsc::channel::<u64>();
    let b = std::thread::spawn(move || {
        while let Ok(v) = from_a.recv() {
            if to_a.send(v + 1).is_err() {
                break;
            }
        }
    });
    let end = Deadline::after(d);
    let mut n = 0;
    while !end.passed() && !stop.load(Ordering::Relaxed) {
        if to_b.send(n).is_err() {
            break;
        }
        match from_b.recv() {
            Ok(v) => n = v,
            Err(_) => break,
        }
    }
    drop(to_b);
    let _ = b.join();
    n
}

/// `bpf-pin` and `bpf-families`.
pub fn pin(pin: &str) -> bool {
    let p = Path::new(pin);
    let md = match std::fs::symlink_metadata(p) {
        Ok(m) => m,
        Err(e) => return verdict("bpf-pin", false, &format!("({pin}: {e})")),
    };
    let mode = md.permissions().mode() & 0o777;
    let unpriv = perfabi_shm::bpf_pin::unprivileged_bpf_enabled();
    let want_mode = if unpriv { 0o600 } else { 0o666 };
    let on_bpffs = p.parent().is_some_and(perfabi_bpf::system::is_bpffs);
    let mut seg = match open(pin) {
        Ok(s) => s,
        Err(e) => return verdict("bpf-pin", false, &format!("(open: {e})")),
    };
    let info = match seg.info() {
        Ok(i) => i,
        Err(e) => return verdict("bpf-pin", false, &format!("(info: {e})")),
    };
    let pin_ok = verdict(
        "bpf-pin",
        md.uid() == 0
            && mode == want_mode
            && on_bpffs
            && info.origin == Origin::KernelMap
            && info.owner == 0
            && info.liveness == Liveness::Kernel
            && info.header.writer_pid == 0,
        &format!(
            "(owner {}, mode {mode:o} (want {want_mode:o}: unprivileged BPF {}), on bpffs {on_bpffs}, \
             origin {:?}, {:?}, writer_pid {}, {} CPUs)",
            md.uid(),
            if unpriv { "on" } else { "off" },
            info.origin,
            info.liveness,
            info.header.writer_pid,
            info.header.nr_cpus
        ),
    );
    let fams = match seg.families() {
        Ok(f) => f,
        Err(e) => return verdict("bpf-families", false, &format!("(families: {e})")) && pin_ok,
    };
    let mut bad = Vec::new();
    // Those the writer lays out, in its order...
    let names: Vec<&str> = fams.iter().map(|f| f.name.as_str()).collect();
    let want: Vec<&str> = perfabi_bpf::families::FAMILIES
        .iter()
        .map(|f| f.name)
        .collect();
    if names != want {
        bad.push(format!("families {names:?}, the writer's {want:?}"));
    }
    // ...each as the one definition gives it to this writer.
    for f in &fams {
        match perfabi_families::table::find(&f.name) {
            None => bad.push(format!("{}: not in the definition", f.name)),
            Some(d) if !d.published_by(Writer::Bpf) => {
                bad.push(format!("{}: not the eBPF writer's", f.name))
            }
            Some(d) => {
                if !d.describes(f) {
                    bad.push(format!(
                        "{}: {:?} {:?} {:?} {:?} {:?}",
                        d.name, f.kind, f.unit_text, f.dimension, f.help, f.buckets
                    ));
                }
            }
        }
    }
    let fam_ok = verdict(
        "bpf-families",
        bad.is_empty() && !fams.is_empty(),
        &format!(
            "({} families, as kmod/families defines them: {names:?}){}",
            fams.len(),
            if bad.is_empty() {
                String::new()
            } else {
                format!(": {}", bad.join("; "))
            }
        ),
    );
    pin_ok && fam_ok
}

/// `bpf-pswitch` and `bpf-histogram-whole`.
pub fn pswitch(pin: &str) -> bool {
    let counted = match pswitch_bracket(pin) {
        Ok((ok, detail)) => verdict("bpf-pswitch", ok, &detail),
        Err(e) => verdict("bpf-pswitch", false, &format!("({e})")),
    };
    histogram_whole(pin) && counted
}

/// As `kmod/bpf/tests/writer.rs`: each read of `ctxt` bracketed by two
/// reads of the segment; the kernel's count is at most one in-flight
/// switch per CPU ahead of the programs'; 100 per million past the bracket
/// are allowed (switches the tracepoint itself does not report, measured
/// there).
fn pswitch_bracket(pin: &str) -> Result<(bool, String), String> {
    let mut seg = open(pin).map_err(|e| e.to_string())?;
    let nr_cpus = per_cpu(&mut seg, PSWITCH).map_err(|e| e.to_string())?.len() as u64;
    let t = |seg: &mut Segment| total(seg, PSWITCH).map_err(|e| e.to_string());
    let a0 = t(&mut seg)?;
    let s0 = proc_stat_ctxt()?;
    let a1 = t(&mut seg)?;
    let trips = ping_pong(Duration::from_secs(1), &AtomicBool::new(false));
    let b0 = t(&mut seg)?;
    let s1 = proc_stat_ctxt()?;
    let b1 = t(&mut seg)?;
    let ds = s1 - s0;
    let (lo, hi) = ((b0 - a1).saturating_sub(nr_cpus), b1 - a0 + nr_cpus);
    let tolerance = ds / 10_000;
    let ok = (lo..=hi + tolerance).contains(&ds) && ds > trips;
    Ok((
        ok,
        format!(
            "(/proc/stat ctxt delta {ds}, segment bracket [{lo}, {hi}] +{tolerance} (100 per \
             million), {} past it; {trips} round trips)",
            ds.saturating_sub(hi)
        ),
    ))
}

/// Copies of the wakeup-latency histogram taken for 2 s while two threads
/// switch: none refused as torn, and the count moves.
fn histogram_whole(pin: &str) -> bool {
    let name = "bpf-histogram-whole";
    let mut seg = match open(pin) {
        Ok(s) => s,
        Err(e) => return verdict(name, false, &format!("(open: {e})")),
    };
    let mut h = match seg.family_handle(LATENCY) {
        Ok(h) => h,
        Err(e) => return verdict(name, false, &format!("({LATENCY}: {e})")),
    };
    let before = total(&mut seg, LATENCY).unwrap_or(0);
    let stop = std::sync::Arc::new(AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        std::thread::spawn(move || ping_pong(WAIT, &stop))
    };
    let mut out = FamilyValues::default();
    let (mut copies, mut torn, mut busy, mut first) = (0u64, 0u64, 0u64, None);
    let d = Deadline::after(Duration::from_secs(2));
    while !d.passed() {
        match seg.read_family(&mut h, &mut out) {
            Ok(_) => copies += 1,
            Err(Error::Busy(_)) => busy += 1,
            Err(e) => {
                torn += 1;
                first.get_or_insert(e.to_string());
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let trips = load.join().unwrap_or(0);
    let after = total(&mut seg, LATENCY).unwrap_or(0);
    verdict(
        name,
        torn == 0 && copies > 0 && after > before,
        &format!(
            "({copies} copies in 2 s under {trips} round trips, {torn} refused, {busy} busy; \
             count {before} -> {after}){}",
            first.map(|e| format!(": {e}")).unwrap_or_default()
        ),
    )
}

/// `bpf-histogram-count` (Attach::Auto) or `bpf-raw-tp` (Attach::RawTp).
pub fn histogram(folder: &str, how: &str) -> bool {
    let (name, attach) = match how {
        "raw-tp" => ("bpf-raw-tp", Attach::RawTp),
        _ => ("bpf-histogram-count", Attach::Auto),
    };
    let folder = PathBuf::from(folder);
    let r = histogram_count(&folder, attach);
    let _ = std::fs::remove_dir_all(&folder);
    match r {
        Ok((ok, detail)) => verdict(name, ok, &detail),
        Err(e) => verdict(name, false, &format!("({e})")),
    }
}

/// Starts the writer in this process, switches for 1 s, detaches it and
/// waits until nothing moves: then each CPU's histogram is whole and their
/// counts add up to the programs' observations.
fn histogram_count(folder: &Path, attach: Attach) -> Result<(bool, String), String> {
    let mut w = Running::start(&WriterOptions {
        pin: folder.join("kernel"),
        attach,
        ..WriterOptions::default()
    })
    .map_err(|e| format!("start: {e}"))?;
    let flavour = w.flavour();
    let mut seg = open(&w.pin_path().to_string_lossy()).map_err(|e| e.to_string())?;
    let trips = ping_pong(Duration::from_secs(1), &AtomicBool::new(false));
    w.detach();
    let mut h = seg.family_handle(LATENCY).map_err(|e| e.to_string())?;
    let mut out = FamilyValues::default();
    let mut read = |seg: &mut Segment| -> Result<Vec<perfabi::Histogram>, String> {
        seg.read_family(&mut h, &mut out)
            .map_err(|e| e.to_string())?;
        let f = h.family().clone();
        (0..out.nr_cpus())
            .map(|c| match out.reading_on(&f, 0, c) {
                Reading::Histogram(x) => Ok(x),
                r => Err(format!("not a histogram: {r:?}")),
            })
            .collect()
    };
    // An invocation in flight at detach ends within a grace period.
    let still = Deadline::after(WAIT);
    let mut last = (read(&mut seg)?, w.stats());
    loop {
        std::thread::sleep(Duration::from_millis(200));
        let now = (read(&mut seg)?, w.stats());
        if now == last {
            break;
        }
        if still.passed() {
            return Err(format!("still moving {WAIT:?} after detach"));
        }
        last = now;
    }
    let (per_cpu_hist, stats) = last;
    let whole = per_cpu_hist.iter().all(perfabi::Histogram::consistent);
    let count: u64 = per_cpu_hist.iter().map(|x| x.count).sum();
    let wakeups = total(&mut seg, "kernel.sched.wakeups").map_err(|e| e.to_string())?;
    w.close_and_unpin().map_err(|e| e.to_string())?;
    let want_flavour = attach != Attach::RawTp || flavour == Flavour::RawTp;
    Ok((
        whole && count > 0 && count == stats.observed && count <= wakeups && want_flavour,
        format!(
            "({flavour:?} programs; after {trips} round trips and detach: histogram count {count} \
             = {} observations made, {} unrecorded wakeups, {wakeups} wakeups; buckets whole on \
             {} CPUs: {whole})",
            stats.observed,
            stats.unrecorded,
            per_cpu_hist.len()
        ),
    ))
}

/// Reads the first MiB of `/dev/{disk}` (uncached: nothing read it since
/// boot) and waits until the pin's latency histogram of `disk` counts it.
fn disk_observed(pin: &str, disk: &str) -> Result<u64, String> {
    use std::io::Read;
    let mut buf = vec![0u8; 1 << 20];
    std::fs::File::open(format!("/dev/{disk}"))
        .and_then(|mut f| f.read_exact(&mut buf))
        .map_err(|e| format!("/dev/{disk}: {e}"))?;
    let mut seg = open(pin).map_err(|e| e.to_string())?;
    let d = Deadline::after(WAIT);
    loop {
        let snap = seg.snapshot().map_err(|e| e.to_string())?;
        let count = snap
            .family("disk.dev.request_latency")
            .and_then(|f| Some((f, f.member(disk)?)))
            .map(|(f, m)| match snap.reading(f, m) {
                Reading::Histogram(h) => h.count,
                _ => 0,
            });
        match count {
            Some(c) if c > 0 => return Ok(c),
            _ if d.passed() => {
                return Err(format!(
                    "{disk}'s request latency: {count:?} after {WAIT:?}"
                ))
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// `bpf-nonroot`: `perfabi-cat` as nobody lists the pin's families, calls
/// its writer the kernel, and shows `disk`'s request latency histogram
/// with the observations of a read.
pub fn nonroot(pin: &str, disk: &str) -> bool {
    let name = "bpf-nonroot";
    let observed = match disk_observed(pin, disk) {
        Ok(c) => c,
        Err(e) => return verdict(name, false, &format!("({e})")),
    };
    let run = |args: &[&str]| {
        Command::new("perfabi-cat")
            .args(args)
            .arg(pin)
            .uid(NOBODY)
            .gid(NOBODY)
            .output()
    };
    let (info, table) = match (run(&["--info", "--json"]), run(&[])) {
        (Ok(i), Ok(t)) => (i, t),
        (i, t) => return verdict(name, false, &format!("(perfabi-cat: {i:?} {t:?})")),
    };
    let info_text = String::from_utf8_lossy(&info.stdout);
    let table_text = String::from_utf8_lossy(&table.stdout);
    let missing: Vec<&str> = sched_families()
        .into_iter()
        .filter(|n| !table_text.contains(n))
        .collect();
    // `disk.dev.request_latency  device=vda  histogram  N obs ...`
    let histogram = table_text
        .lines()
        .find(|l| {
            l.starts_with("disk.dev.request_latency") && l.contains(&format!("device={disk} "))
        })
        .unwrap_or("")
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    let ok = info.status.success()
        && table.status.success()
        && info_text.contains("\"origin\":\"kernel-map\"")
        && info_text.contains("\"state\":\"kernel\"")
        && info_text.contains("\"owner_uid\":0")
        && missing.is_empty()
        && histogram.contains(" histogram ")
        && !histogram.contains("no observations");
    verdict(
        name,
        ok,
        &format!(
            "(uid {NOBODY}: perfabi-cat --info exit {:?}, table exit {:?}, families missing \
             {missing:?}; after a read of {disk} ({observed} observations as root): \"{histogram}\"){}",
            info.status.code(),
            table.status.code(),
            if ok {
                String::new()
            } else {
                format!(
                    ": {} {}",
                    info_text.trim(),
                    String::from_utf8_lossy(&info.stderr).trim()
                )
            }
        ),
    )
}

/// `bpf-stale`: after `kill -9` of the loader, the heartbeat stops: a
/// reader finds the writer silent (not closed: nobody closed it), the
/// values still readable, and one that requires a live writer is refused
/// with a typed error.
pub fn stale(pin: &str) -> bool {
    let name = "bpf-stale";
    let d = Deadline::after(WAIT);
    let mut last = String::new();
    let mut seg = match open(pin) {
        Ok(s) => s,
        Err(e) => return verdict(name, false, &format!("(open: {e})")),
    };
    while !d.passed() {
        match seg.status() {
            Ok((info, Liveness::Silent { silent_for })) => {
                let values = total(&mut seg, PSWITCH);
                let strict = Segment::open(pin).and_then(|mut s| s.snapshot());
                let refused = matches!(strict, Err(Error::Stale { .. }));
                let closed = info.flags & perfabi::layout::FLAG_CLOSED != 0;
                return verdict(
                    name,
                    refused && !closed && values.as_ref().is_ok_and(|&v| v > 0),
                    &format!(
                        "(silent for {silent_for:?} after {:.1} s; closed flag {closed}; pswitch \
                         still readable: {values:?}; a reader requiring a live writer: {})",
                        d.elapsed().as_secs_f64(),
                        match strict {
                            Ok(_) => "read it".to_string(),
                            Err(e) => e.to_string(),
                        }
                    ),
                );
            }
            Ok((_, l)) => last = format!("{l:?}"),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    verdict(name, false, &format!("(not silent after {WAIT:?}: {last})"))
}

/// `bpf-closed`: the writer closed cleanly: a reader sees it closed, with
/// its values, and one that requires a live writer is told so
/// ([`Error::Closed`]).
pub fn closed(pin: &str) -> bool {
    let name = "bpf-closed";
    let mut seg = match open(pin) {
        Ok(s) => s,
        Err(e) => return verdict(name, false, &format!("(open: {e})")),
    };
    let d = Deadline::after(WAIT);
    let mut last = String::new();
    while !d.passed() {
        match seg.status() {
            Ok((_, Liveness::Closed)) => {
                let values = total(&mut seg, PSWITCH);
                let strict = Segment::open(pin).and_then(|mut s| s.snapshot());
                return verdict(
                    name,
                    matches!(strict, Err(Error::Closed)) && values.as_ref().is_ok_and(|&v| v > 0),
                    &format!(
                        "(closed; pswitch still readable: {values:?}; a reader requiring a live \
                         writer: {})",
                        match strict {
                            Ok(_) => "read it".to_string(),
                            Err(e) => e.to_string(),
                        }
                    ),
                );
            }
            Ok((_, l)) => last = format!("{l:?}"),
            Err(e) => last = e.to_string(),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    verdict(name, false, &format!("(not closed after {WAIT:?}: {last})"))
}

fn set_online(cpu: usize, on: bool) -> Result<(), String> {
    let p = format!("/sys/devices/system/cpu/cpu{cpu}/online");
    std::fs::write(&p, if on { "1" } else { "0" }).map_err(|e| format!("{p}: {e}"))
}

/// The writer's scheduler families (no dimension: one member each), in
/// table order: pswitch, wakeups, migrations, wakeup latency.
fn sched_families() -> Vec<&'static str> {
    perfabi_bpf::families::FAMILIES
        .iter()
        .filter(|f| f.group == Group::Sched)
        .map(|f| f.name)
        .collect()
}

/// Each CPU's value of each scheduler family (a histogram's count).
fn sched_values(seg: &mut Segment) -> Result<Vec<Vec<u64>>, String> {
    sched_families()
        .into_iter()
        .map(|f| per_cpu(seg, f).map_err(|e| format!("{f}: {e}")))
        .collect()
}

/// `bpf-cpu`.
pub fn cpu(pin: &str) -> bool {
    let r = cpu_cycle(pin);
    // Whatever happened, CPU 1 comes back for the checks after this one.
    let back = set_online(1, true);
    match (r, back) {
        (Ok((ok, detail)), Ok(())) => verdict("bpf-cpu", ok, &detail),
        (Ok((_, detail)), Err(e)) => verdict("bpf-cpu", false, &format!("{detail}; {e}")),
        (Err(e), _) => verdict("bpf-cpu", false, &format!("({e})")),
    }
}

/// CPU 1 offline: its block keeps its values, which no longer move while
/// CPU 0's do, and the writer stays alive; online again, its count
/// resumes.
fn cpu_cycle(pin: &str) -> Result<(bool, String), String> {
    let mut seg = open(pin).map_err(|e| e.to_string())?;
    let a = sched_values(&mut seg)?;
    if a[0].len() < 2 {
        return Err(format!("{} CPU blocks: the guest needs -smp 2", a[0].len()));
    }
    set_online(1, false)?;
    let b = sched_values(&mut seg)?;
    // A while with tasks switching on CPU 0 only.
    let trips = ping_pong(Duration::from_millis(500), &AtomicBool::new(false));
    let c = sched_values(&mut seg)?;
    let alive = seg.status().map(|(_, l)| l);
    let cpu1 = |v: &[Vec<u64>]| v.iter().map(|f| f[1]).collect::<Vec<_>>();
    let kept = cpu1(&b).iter().zip(cpu1(&a)).all(|(b, a)| *b >= a) && b[0][1] > 0;
    let still = cpu1(&c) == cpu1(&b);
    let cpu0_moves = c[0][0] > b[0][0];
    set_online(1, true)?;
    let d = Deadline::after(WAIT);
    let resumed = loop {
        let v = sched_values(&mut seg)?;
        if v[0][1] > c[0][1] {
            break Some((v[0][1], d.elapsed()));
        }
        if d.passed() {
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let ok =
        kept && still && cpu0_moves && resumed.is_some() && matches!(alive, Ok(Liveness::Kernel));
    Ok((
        ok,
        format!(
            "(CPU 1 offline: its pswitch, wakeups, migrations, latency count {:?} -> {:?} \
             (kept {kept}), {:?} after {trips} round trips on CPU 0 (still {still}); CPU 0's \
             pswitch {} -> {}; writer {alive:?}; online again: CPU 1's pswitch {})",
            cpu1(&a),
            cpu1(&b),
            cpu1(&c),
            b[0][0],
            c[0][0],
            match resumed {
                Some((v, t)) => format!("-> {v} after {} ms", t.as_millis()),
                None => format!("did not move in {WAIT:?}"),
            }
        ),
    ))
}

/// run_time_ns and run_cnt of each loaded program, by name.
fn prog_stats() -> Vec<(String, u64, u64)> {
    libbpf_rs::query::ProgInfoIter::default()
        .map(|p| {
            (
                p.name.to_string_lossy().into_owned(),
                p.run_time_ns,
                p.run_cnt,
            )
        })
        .collect()
}

/// `bpf-cost`: the kernel's own statistics of the writer's programs
/// (`kernel.bpf_stats_enabled`: run time and runs per program) over 2 s of
/// two threads switching, for the record of what they cost in this guest
/// (TCG: emulated, many times a real CPU's time). Passes if every program
/// of the writer ran.
pub fn cost() -> bool {
    let name = "bpf-cost";
    let sysctl = "/proc/sys/kernel/bpf_stats_enabled";
    if let Err(e) = std::fs::write(sysctl, "1") {
        return verdict(name, false, &format!("({sysctl}: {e})"));
    }
    let before = prog_stats();
    let trips = ping_pong(Duration::from_secs(2), &AtomicBool::new(false));
    let after = prog_stats();
    let _ = std::fs::write(sysctl, "0");
    let mut lines = Vec::new();
    let mut idle = Vec::new();
    for prog in ["tp_switch", "tp_wakeup", "tp_wakeup_new", "tp_migrate"] {
        let sum = |v: &[(String, u64, u64)]| {
            v.iter()
                .filter(|(n, _, _)| n == prog)
                .fold((0u64, 0u64), |(t, c), (_, pt, pc)| (t + pt, c + pc))
        };
        let ((t0, c0), (t1, c1)) = (sum(&before), sum(&after));
        let (t, c) = (t1.saturating_sub(t0), c1.saturating_sub(c0));
        if c == 0 {
            idle.push(prog);
            continue;
        }
        println!(
            "PERFABI-MEASURE bpf-cost {prog} runs={c} run_time_ns={t} ns_per_run={:.0} (TCG guest)",
            t as f64 / c as f64
        );
        lines.push(format!("{prog} {:.0} ns x {c}", t as f64 / c as f64));
    }
    verdict(
        name,
        idle.is_empty(),
        &format!(
            "({}; over {trips} round trips; programs that did not run: {idle:?})",
            lines.join(", ")
        ),
    )
}

/// `bpf-damon-ring`: the pin's DAMON ring capacity is not 0 (`present`:
/// the kernel has `damon:damon_aggregated`) or is 0 (`absent`).
pub fn damon_ring(pin: &str, want: &str) -> bool {
    let name = "bpf-damon-ring";
    let info = match open(pin).and_then(|mut s| s.info()) {
        Ok(i) => i,
        Err(e) => return verdict(name, false, &format!("(open: {e})")),
    };
    let capacity = info.header.damon_capacity;
    verdict(
        name,
        (capacity > 0) == (want == "present") && info.liveness == Liveness::Kernel,
        &format!(
            "(DAMON {want} in this kernel: {capacity} region records per CPU ring; writer \
             {:?})",
            info.liveness
        ),
    )
}
