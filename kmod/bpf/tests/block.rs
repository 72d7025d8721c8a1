//! The eBPF writer's block group on this machine's kernel: a loop device's
//! counts against `/proc/diskstats`, its request latency histogram whole
//! and counting every request, disks that come and go, and another user's
//! `perfabi-cat` showing this machine's own disk's latency histogram.
//!
//! Needs root, BTF, `losetup` and `blkdiscard` (util-linux); without them
//! each test prints `PERFABI-SKIP`. Each passing test prints
//! `BPF-WRITER <name> PASS`, which `tests/run` counts.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use perfabi_bpf::Running;
use perfabi_reader::Segment;
use perfabi_test_harness::deadline::Deadline;
use perfabi_test_harness::kernel_work::diskstats;

mod common;
use common::*;

/// The block families, in table order (the words of [`snapshot`]).
const FAMILIES: [&str; 8] = [
    "disk.dev.read",
    "disk.dev.write",
    "disk.dev.discard",
    "disk.dev.flush",
    "disk.dev.read_bytes",
    "disk.dev.write_bytes",
    "disk.dev.discard_bytes",
    "disk.dev.request_latency",
];

fn need_tools(test: &str) -> bool {
    ["losetup", "blkdiscard", "dd"].iter().all(|t| {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {t}")])
            .output()
            .is_ok_and(|o| o.status.success());
        if !found {
            perfabi_test_harness::skip(test, &format!("{t} is missing (util-linux, coreutils)"));
        }
        found
    })
}

/// The words of the block families for `disk`, each summed over the CPUs
/// (a counter's value; the histogram's count, sum and buckets at the end).
fn snapshot(seg: &mut Segment, disk: &str) -> Option<Vec<u64>> {
    let mut all = Vec::new();
    for f in FAMILIES {
        all.extend(instance_words(seg, f, disk)?);
    }
    Some(all)
}

