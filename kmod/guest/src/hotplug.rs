//! `hotplug`: devices and CPUs come and go while a reader snapshots a
//! kernel writer's segment without pause.
//!
//! The kernel sources module (`perfabi_sources.ko`), and the eBPF writer
//! (`perfabi-bpfd`), must turn a disk, a network
//! device or a CPU appearing and disappearing into instance changes within
//! a second, and no snapshot taken meanwhile may be torn or mix two
//! metadata generations. The check attaches a file to a loop disk and
//! detaches it (a loop disk without a file has no medium and is no
//! instance) and loads and removes the driver of dummy network devices
//! (the modules are in the guest's `/modules`, see `kmod/test/run`), three
//! times, and takes CPU 1 offline and back, each
//! action timed until the segment shows it; a second thread snapshots all
//! the while and checks every snapshot: each family's instance strings are
//! distinct, every CPU's copy of every histogram counts as many
//! observations as its buckets hold, and no counter of a registration goes
//! backwards.

use std::collections::HashMap;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use perfabi::layout::Kind;
use perfabi::{Reading, Snapshot};
use perfabi_reader::Segment;

use crate::{histograms_consistent, open_path, verdict};

/// How long an instance may take to appear or go (the bound).
const WITHIN: Duration = Duration::from_secs(1);
/// The file attached to loop devices.
const BACKING: &str = "/tmp/loop.img";

/// What the snapshotting thread found.
struct Watch {
    snapshots: u64,
    problems: Vec<String>,
}

/// Snapshots `segment` until `stop`, checking each one (see the top).
fn watch(segment: &str, stop: &AtomicBool) -> Watch {
    let mut seg = open_path(segment);
    let mut snap = Snapshot::default();
    let mut last: HashMap<(String, String, u64), u64> = HashMap::new();
    let mut w = Watch {
        snapshots: 0,
        problems: Vec::new(),
    };
    while !stop.load(Ordering::Relaxed) && w.problems.len() < 10 {
        if let Err(e) = seg.snapshot_into(&mut snap) {
            w.problems.push(format!("snapshot failed: {e}"));
            continue;
        }
        w.snapshots += 1;
        if let Err(e) = histograms_consistent(&snap) {
            w.problems.push(format!("torn histogram: {e}"));
        }
        for f in &snap.families {
            let mut seen: Vec<&str> = f.members.iter().map(|m| m.instance.as_str()).collect();
            seen.sort_unstable();
            if seen.windows(2).any(|p| p[0] == p[1]) {
                w.problems.push(format!(
                    "{}: an instance string twice at generation {}",
                    f.name, snap.generation
                ));
            }
            if f.kind != Kind::Counter {
                continue;
            }
            for m in &f.members {
                let Reading::Unsigned(v) = snap.reading(f, m) else {
                    continue;
                };
                let key = (f.name.clone(), m.instance.clone(), m.reg_id);
                if let Some(&before) = last.get(&key) {
                    if v < before {
                        w.problems.push(format!(
                            "{} [{}] went back from {before} to {v} (generation {})",
                            f.name, m.instance, snap.generation
                        ));
                    }
                }
                last.insert(key, v);
            }
        }
    }
    w
}

/// Whether the segment shows `instance` in family `family` now;
/// `None` if it has no such family (never taken for "gone").
fn shows(seg: &mut Segment, family: &str, instance: &str) -> Option<bool> {
    seg.family(family)
        .ok()
        .map(|f| f.members.iter().any(|m| m.instance == instance))
}

