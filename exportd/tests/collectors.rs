//! The collectors of issue 33 item 4: the selection flags, the device
//! patterns, and the filesystem, loadavg, netstat and cgroups
//! collectors: their parsers on files recorded on this machine
//! (`tests/fixtures`), each end to end through a real segment read back
//! with the reader library, values checked against a reading of the
//! kernel's own files (or `os.statvfs` from Python) made by the test.
//! A test that needs root or a tool prints `PERFABI-SKIP <test>: <reason>`.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use perfabi::Snapshot;
use perfabi_exportd::collectors::{CgroupOptions, Context, FsOptions, Selection};
use perfabi_exportd::filter::{self, Filter};
use perfabi_exportd::sources::{self, Paths, Sources};
use perfabi_exportd::{cgroups, loadavg, mountinfo, netstat, statfs};
use perfabi_reader::Segment;
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::Deadline;
use support::*;

fn fixture(rel: &str) -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(rel);
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The families of the family table in `s` (not 1.0 entries), sorted.
fn families(s: &Snapshot) -> Vec<String> {
    let mut v: Vec<String> = s
        .families
        .iter()
        .filter(|f| matches!(f.origin, perfabi::family::Origin::Family(_)))
        .map(|f| f.name.clone())
        .collect();
    v.sort();
    v
}

/// The instances of `family` and their totals, sorted.
fn totals(s: &Snapshot, family: &str) -> Vec<(String, u64)> {
    let Some(f) = s.family(family) else {
        return Vec::new();
    };
    let mut v: Vec<(String, u64)> = f
        .members
        .iter()
        .map(|m| {
            let t = (0..s.nr_cpus)
                .map(|c| s.words(c, m)[0])
                .fold(0, u64::wrapping_add);
            (m.instance.clone(), t)
        })
        .collect();
    v.sort();
    v
}

fn total(s: &Snapshot, family: &str, instance: &str) -> Option<u64> {
    totals(s, family)
        .into_iter()
        .find(|(i, _)| i == instance)
        .map(|(_, v)| v)
}

fn snapshot(path: &Path) -> Snapshot {
    Segment::open(path).unwrap().snapshot().unwrap()
}