/// Waits until `disk` is published and its I/O has stopped (none in
/// flight, and neither diskstats nor the segment changing for 300 ms);
/// then both, read together.
fn quiet(seg: &mut Segment, disk: &str, mut tick: impl FnMut()) -> (Vec<u64>, Vec<u64>) {
    let d = Deadline::after(Duration::from_secs(30));
    let mut last: Option<(Vec<u64>, Vec<u64>)> = None;
    let mut since = Instant::now();
    loop {
        tick();
        let now = snapshot(seg, disk).map(|s| (diskstats(disk), s));
        match (&now, &last) {
            (Some(n), Some(l)) if n == l && n.0[8] == 0 => {
                if since.elapsed() >= Duration::from_millis(300) {
                    return now.unwrap();
                }
            }
            _ => {
                since = Instant::now();
                last = now;
            }
        }
        d.assert(!d.passed(), format!("{disk}: published, and its I/O quiet"));
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn dd(args: &[&str]) {
    let out = Command::new("dd").args(args).output().unwrap();
    assert!(
        out.status.success(),
        "dd {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `perfabi`'s block counters (read .. discard_bytes) from `p0` to `p1`
/// against `/proc/diskstats`' from `ds0` to `ds1`: exactly equal, unless
/// the kernel skipped some of the programs' runs meanwhile (`missed`, see
/// `perfabi_bpf::Stats::missed`: a completion in an interrupt that came
/// while the same program ran on that CPU for another request runs no
/// program). Then no count is above diskstats', and the requests not
/// counted are at most the runs skipped.
fn assert_as_diskstats(
    what: &str,
    (p0, p1): (&[u64], &[u64]),
    (ds0, ds1): (&[u64], &[u64]),
    missed: u64,
) -> Vec<u64> {
    let ds = |i: usize| ds1[i] - ds0[i];
    // diskstats after the name: 0 reads, 2 sectors read, 4 writes,
    // 6 sectors written, 11 discards, 13 sectors discarded, 15 flushes.
    let want = [
        ds(0),
        ds(4),
        ds(11),
        ds(15),
        ds(2) * 512,
        ds(6) * 512,
        ds(13) * 512,
    ];
    let got: Vec<u64> = (0..7).map(|i| p1[i] - p0[i]).collect();
    if missed == 0 {
        assert_eq!(
            got, want,
            "{what}: perfabi (read, write, discard, flush, their bytes) vs /proc/diskstats"
        );
    } else {
        let short: u64 = (0..4).map(|i| want[i].saturating_sub(got[i])).sum();
        assert!(
            got.iter().zip(&want).all(|(g, w)| g <= w) && short <= missed,
            "{what}: perfabi (read, write, discard, flush, their bytes) {got:?} vs \
             /proc/diskstats {want:?}: {short} requests not counted, {missed} program runs \
             skipped by the kernel"
        );
        println!("{what}: the kernel skipped {missed} program runs; {short} requests not counted");
    }
    // The histogram's copies are whole.
    assert_eq!(
        p1[7],
        p1[9..].iter().sum::<u64>(),
        "count == the buckets' sum"
    );
    got
}

#[test]
fn a_loop_device_counts_as_proc_diskstats_does() {
    let test = "a_loop_device_counts_as_proc_diskstats_does";
    if !can_run(test) || !need_tools(test) {
        return;
    }
    let dir = TestDir::new("diskstats");
    // In this process; its scans are this test's (the daemon's loop does
    // them every 250 ms).
    let mut w = Running::start(&options(&dir)).unwrap();
    let mut seg = Segment::open(w.pin_path()).unwrap();
    let lo = Loop::attach(64);
    let name = lo.name();
    let dev = lo.dev.to_str().unwrap().to_string();
    let (ds0, p0) = quiet(&mut seg, &name, || w.scan().unwrap());
    let s0 = w.stats();
    // Writes, reads, a discard: O_DIRECT, so each reaches the device.
    dd(&[
        "if=/dev/zero",
        &format!("of={dev}"),
        "bs=64k",
        "count=64",
        "oflag=direct",
    ]);
    dd(&[
        &format!("if={dev}"),
        "of=/dev/null",
        "bs=4k",
        "count=1024",
        "iflag=direct",
    ]);
    let out = Command::new("blkdiscard")
        .args(["-o", "0", "-l", "1048576", &dev])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "blkdiscard: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (ds1, p1) = quiet(&mut seg, &name, || w.scan().unwrap());
    let s1 = w.stats();
    let skipped1 = s1.missed - s0.missed;
    let got = assert_as_diskstats(
        "reads, writes, a discard",
        (&p0, &p1),
        (&ds0, &ds1),
        skipped1,
    );
    assert!(
        got[0] >= 1024 && got[1] >= 64 && got[2] >= 1,
        "the workload's requests: {got:?}"
    );
    // Every one of those requests was issued to the driver (no flush
    // among them): the histogram counted each, but one whose issue ran
    // no program (a run the kernel skipped), which has no stamp. (Only
    // this disk's figures: the writer's own counts, unstamped among
    // them, are of every disk, and other tests' loop devices come and go
    // meanwhile.)
    let count = p1[7] - p0[7];
    let requests = got[0] + got[1] + got[2];
    assert!(
        count <= requests && requests - count <= skipped1,
        "latency observations: {count} of {requests} requests, {skipped1} program runs \
         skipped by the kernel"
    );
    assert!(p1[8] > p0[8], "latency sum");

    // A write and a flush (conv=fsync), then writes with O_DSYNC: each a
    // FUA write, which a loop device (a volatile cache, no FUA) completes
    // in a flush sequence. Every request issued to the driver has its
    // latency observed, flushes included; the data-less write of a flush
    // sequence, which the block layer completes itself, never issued, is
    // counted (as diskstats counts it) but has none (block.bpf.h).
    dd(&[
        "if=/dev/zero",
        &format!("of={dev}"),
        "bs=4k",
        "count=1",
        "oflag=direct",
        "conv=fsync",
    ]);
    dd(&[
        "if=/dev/zero",
        &format!("of={dev}"),
        "bs=4k",
        "count=8",
        "oflag=direct,dsync",
    ]);
    let (ds2, p2) = quiet(&mut seg, &name, || w.scan().unwrap());
    let skipped2 = w.stats().missed - s1.missed;
    let later = assert_as_diskstats(
        "writes, FUA writes and flushes",
        (&p1, &p2),
        (&ds1, &ds2),
        skipped2,
    );
    assert!(
        later[1] >= 9 && later[3] >= 1,
        "writes and a flush: {later:?}"
    );
    let count2 = p2[7] - p1[7];
    // (Fewer by the runs the kernel skipped, if it skipped an issue's.)
    let least = (9 + later[3]).saturating_sub(skipped2);
    assert!(
        (least..=later[1] + later[3]).contains(&count2),
        "{count2} observations: at least the 9 data writes and every flush, at most every \
         write and flush: {later:?}"
    );
    w.close().unwrap();
    println!(
        "BPF-WRITER loop-device-vs-diskstats PASS ({} reads, {} writes, {} discards as \
         /proc/diskstats, {count} latency observations; then {} writes and {} flushes as \
         /proc/diskstats, {count2} observations; {} program runs skipped by the kernel)",
        got[0],
        got[1],
        got[2],
        later[1],
        later[3],
        skipped1 + skipped2
    );
}

/// How long after now `cond` held, polling every 10 ms (bounded).
fn time_until(what: &str, mut cond: impl FnMut() -> bool) -> Duration {
    let t = Instant::now();
    let d = Deadline::after(Duration::from_secs(20));
    while !cond() {
        d.assert(!d.passed(), what);
        std::thread::sleep(Duration::from_millis(10));
    }
    t.elapsed()
}

#[test]
fn disks_that_come_and_go_appear_and_leave() {
    let test = "disks_that_come_and_go_appear_and_leave";
    if !can_run(test) || !need_tools(test) {
        return;
    }
    let dir = TestDir::new("hotplug");
    let (mut child, mut seg) = start_daemon(&dir.pin());
    let member = |seg: &mut Segment, name: &str| {
        seg.family("disk.dev.request_latency")
            .ok()
            .and_then(|f| f.members.into_iter().find(|m| m.instance == name))
    };
    let lo = Loop::attach(64);
    let name = lo.name();
    let appeared = time_until(&format!("{name} published"), || {
        member(&mut seg, &name).is_some()
    });
    let first = member(&mut seg, &name).unwrap();
    lo.detach();
    let left = time_until(&format!("{name} retired"), || {
        member(&mut seg, &name).is_none()
    });
    // Attached again: a new disk (a new diskseq) under the same name gets
    // its old instance number, under a new reg_id.
    let out = Command::new("losetup")
        .arg(&lo.dev)
        .arg(lo.file.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "losetup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let again = time_until(&format!("{name} published again"), || {
        member(&mut seg, &name).is_some()
    });
    let second = member(&mut seg, &name).unwrap();
    assert_eq!(second.instance_id, first.instance_id);
    assert_ne!(second.reg_id, first.reg_id);
    let _ = child.kill();
    let _ = child.wait();
    println!(
        "BPF-WRITER disks-come-and-go PASS (appeared after {} ms, left after {} ms, back after {} ms)",
        appeared.as_millis(),
        left.as_millis(),
        again.as_millis()
    );
}

/// The first whole disk of this machine that is not a loop, zram or ram
/// device: a medium, and request-based (what the block group publishes).
fn machine_disk() -> Option<String> {
    let mut names: Vec<String> = std::fs::read_dir("/sys/block")
        .ok()?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !["loop", "zram", "ram", "nbd"]
                .iter()
                .any(|p| n.starts_with(p))
        })
        .filter(|n| {
            let d = Path::new("/sys/block").join(n);
            d.join("mq").is_dir()
                && std::fs::read_to_string(d.join("size")).is_ok_and(|s| s.trim() != "0")
        })
        .collect();
    names.sort();
    names.into_iter().next()
}

#[test]
fn another_user_sees_this_machines_disk_latency_histogram() {
    let test = "another_user_sees_this_machines_disk_latency_histogram";
    if !can_run(test) || !need_tools(test) {
        return;
    }
    let Some(disk) = machine_disk() else {
        perfabi_test_harness::skip(test, "this machine has no request-based disk in /sys/block");
        return;
    };
    let dir = TestDir::new("machine-disk");
    let (mut child, mut seg) = start_daemon(&dir.pin());
    // Writes that reach this machine's disk (O_DIRECT, a file on the root
    // file system; the disk itself may not be open to this sandbox), once
    // it is published, until the histogram has them.
    let file = tempfile::NamedTempFile::new_in("/var/tmp").unwrap();
    let of = format!("of={}", file.path().display());
    let d = Deadline::after(Duration::from_secs(30));
    loop {
        dd(&[
            "if=/dev/zero",
            &of,
            "bs=4k",
            "count=64",
            "oflag=direct",
            "conv=fsync",
        ]);
        if instance_words(&mut seg, "disk.dev.request_latency", &disk).is_some_and(|w| w[0] >= 64) {
            break;
        }
        d.assert(!d.passed(), format!("{disk}'s latency histogram counting"));
        std::thread::sleep(Duration::from_millis(100));
    }
    if perfabi_shm::bpf_pin::unprivileged_bpf_enabled() {
        perfabi_test_harness::skip(
            test,
            "unprivileged BPF is enabled here: the pin is root's only (spec §9.1)",
        );
        let _ = child.kill();
        let _ = child.wait();
        return;
    }
    let text = cat_as_other_user(&dir.pin());
    // The table: the family's first member on its line, the others on
    // lines of their own below it.
    let mut in_family = false;
    let line = text
        .lines()
        .find(|l| {
            if l.starts_with("disk.dev.request_latency") {
                in_family = true;
            } else if !l.starts_with(' ') {
                in_family = false;
            }
            in_family && l.contains(&format!("device={disk} "))
        })
        .unwrap_or_else(|| panic!("no {disk} latency line in:\n{text}"));
    let obs: u64 = line
        .split_whitespace()
        .skip_while(|w| *w != "histogram")
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no observation count in {line:?}"));
    assert!(obs >= 64, "{line}");
    let _ = child.kill();
    let _ = child.wait();
    println!("BPF-WRITER machine-disk-histogram-any-user PASS ({disk}: {obs} observations, read by another user)");
    println!("{line}");
}