/// Runs `cmd`; its standard error if it fails.
fn run(cmd: &[&str]) -> Result<(), String> {
    let out = Command::new(cmd[0])
        .args(&cmd[1..])
        .output()
        .map_err(|e| format!("{}: {e}", cmd.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{} failed: {}",
            cmd.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Runs `cmd`, then polls until `family` in `segment` shows `instance` (or
/// no longer shows it, for `present` false); returns how long that took
/// after the command returned, or why it failed.
fn act(
    segment: &str,
    cmd: &[&str],
    family: &str,
    instance: &str,
    present: bool,
) -> Result<Duration, String> {
    run(cmd)?;
    let t0 = Instant::now();
    let mut seg = open_path(segment);
    while t0.elapsed() < 5 * WITHIN {
        if shows(&mut seg, family, instance) == Some(present) {
            return Ok(t0.elapsed());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(format!(
        "{}: {family} [{instance}] still {} after 5 s",
        cmd.join(" "),
        match shows(&mut seg, family, instance) {
            None => "absent, and so is the family",
            Some(_) if present => "absent",
            Some(_) => "present",
        }
    ))
}

/// Per-CPU context switches of the segment's `kernel.all.pswitch`.
fn switches(segment: &str) -> Result<Vec<u64>, String> {
    let mut seg = open_path(segment);
    let snap = seg.snapshot().map_err(|e| e.to_string())?;
    let f = snap
        .family("kernel.all.pswitch")
        .ok_or("no kernel.all.pswitch family")?;
    let m = f
        .members
        .first()
        .ok_or("kernel.all.pswitch has no instance")?;
    Ok((0..snap.nr_cpus)
        .map(|c| match snap.reading_on(c, f, m) {
            Reading::Unsigned(v) => v,
            _ => 0,
        })
        .collect())
}

fn set_online(cpu: usize, on: bool) -> Result<(), String> {
    let p = format!("/sys/devices/system/cpu/cpu{cpu}/online");
    std::fs::write(&p, if on { "1" } else { "0" }).map_err(|e| format!("{p}: {e}"))
}

/// CPU 1 offline for a while, then online: the layout stays, CPU 0 keeps
/// counting, CPU 1 stops and then counts again.
fn cpu_cycle(segment: &str) -> Result<String, String> {
    let a = switches(segment)?;
    if a.len() < 2 {
        return Err(format!("{} CPU blocks: the guest needs -smp 2", a.len()));
    }
    set_online(1, false)?;
    std::thread::sleep(Duration::from_millis(300));
    let b = switches(segment)?;
    std::thread::sleep(Duration::from_millis(300));
    let c = switches(segment)?;
    set_online(1, true)?;
    std::thread::sleep(Duration::from_millis(500));
    let d = switches(segment)?;
    let ok = b.len() == a.len() && c[0] > b[0] && c[1] == b[1] && d[1] > c[1];
    let what = format!(
        "CPU 1 offline: cpu0 switches {} -> {}, cpu1 {} -> {} (still); online again: cpu1 -> {}",
        b[0], c[0], b[1], c[1], d[1]
    );
    if ok {
        Ok(what)
    } else {
        Err(what)
    }
}

/// The whole check on `segment`, reported as `name`: see the top.
/// `modules` is the folder of the guest's driver modules.
pub fn hotplug(segment: &str, name: &str, modules: &str) -> bool {
    let stop = Arc::new(AtomicBool::new(false));
    let watcher = {
        let stop = stop.clone();
        let segment = segment.to_string();
        std::thread::spawn(move || watch(&segment, &stop))
    };
    let loop_ko = format!("{modules}/loop.ko");
    let dummy_ko = format!("{modules}/dummy.ko");
    let disk = "disk.dev.read";
    let net = "network.interface.in.packets";
    let mut lines = Vec::new();
    let mut fails = Vec::new();
    let prepared = std::fs::write(BACKING, vec![0u8; 1 << 20])
        .map_err(|e| format!("{BACKING}: {e}"))
        .and_then(|()| run(&["insmod", &loop_ko, "max_loop=2"]));
    if let Err(e) = prepared {
        fails.push(e);
    }
    for round in 1..=3 {
        let steps: [(&[&str], &str, &str, bool); 4] = [
            (&["losetup", "/dev/loop1", BACKING], disk, "loop1", true),
            (&["losetup", "-d", "/dev/loop1"], disk, "loop1", false),
            (&["insmod", &dummy_ko, "numdummies=1"], net, "dummy0", true),
            (&["rmmod", "dummy"], net, "dummy0", false),
        ];
        for (cmd, family, instance, present) in steps {
            match act(segment, cmd, family, instance, present) {
                Ok(t) if t <= WITHIN => lines.push(format!(
                    "round {round}: {} -> {family} [{instance}] {} after {} ms",
                    cmd.join(" "),
                    if present { "appeared" } else { "gone" },
                    t.as_millis()
                )),
                Ok(t) => fails.push(format!(
                    "round {round}: {} -> {family} [{instance}] took {} ms (over 1 s)",
                    cmd.join(" "),
                    t.as_millis()
                )),
                Err(e) => fails.push(format!("round {round}: {e}")),
            }
        }
    }
    if let Err(e) = run(&["rmmod", "loop"]) {
        fails.push(e);
    }
    match cpu_cycle(segment) {
        Ok(l) => lines.push(l),
        Err(e) => fails.push(e),
    }
    stop.store(true, Ordering::Relaxed);
    let w = watcher.join().expect("the snapshot thread does not panic");
    for l in &lines {
        println!("PERFABI-HOTPLUG {l}");
    }
    fails.extend(w.problems.iter().cloned());
    verdict(
        name,
        fails.is_empty() && w.snapshots > 100,
        &format!(
            "{} snapshots taken meanwhile, every one consistent: {}{}",
            w.snapshots,
            w.problems.is_empty(),
            if fails.is_empty() {
                String::new()
            } else {
                format!("; {}", fails.join("; "))
            }
        ),
    )
}