/// Waits for two refreshes that started after this call.
fn next_refresh(path: &Path) {
    let mut seg = Segment::open(path).unwrap();
    let r0 = seg.counter("exportd.refreshes").unwrap().total;
    let until = Deadline::witness();
    while seg.counter("exportd.refreshes").unwrap().total < r0 + 2 {
        if until.passed() {
            until.fail("two refreshes of the daemon");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn is_root() -> bool {
    rustix::process::geteuid().is_root()
}

/// The exporter's `(section, field) → value` of a `/proc/net/snmp`-like
/// text, parsed here independently: header and values zipped by position
/// within each pair of lines, as `nstat` reads them.
fn snmp_by_hand(text: &str) -> Vec<(String, String, i64)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for pair in lines.chunks(2) {
        let [h, v] = pair else { continue };
        let (hs, names) = h.split_once(": ").unwrap();
        let (vs, values) = v.split_once(": ").unwrap();
        assert_eq!(hs, vs);
        for (n, x) in names.split(' ').zip(values.split(' ')) {
            out.push((hs.to_string(), n.to_string(), x.parse().unwrap()));
        }
    }
    out
}

#[test]
fn recorded_files_of_this_machine_parse_by_name() {
    let l = loadavg::parse(&fixture("proc/loadavg"));
    assert!(l.load.iter().all(Option::is_some) && l.runnable.is_some() && l.total.is_some());
    for file in ["snmp", "netstat"] {
        let text = fixture(&format!("proc/net/{file}"));
        let by_hand = snmp_by_hand(&text);
        let parsed: Vec<_> = netstat::fields(&text).collect();
        // Every field the hand parser found with a value ≥ 0 is parsed
        // with the same value; negative ones (MaxConn -1) are left out.
        let expected: Vec<_> = by_hand.iter().filter(|x| x.2 >= 0).collect();
        assert_eq!(parsed.len(), expected.len(), "{file}");
        for ((s, n, v), (hs, hn, hv)) in parsed.iter().zip(expected) {
            assert_eq!((*s, *n, *v as i64), (hs.as_str(), hn.as_str(), *hv));
        }
        for x in netstat::FIELDS.iter().filter(|x| x.file == file) {
            assert!(
                parsed
                    .iter()
                    .any(|(s, n, _)| *s == x.section && *n == x.name),
                "{} {} {}",
                file,
                x.section,
                x.name
            );
        }
    }
    let text = fixture("proc/self/mountinfo");
    assert_eq!(mountinfo::mounts(&text).count(), text.lines().count());
    let [u, us, sy] = cgroups::flat_keyed(
        &fixture("cpu.stat"),
        ["usage_usec", "user_usec", "system_usec"],
    );
    assert!(u.is_some() && us.is_some() && sy.is_some());
    println!(
        "EXPORTD-FIXTURES loadavg, net/snmp, net/netstat ({} fields), mountinfo ({} mounts), cpu.stat of this machine parsed",
        netstat::FIELDS.len(),
        text.lines().count()
    );
}

#[test]
fn a_kernel_that_adds_or_moves_columns_shifts_nothing() {
    // This machine's snmp with its Tcp columns reversed and one added.
    let text = fixture("proc/net/snmp");
    let mut out = String::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [h, v] = pair else { continue };
        if h.starts_with("Tcp:") {
            let names: Vec<&str> = h[5..].split(' ').rev().collect();
            let values: Vec<&str> = v[5..].split(' ').rev().collect();
            out += &format!(
                "Tcp: NewCounter {}\nTcp: 77 {}\n",
                names.join(" "),
                values.join(" ")
            );
        } else {
            out += &format!("{h}\n{v}\n");
        }
    }
    let orig: Vec<_> = netstat::fields(&text).filter(|x| x.0 == "Tcp").collect();
    let moved: Vec<_> = netstat::fields(&out).filter(|x| x.0 == "Tcp").collect();
    for x in &orig {
        assert!(moved.contains(x), "{x:?}");
    }
    assert!(moved.contains(&("Tcp", "NewCounter", 77)));
}

#[test]
fn the_selection_flags_choose_the_families() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let d = start(
        &path,
        &["--collector.disable-defaults", "--collector.loadavg"],
    );
    let s = snapshot(&path);
    assert_eq!(
        families(&s),
        [
            "exportd.collector.refresh_us",
            "exportd.collector.success",
            "kernel.all.load",
            "kernel.all.nprocs",
            "kernel.all.runnable"
        ]
    );
    assert_eq!(
        totals(&s, "exportd.collector.success"),
        [("loadavg".to_string(), 1)]
    );
    stop(d);
    // Defaults, netstat off then on again (the later flag wins),
    // filesystem off.
    let d = start(
        &path,
        &[
            "--no-collector.netstat",
            "--no-collector.filesystem",
            "--collector.netstat",
        ],
    );
    let s = snapshot(&path);
    let f = families(&s);
    assert!(f.iter().any(|f| f == "network.tcp.activeopens"), "{f:?}");
    assert!(f.iter().any(|f| f == "kernel.cpu.time"), "{f:?}");
    assert!(!f.iter().any(|f| f.starts_with("filesys.")), "{f:?}");
    assert!(
        !f.iter().any(|f| f.starts_with("cgroup.")),
        "off by default: {f:?}"
    );
    let out = stop(d);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        log.contains("collectors: cpu, softirqs, vmstat, diskstats, netdev, interrupts, pressure, meminfo, loadavg, netstat\n"),
        "{log}"
    );
    println!("EXPORTD-SELECT --collector.disable-defaults --collector.loadavg: 5 families; --no-collector.filesystem: no filesys.*; the later of --no-collector.netstat and --collector.netstat wins");
}

#[test]
fn bad_flags_are_refused_before_anything_is_created() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    for (args, says) in [
        (
            &[
                "--collector.diskstats.device-include",
                "sd",
                "--collector.diskstats.device-exclude",
                "loop",
            ][..],
            "--collector.diskstats.device-include and --collector.diskstats.device-exclude cannot be given together",
        ),
        (
            &["--collector.netdev.device-exclude", "(eth"][..],
            "--collector.netdev.device-exclude \"(eth\": not a regular expression",
        ),
        (
            &["--no-collector.vmstat", "--vmstat", "pgfault"][..],
            "--vmstat needs the vmstat collector",
        ),
        (
            &["--collector.filesystem.mount-timeout", "0"][..],
            "--collector.filesystem.mount-timeout 0 must be between",
        ),
    ] {
        let out = Command::new(bin())
            .arg("--path")
            .arg(&path)
            .args(args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!path.exists());
    }
}

#[test]
fn device_patterns_filter_interfaces_and_disks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let d = start(&path, &["--collector.netdev.device-include", "^lo$"]);
    let s = snapshot(&path);
    let net: Vec<String> = totals(&s, "network.interface.in.bytes")
        .into_iter()
        .map(|x| x.0)
        .collect();
    assert_eq!(net, ["lo"]);
    // The default disk exclude: no partition, loop or RAM disk.
    let exclude = regex::Regex::new(filter::DISKS_EXCLUDE).unwrap();
    let disks = totals(&s, "disk.dev.read");
    assert!(disks.iter().all(|(d, _)| !exclude.is_match(d)), "{disks:?}");
    stop(d);
    // A fake /proc: an include pattern publishes the loop device only.
    let t = tempfile::tempdir().unwrap();
    let paths = Paths {
        proc: t.path().join("proc"),
        sys: t.path().join("sys"),
    };
    let write = |p: PathBuf, text: &str| {
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    };
    write(
        paths.proc("partitions"),
        "major minor #blocks name\n\n 254 0 100 vda\n 7 0 10 loop0\n 7 1 10 loop1\n",
    );
    write(
        paths.proc("diskstats"),
        "254 0 vda 10 0 80 0 20 0 160 0 0 0 0\n 7 0 loop0 1 0 8 0 2 0 16 0 0 0 0\n 7 1 loop1 1 0 8 0 2 0 16 0 0 0 0\n",
    );
    for d in ["vda", "loop0", "loop1"] {
        write(paths.sys.join(format!("block/{d}/size")), "100");
    }
    let w = writer(t.path(), 256);
    let mut ctx = Context::new(paths.clone());
    let only = Selection::only(&sources::ALL, &["diskstats"]);
    let published = |ctx: &Context| {
        let w = writer(&t.path().join(format!("{}", ctx.disks.allows("vda"))), 256);
        let _s = Sources::new(&w, ctx, &only).unwrap();
        totals(&w.snapshot().unwrap(), "disk.dev.read")
            .into_iter()
            .map(|x| x.0)
            .collect::<Vec<_>>()
    };
    ctx.disks = Filter::new(("i", Some("^loop0$")), ("e", None), filter::DISKS_EXCLUDE).unwrap();
    assert_eq!(published(&ctx), ["loop0"]);
    ctx.disks = Filter::new(("i", None), ("e", None), filter::DISKS_EXCLUDE).unwrap();
    assert_eq!(published(&ctx), ["vda"]);
    drop(w);
    println!("EXPORTD-PATTERNS netdev include ^lo$: [lo]; default disk exclude: {} disks, none a partition/loop/ram; include ^loop0$: [loop0]", disks.len());
}

fn writer(dir: &Path, max_members: u32) -> Writer {
    std::fs::create_dir_all(dir).unwrap();
    let config = Config {
        nr_cpus: Some(2),
        max_instances: max_members + 64,
        max_families: 64,
        max_members,
        auto_heartbeat: false,
        ..Config::default()
    };
    Writer::create(dir.join("seg"), &config).unwrap()
}

/// `/proc/loadavg` in thousandths, parsed here: 1, 5, 15 min, running,
/// total.
fn loadavg_by_hand() -> [u64; 5] {
    let text = std::fs::read_to_string("/proc/loadavg").unwrap();
    let f: Vec<&str> = text.split_whitespace().collect();
    let load = |s: &str| (s.parse::<f64>().unwrap() * 1000.0).round() as u64;
    let (r, t) = f[3].split_once('/').unwrap();
    [
        load(f[0]),
        load(f[1]),
        load(f[2]),
        r.parse().unwrap(),
        t.parse().unwrap(),
    ]
}

#[test]
fn loadavg_equals_proc_loadavg() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let d = start(
        &path,
        &["--collector.disable-defaults", "--collector.loadavg"],
    );
    let until = Deadline::witness();
    let (published, read) = loop {
        let before = loadavg_by_hand();
        next_refresh(&path);
        let s = snapshot(&path);
        let published = [
            total(&s, "kernel.all.load", "1min").unwrap(),
            total(&s, "kernel.all.load", "5min").unwrap(),
            total(&s, "kernel.all.load", "15min").unwrap(),
            total(&s, "kernel.all.runnable", "").unwrap(),
            total(&s, "kernel.all.nprocs", "").unwrap(),
        ];
        // Equal only if /proc/loadavg stood still over the refresh; the
        // task counts change often on a busy machine: the loads must.
        if loadavg_by_hand()[..3] == before[..3] {
            break (published, before);
        }
        if until.passed() {
            until.fail("/proc/loadavg standing still for a refresh");
        }
    };
    assert_eq!(published[..3], read[..3]);
    assert!(published[4] > 0 && published[3] <= published[4] + 64);
    stop(d);
    println!("EXPORTD-LOADAVG published {published:?} (thousandths; running, total), /proc/loadavg {read:?}");
}

#[test]
fn netstat_counters_lie_between_two_readings_of_proc() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let d = start(
        &path,
        &["--collector.disable-defaults", "--collector.netstat"],
    );
    let read = || {
        let mut v = snmp_by_hand(&std::fs::read_to_string("/proc/net/snmp").unwrap());
        v.extend(snmp_by_hand(
            &std::fs::read_to_string("/proc/net/netstat").unwrap(),
        ));
        v
    };
    let before = read();
    next_refresh(&path);
    let s = snapshot(&path);
    let after = read();
    let mut checked = 0;
    for x in netstat::FIELDS
        .iter()
        .filter(|x| x.kind == perfabi::Kind::Counter)
    {
        let get = |v: &[(String, String, i64)]| {
            v.iter()
                .find(|(s, n, _)| s == x.section && n == x.name)
                .map(|y| y.2 as u64)
        };
        let (Some(b), Some(a)) = (get(&before), get(&after)) else {
            assert!(
                s.family(x.family).is_none(),
                "{} without its field",
                x.family
            );
            continue;
        };
        let p = total(&s, x.family, "").unwrap();
        assert!(b <= p && p <= a, "{}: {b} <= {p} <= {a}", x.family);
        checked += 1;
    }
    stop(d);
    println!("EXPORTD-NETSTAT {checked} counters each between two readings of /proc/net/snmp and netstat made by the test");
}

/// Runs `cmd args`; its stdout, or `None` (with the reason skipped) if it
/// fails.
fn try_run(test: &str, cmd: &str, args: &[&str]) -> Option<String> {
    match Command::new(cmd).args(args).output() {
        Ok(o) if o.status.success() => Some(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => {
            perfabi_test_harness::skip(
                test,
                &format!(
                    "{cmd} {args:?}: {}",
                    String::from_utf8_lossy(&o.stderr).trim()
                ),
            );
            None
        }
        Err(e) => {
            perfabi_test_harness::skip(test, &format!("{cmd}: {e}"));
            None
        }
    }
}

/// A mount, unmounted on drop.
struct Mounted(PathBuf);

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

const FS: [&str; 7] = [
    "filesys.capacity",
    "filesys.free",
    "filesys.avail",
    "filesys.maxfiles",
    "filesys.freefiles",
    "filesys.readonly",
    "filesys.device_error",
];

#[test]
fn a_tmpfs_mount_appears_with_statvfs_values_turns_read_only_and_goes() {
    let test = "a_tmpfs_mount_appears_with_statvfs_values_turns_read_only_and_goes";
    if !is_root() {
        perfabi_test_harness::skip(test, "needs root (mounts a tmpfs)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let m = mnt.to_str().unwrap().to_string();
    if try_run(
        test,
        "mount",
        &[
            "-t",
            "tmpfs",
            "-o",
            "size=8m,nr_inodes=1000",
            "perfabi-fs",
            &m,
        ],
    )
    .is_none()
    {
        return;
    }
    let mounted = Mounted(mnt.clone());
    std::fs::write(mnt.join("f"), vec![7u8; 1 << 20]).unwrap();
    let d = start(
        &path,
        &["--collector.disable-defaults", "--collector.filesystem"],
    );
    let until = Deadline::witness();
    while total(&snapshot(&path), "filesys.capacity", &m).is_none() {
        if until.passed() {
            until.fail("the tmpfs mount published");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    next_refresh(&path);
    let s = snapshot(&path);
    let got: Vec<u64> = FS.iter().map(|f| total(&s, f, &m).unwrap()).collect();
    // Python's os.statvfs, an independent reading.
    let py = try_run(
        test,
        "python3",
        &["-c", &format!("import os; s = os.statvfs({m:?}); print(s.f_frsize * s.f_blocks, s.f_frsize * s.f_bfree, s.f_frsize * s.f_bavail, s.f_files, s.f_ffree)")],
    );
    let Some(py) = py else { return };
    let want: Vec<u64> = py.split_whitespace().map(|x| x.parse().unwrap()).collect();
    assert_eq!(got[..5], want[..], "statvfs of {m}");
    assert_eq!(got[5..], [0, 0]);
    assert_eq!(got[0], 8 << 20);
    let member = s
        .family("filesys.capacity")
        .unwrap()
        .member(&m)
        .unwrap()
        .clone();
    assert_eq!(
        member.labels,
        [
            ("device".to_string(), "perfabi-fs".to_string()),
            ("fstype".to_string(), "tmpfs".to_string())
        ]
    );
    // Read-only: filesys.readonly 1, the same registration.
    try_run(test, "mount", &["-o", "remount,ro", &m]).expect("remount ro");
    let until = Deadline::witness();
    while total(&snapshot(&path), "filesys.readonly", &m) != Some(1) {
        if until.passed() {
            until.fail("filesys.readonly 1 after mount -o remount,ro");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let again = snapshot(&path);
    assert_eq!(
        again
            .family("filesys.capacity")
            .unwrap()
            .member(&m)
            .unwrap()
            .reg_id,
        member.reg_id
    );
    drop(mounted);
    let until = Deadline::witness();
    while total(&snapshot(&path), "filesys.capacity", &m).is_some() {
        if until.passed() {
            until.fail("the mount gone after umount");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    stop(d);
    println!("EXPORTD-FILESYSTEM a tmpfs of 8 MiB: {got:?} equal to Python's os.statvfs; read-only after remount; gone after umount");
}

/// A fake `/proc` whose mountinfo lists `mounts` (real folders).
fn fake_mounts(root: &Path, mounts: &[&Path]) -> Paths {
    let paths = Paths {
        proc: root.join("proc"),
        sys: root.join("sys"),
    };
    std::fs::create_dir_all(paths.proc("self")).unwrap();
    let text: String = mounts
        .iter()
        .enumerate()
        .map(|(i, m)| {
            format!(
                "{i} 1 0:{i} / {} rw,relatime - ext4 /dev/vd{i} rw\n",
                m.display()
            )
        })
        .collect();
    std::fs::write(paths.proc("self/mountinfo"), text).unwrap();
    paths
}

#[test]
fn a_statfs_that_hangs_marks_its_mount_stuck_and_the_refresh_goes_on() {
    // No mount can be made to hang here without a network filesystem or
    // FUSE: the hang is an injected statfs that blocks on one mount point
    // until released; the others are the real statvfs.
    let dir = tempfile::tempdir().unwrap();
    let (good, bad) = (dir.path().join("good"), dir.path().join("bad"));
    std::fs::create_dir(&good).unwrap();
    std::fs::create_dir(&bad).unwrap();
    let paths = fake_mounts(dir.path(), &[&good, &bad]);
    let release = Arc::new(AtomicBool::new(false));
    let stat: statfs::StatFn = {
        let (release, bad) = (release.clone(), bad.clone());
        Arc::new(move |p: &Path| {
            if p == bad {
                while !release.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
            statfs::statvfs(p)
        })
    };
    let timeout = Duration::from_millis(300);
    let ctx = Context {
        filesystem: FsOptions {
            timeout,
            stat,
            ..FsOptions::default()
        },
        ..Context::new(paths)
    };
    let w = writer(&dir.path().join("w"), 256);
    let t = Instant::now();
    let mut src = Sources::new(&w, &ctx, &Selection::only(&sources::ALL, &["filesystem"])).unwrap();
    let first = t.elapsed();
    let (g, b) = (good.to_str().unwrap(), bad.to_str().unwrap());
    let s = w.snapshot().unwrap();
    assert_eq!(total(&s, "filesys.device_error", g), Some(0));
    assert_eq!(total(&s, "filesys.device_error", b), Some(1));
    assert!(total(&s, "filesys.capacity", g).unwrap() > 0);
    assert!(first >= timeout, "{first:?}");
    // The next refreshes do not wait for it again.
    let t = Instant::now();
    src.refresh(&w);
    src.refresh(&w);
    let next = t.elapsed();
    assert!(next < timeout, "two refreshes took {next:?}");
    assert_eq!(
        total(&w.snapshot().unwrap(), "filesys.device_error", b),
        Some(1)
    );
    // The call returns: the mount answers again.
    release.store(true, Ordering::Relaxed);
    let until = Deadline::witness();
    loop {
        src.refresh(&w);
        let s = w.snapshot().unwrap();
        if total(&s, "filesys.device_error", b) == Some(0) {
            assert!(total(&s, "filesys.capacity", b).unwrap() > 0);
            break;
        }
        if until.passed() {
            until.fail("the released mount answering");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    println!("EXPORTD-STUCK-MOUNT (injected statfs) first refresh {first:?} with a {timeout:?} timeout, then two refreshes in {next:?}; device_error 1 until the call returned, then 0");
}

/// A fake cgroup v2 cgroup at `dir`.
fn cgroup(dir: &Path, usage: u64, memory: bool) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join("cpu.stat"),
        format!("usage_usec {usage}\nuser_usec {}\nsystem_usec {}\nnr_periods 0\nnr_throttled 2\nthrottled_usec 30\n", usage / 2, usage / 2),
    )
    .unwrap();
    if memory {
        std::fs::write(dir.join("memory.current"), "4096\n").unwrap();
        std::fs::write(dir.join("memory.stat"), "anon 1024\nfile 2048\nkernel 5\n").unwrap();
        std::fs::write(
            dir.join("memory.events"),
            "low 0\nhigh 0\nmax 0\noom 1\noom_kill 1\noom_group_kill 0\n",
        )
        .unwrap();
        std::fs::write(
            dir.join("io.stat"),
            "8:0 rbytes=100 wbytes=200 rios=3 wios=4 dbytes=0 dios=0\n253:9 rbytes=1 wbytes=2 rios=1 wios=1\n",
        )
        .unwrap();
    }
}

#[test]
fn cgroups_come_and_go_bounded_by_depth_and_count() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cg");
    cgroup(&root, 1000, false);
    cgroup(&root.join("a"), 500, true);
    cgroup(&root.join("a/b"), 100, false);
    cgroup(&root.join("a/b/deep"), 1, false);
    for i in 0..5 {
        cgroup(&root.join(format!("z{i}")), 10, false);
    }
    let paths = Paths {
        proc: dir.path().join("proc"),
        sys: dir.path().join("sys"),
    };
    std::fs::create_dir_all(paths.sys.join("dev/block")).unwrap();
    std::os::unix::fs::symlink(
        "../../devices/virtual/block/sda",
        paths.sys.join("dev/block/8:0"),
    )
    .unwrap();
    let ctx = Context {
        cgroups: CgroupOptions {
            root: Some(root.clone()),
            max: 5,
            depth: 2,
        },
        ..Context::new(paths)
    };
    let w = writer(&dir.path().join("w"), 512);
    let mut src = Sources::new(&w, &ctx, &Selection::only(&sources::ALL, &["cgroups"])).unwrap();
    let s = w.snapshot().unwrap();
    // Breadth first in name order: /, /a, /z0, /z1, /z2 (the 5 of
    // --collector.cgroups.max); /a/b, /z3, /z4 are dropped; /a/b/deep is
    // below the depth.
    let names = |s: &Snapshot, f: &str| totals(s, f).into_iter().map(|x| x.0).collect::<Vec<_>>();
    assert_eq!(
        names(&s, "cgroup.cpu.usage"),
        ["/", "/a", "/z0", "/z1", "/z2"]
    );
    assert_eq!(total(&s, "cgroup.dropped", ""), Some(3));
    assert_eq!(total(&s, "cgroup.cpu.usage", "/a"), Some(500));
    assert_eq!(total(&s, "cgroup.cpu.throttled_time", "/a"), Some(30));
    assert_eq!(
        totals(&s, "cgroup.memory.current"),
        [("/a".to_string(), 4096)]
    );
    assert_eq!(totals(&s, "cgroup.memory.file"), [("/a".to_string(), 2048)]);
    assert_eq!(
        totals(&s, "cgroup.memory.oom_kill"),
        [("/a".to_string(), 1)]
    );
    assert_eq!(
        totals(&s, "cgroup.io.write_bytes"),
        [("/a::253:9".to_string(), 2), ("/a::sda".to_string(), 200)]
    );
    // Room: /a/b appears once the z's go; /a made again is a new
    // registration.
    let old = s
        .family("cgroup.cpu.usage")
        .unwrap()
        .member("/a")
        .unwrap()
        .reg_id;
    for i in 0..5 {
        std::fs::remove_dir_all(root.join(format!("z{i}"))).unwrap();
    }
    std::fs::rename(root.join("a"), dir.path().join("a-old")).unwrap();
    cgroup(&root.join("a"), 7, false);
    src.refresh(&w);
    let s = w.snapshot().unwrap();
    assert_eq!(names(&s, "cgroup.cpu.usage"), ["/", "/a"]);
    assert_eq!(total(&s, "cgroup.dropped", ""), Some(0));
    assert_eq!(total(&s, "cgroup.cpu.usage", "/a"), Some(7));
    assert_ne!(
        s.family("cgroup.cpu.usage")
            .unwrap()
            .member("/a")
            .unwrap()
            .reg_id,
        old
    );
    assert!(
        totals(&s, "cgroup.memory.current").is_empty(),
        "its memory files went with it"
    );
    assert!(totals(&s, "cgroup.io.reads").is_empty());
    println!("EXPORTD-CGROUPS fake hierarchy: 5 of 8 published (max 5, depth 2), 3 dropped; io per device; a cgroup made again is a new registration");
}

#[test]
fn a_real_cgroup_appears_with_its_cpu_stat_and_goes() {
    let test = "a_real_cgroup_appears_with_its_cpu_stat_and_goes";
    if !is_root() {
        perfabi_test_harness::skip(test, "needs root (makes a cgroup)");
        return;
    }
    let info = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let Some(root) = mountinfo::mounts(&info).find(|m| m.fstype == "cgroup2") else {
        perfabi_test_harness::skip(test, "no cgroup2 mount");
        return;
    };
    let name = format!("perfabi-test-{}", std::process::id());
    let cg = Path::new(&root.mountpoint).join(&name);
    if let Err(e) = std::fs::create_dir(&cg) {
        perfabi_test_harness::skip(test, &format!("cannot make a cgroup: {e}"));
        return;
    }
    struct Rmdir(PathBuf);
    impl Drop for Rmdir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir(&self.0);
        }
    }
    let made = Rmdir(cg.clone());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let d = start(
        &path,
        &[
            "--collector.disable-defaults",
            "--collector.cgroups",
            "--collector.cgroups.depth",
            "1",
        ],
    );
    let instance = format!("/{name}");
    let until = Deadline::witness();
    while total(&snapshot(&path), "cgroup.cpu.usage", &instance).is_none() {
        if until.passed() {
            until.fail("the new cgroup published");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    // No task in it: its usage is what its cpu.stat says, 0.
    let usage = |p: &Path| {
        cgroups::flat_keyed(
            &std::fs::read_to_string(p.join("cpu.stat")).unwrap(),
            ["usage_usec"],
        )[0]
        .unwrap()
    };
    next_refresh(&path);
    assert_eq!(
        total(&snapshot(&path), "cgroup.cpu.usage", &instance),
        Some(usage(&cg))
    );
    // The root's usage lies between two readings of its cpu.stat.
    let rootp = Path::new(&root.mountpoint);
    let before = usage(rootp);
    next_refresh(&path);
    let p = total(&snapshot(&path), "cgroup.cpu.usage", "/").unwrap();
    let after = usage(rootp);
    assert!(before <= p && p <= after, "{before} <= {p} <= {after}");
    drop(made);
    let until = Deadline::witness();
    while total(&snapshot(&path), "cgroup.cpu.usage", &instance).is_some() {
        if until.passed() {
            until.fail("the removed cgroup gone");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    stop(d);
    println!("EXPORTD-CGROUP-REAL {instance} under {} appeared with its cpu.stat, went after rmdir; the root's usage {p} between {before} and {after}", root.mountpoint);
}

#[test]
fn a_fifo_in_place_of_a_cgroup_file_is_not_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("cg");
    cgroup(&root, 10, false);
    let f = root.join("trap");
    std::fs::create_dir_all(&f).unwrap();
    rustix::fs::mknodat(
        rustix::fs::CWD,
        f.join("cpu.stat"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let ctx = Context {
        cgroups: CgroupOptions {
            root: Some(root),
            ..CgroupOptions::default()
        },
        ..Context::new(Paths::default())
    };
    let w = writer(&dir.path().join("w"), 64);
    let t = Instant::now();
    let _src = Sources::new(&w, &ctx, &Selection::only(&sources::ALL, &["cgroups"])).unwrap();
    let s = w.snapshot().unwrap();
    assert_eq!(totals(&s, "cgroup.cpu.usage"), [("/".to_string(), 10)]);
    println!(
        "EXPORTD-CGROUP-FIFO a FIFO named cpu.stat skipped, refresh in {:?}",
        t.elapsed()
    );
}
