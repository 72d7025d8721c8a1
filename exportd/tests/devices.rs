//! perfabi-exportd following real devices (root: a loop device, a veth
//! pair in a private network namespace), its values equal to `/proc`'s,
//! and its families equal to the README's table.
//!
//! Values are compared without a race: `/proc` is read, then a refresh
//! that started after that read is awaited, then the segment and `/proc`
//! are read again; only if `/proc` did not move in between must the
//! segment equal it exactly (it read the same text), else the comparison
//! is made again. Each test prints one line with the numbers it compared.
//! Without root or a tool, a test prints `PERFABI-SKIP <test>: <reason>`.

mod support;

use std::os::fd::AsFd;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use perfabi_exportd::procfs;
use perfabi_families::{readme, table};
use perfabi_reader::Segment;
use support::*;

/// Whether this test can run here: root, and every tool of `tools`
/// installed; if not, it reports the skip.
fn runnable(test: &str, tools: &[&str]) -> bool {
    if !rustix::process::geteuid().is_root() {
        perfabi_test_harness::skip(test, "needs root (makes devices)");
        return false;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    for tool in tools {
        if !std::env::split_paths(&path).any(|d| d.join(tool).is_file()) {
            perfabi_test_harness::skip(test, &format!("{tool} is not installed"));
            return false;
        }
    }
    true
}

/// Runs `cmd args`, panicking with its output if it fails; its stdout.
fn run_ok(cmd: &str, args: &[&str]) -> String {
    let out = Command::new(cmd).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{cmd} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The values of `instance` in `families`, in order, from one snapshot;
/// `None` if a family has no such instance.
fn values(seg: &mut Segment, families: &[&str], instance: &str) -> Option<Vec<u64>> {
    let snap = seg.snapshot().ok()?;
    families
        .iter()
        .map(|f| {
            let fam = snap.family(f)?;
            let m = fam.member(instance)?;
            Some(
                (0..snap.nr_cpus)
                    .map(|c| snap.words(c, m)[0])
                    .fold(0, u64::wrapping_add),
            )
        })
        .collect()
}

/// How long a device may take to be published, or unpublished, after it
/// appears or goes: the daemon follows at its next refresh (0.1 s here),
/// and the tests print how long it took; the bound only catches a daemon
/// that never follows, on however busy a machine.
const FOLLOW: Duration = Duration::from_secs(30);

/// Waits up to `limit` for `cond`; how long it took, or `None`.
fn wait_for(limit: Duration, mut cond: impl FnMut() -> bool) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < limit {
        if cond() {
            return Some(start.elapsed());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    None
}

/// Waits for a refresh that started after this call.
fn next_refresh(seg: &mut Segment) {
    let r0 = seg.counter("exportd.refreshes").unwrap().total;
    let done = wait_for(Duration::from_secs(60), || {
        seg.counter("exportd.refreshes").unwrap().total >= r0 + 2
    });
    assert!(done.is_some(), "the daemon stopped refreshing");
}

/// The segment's values of `instance` once they equal `proc()` read before
/// and after the refresh that published them (see the module's doc):
/// (segment, /proc).
fn settled(
    seg: &mut Segment,
    families: &[&str],
    instance: &str,
    mut proc: impl FnMut() -> Vec<u64>,
) -> (Vec<u64>, Vec<u64>) {
    let until = perfabi_test_harness::deadline::Deadline::witness();
    while !until.passed() {
        let before = proc();
        next_refresh(seg);
        let published = values(seg, families, instance).expect("the instance is published");
        if proc() == before {
            return (published, before);
        }
    }
    until.fail("/proc standing still for a refresh")
}

/// A loop device, detached on drop.
struct Loop(String);

impl Drop for Loop {
    fn drop(&mut self) {
        // Already detached when the test went well.
        let _ = Command::new("losetup")
            .args(["-d", &self.0])
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// `/proc/diskstats`' reads, writes, bytes read and bytes written of `name`.
fn diskstats(name: &str) -> Vec<u64> {
    let text = std::fs::read_to_string("/proc/diskstats").unwrap();
    let d = procfs::diskstats(&text)
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("{name} is not in /proc/diskstats"));
    vec![
        d.reads,
        d.writes,
        d.read_sectors * 512,
        d.write_sectors * 512,
    ]
}

const DISK: [&str; 4] = [
    "disk.dev.read",
    "disk.dev.write",
    "disk.dev.read_bytes",
    "disk.dev.write_bytes",
];

#[test]
fn a_loop_device_appears_counts_direct_io_as_proc_does_and_goes() {
    let test = "a_loop_device_appears_counts_direct_io_as_proc_does_and_goes";
    if !runnable(test, &["losetup"]) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let backing = dir.path().join("disk.img");
    std::fs::File::create(&backing)
        .unwrap()
        .set_len(4 << 20)
        .unwrap();
    // Loop devices are left out by default (node_exporter's exclude
    // pattern): an include pattern publishes them.
    let daemon = start(&path, &["--collector.diskstats.device-include", "^loop"]);
    let mut seg = Segment::open(&path).unwrap();
    let out = Command::new("losetup")
        .args(["-f", "--show"])
        .arg(&backing)
        .output()
        .unwrap();
    if !out.status.success() {
        perfabi_test_harness::skip(
            test,
            &format!(
                "losetup -f cannot make a loop device here: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        );
        return;
    }
    let dev = Loop(String::from_utf8_lossy(&out.stdout).trim().to_string());
    let name = Path::new(&dev.0)
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    // How soon is printed; the bound is only against a daemon that never
    // follows (a busy machine delays its refreshes).
    let appeared = wait_for(FOLLOW, || values(&mut seg, &DISK, &name).is_some())
        .unwrap_or_else(|| panic!("{name} was not published within {FOLLOW:?}"));
    let start_counts = diskstats(&name);

    // Known direct I/O: 16 writes then 8 reads of 4 KiB, each waited for.
    const BLOCK: usize = 4096;
    let mut mem = vec![0u8; 2 * BLOCK];
    let at = mem.as_ptr().align_offset(BLOCK);
    let buf = &mut mem[at..at + BLOCK];
    buf.fill(0x5a);
    {
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_DIRECT)
            .open(&dev.0)
            .unwrap();
        for i in 0..16 {
            f.write_all_at(buf, (i * BLOCK) as u64).unwrap();
        }
        for i in 0..8 {
            f.read_exact_at(buf, (i * BLOCK) as u64).unwrap();
        }
    }
    let (published, proc) = settled(&mut seg, &DISK, &name, || diskstats(&name));
    assert_eq!(published, proc, "{DISK:?} of {name}");
    let done: Vec<u64> = proc.iter().zip(&start_counts).map(|(a, b)| a - b).collect();
    assert!(
        done[0] >= 8 && done[1] >= 16 && done[2] >= 8 * 4096 && done[3] >= 16 * 4096,
        "the direct I/O is counted: {done:?}"
    );

    Command::new("losetup")
        .args(["-d", &dev.0])
        .status()
        .unwrap();
    let gone = wait_for(FOLLOW, || values(&mut seg, &DISK[..1], &name).is_none())
        .unwrap_or_else(|| panic!("{name} was still published {FOLLOW:?} after losetup -d"));
    stop(daemon);
    println!(
        "EXPORTD-DEVICES {name} appeared in {appeared:?}; reads {} = /proc {}, writes {} = /proc {}, read_bytes {} = /proc {}, write_bytes {} = /proc {} (this test: +{} reads, +{} writes, +{} B read, +{} B written); gone {gone:?} after losetup -d",
        published[0], proc[0], published[1], proc[1], published[2], proc[2], published[3], proc[3],
        done[0], done[1], done[2], done[3]
    );
}

/// A private network namespace, deleted on drop with its interfaces.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// `/proc/PID/net/dev` (the namespace of process `pid`): received and sent
/// packets and bytes of `iface`.
fn net_dev(pid: u32, iface: &str) -> Vec<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/net/dev")).unwrap();
    let d = procfs::net_dev(&text)
        .find(|d| d.name == iface)
        .unwrap_or_else(|| panic!("{iface} is not in the namespace's /proc/net/dev"));
    vec![d.rx_packets, d.rx_bytes, d.tx_packets, d.tx_bytes]
}

const NET: [&str; 4] = [
    "network.interface.in.packets",
    "network.interface.in.bytes",
    "network.interface.out.packets",
    "network.interface.out.bytes",
];

/// Sends `n` UDP datagrams of `len` bytes from 10.213.0.1 (on `a`) to
/// 10.213.0.2 (`b`'s, by a static neighbour entry) inside namespace `ns`:
/// out through `a`, into `b`.
fn send_udp(ns: &str, n: usize, len: usize) {
    let file = std::fs::File::open(format!("/run/netns/{ns}"))
        .or_else(|_| std::fs::File::open(format!("/var/run/netns/{ns}")))
        .unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            // Only this thread enters the namespace.
            rustix::thread::move_into_link_name_space(
                file.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .unwrap();
            let sock = std::net::UdpSocket::bind("10.213.0.1:0").unwrap();
            for _ in 0..n {
                sock.send_to(&vec![7u8; len], "10.213.0.2:9").unwrap();
            }
        })
        .join()
        .unwrap()
    });
}

#[test]
fn a_veth_pair_in_a_private_namespace_is_published_as_proc_counts_it_and_goes() {
    let test = "a_veth_pair_in_a_private_namespace_is_published_as_proc_counts_it_and_goes";
    if !runnable(test, &["ip"]) {
        return;
    }
    let ns = Netns(format!("perfabi-test-{}", std::process::id()));
    run_ok("ip", &["netns", "add", &ns.0]);
    let ip_n = |args: &[&str]| {
        let mut all = vec!["-n", ns.0.as_str()];
        all.extend(args);
        run_ok("ip", &all)
    };
    // No IPv6 in the namespace: no autoconfiguration packets of its own.
    let _ = Command::new("ip")
        .args(["netns", "exec", &ns.0, "sh", "-c"])
        .arg("echo 1 > /proc/sys/net/ipv6/conf/default/disable_ipv6; echo 1 > /proc/sys/net/ipv6/conf/all/disable_ipv6")
        .status();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let daemon = spawn_under(&["ip", "netns", "exec", &ns.0], &path, &[], || {
        path.exists()
    });
    let pid = daemon.id();
    let mut seg = Segment::open(&path).unwrap();
    ip_n(&[
        "link", "add", "name", "a", "type", "veth", "peer", "name", "b",
    ]);
    ip_n(&["link", "set", "dev", "b", "address", "02:00:00:00:00:0b"]);
    ip_n(&["addr", "add", "10.213.0.1/24", "dev", "a"]);
    ip_n(&["link", "set", "dev", "a", "up"]);
    ip_n(&["link", "set", "dev", "b", "up"]);
    ip_n(&[
        "neigh",
        "add",
        "10.213.0.2",
        "lladdr",
        "02:00:00:00:00:0b",
        "dev",
        "a",
        "nud",
        "permanent",
    ]);
    let appeared = wait_for(FOLLOW, || {
        values(&mut seg, &NET, "a").is_some() && values(&mut seg, &NET, "b").is_some()
    })
    .expect("veth a and b were not published in time (FOLLOW)");
    let (a0, b0) = (net_dev(pid, "a"), net_dev(pid, "b"));
    const N: usize = 50;
    send_udp(&ns.0, N, 100);
    let mut line =
        format!("EXPORTD-DEVICES veth appeared in {appeared:?}; sent {N} datagrams a -> b;");
    for (iface, start) in [("a", &a0), ("b", &b0)] {
        let (published, proc) = settled(&mut seg, &NET, iface, || net_dev(pid, iface));
        assert_eq!(published, proc, "{NET:?} of {iface}");
        line += &format!(
            " {iface}: in.packets {} = /proc {}, in.bytes {} = /proc {}, out.packets {} = /proc {}, out.bytes {} = /proc {} (+{} in, +{} out);",
            published[0], proc[0], published[1], proc[1], published[2], proc[2], published[3], proc[3],
            proc[0] - start[0], proc[2] - start[2]
        );
        let (sent, received) = (proc[2] - start[2], proc[0] - start[0]);
        match iface {
            "a" => assert!(sent >= N as u64, "a sent {sent}"),
            _ => assert!(received >= N as u64, "b received {received}"),
        }
    }
    // The daemon publishes its own namespace's interfaces, not the host's
    // (the test's).
    assert!(values(&mut seg, &NET, "lo").is_some());
    assert!(values(&mut seg, &NET, "eth0").is_none());

    ip_n(&["link", "del", "dev", "a"]);
    let gone = wait_for(FOLLOW, || {
        values(&mut seg, &NET[..1], "a").is_none() && values(&mut seg, &NET[..1], "b").is_none()
    })
    .expect("veth a and b were still published FOLLOW after they were deleted");
    stop(daemon);
    println!("{line} gone {gone:?} after ip link del");
}

/// Every family the daemon publishes is a row of the README's table, with
/// its kind, unit and dimension; every row with a userspace source is
/// published, but for the pressure totals this kernel lacks.
#[test]
fn every_published_family_is_the_tables_and_every_userspace_row_is_published() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    // Every collector: the defaults and the cgroups (off by default).
    let daemon = start(&path, &["--collector.cgroups"]);
    let mut seg = Segment::open(&path).unwrap();
    let snap = seg.snapshot().unwrap();
    let rows = readme::rows();
    let families: Vec<_> = snap
        .families
        .iter()
        .filter(|f| matches!(f.origin, perfabi::family::Origin::Family(_)))
        .collect();
    for f in &families {
        let row = readme::find(&rows, &f.name)
            .unwrap_or_else(|| panic!("{} is not in the README's table", f.name));
        assert!(row.userspace_source.is_some(), "{}: {row:?}", f.name);
        assert_eq!(Some(f.kind), row.kind_of(&f.name), "{} kind", f.name);
        assert_eq!(Some(f.unit), row.unit_of(&f.name), "{} unit", f.name);
        assert_eq!(
            f.dimension.as_str(),
            row.dimension.unwrap_or(""),
            "{} dimension",
            f.name
        );
        // A family shared with the kernel sources is the definition's,
        // help included, and one the definition says the exporter has.
        if let Some(d) = table::find(&f.name) {
            assert!(d.published_by(table::Writer::Exportd), "{}", f.name);
            assert_eq!(f.help, d.help, "{} help", f.name);
        }
    }
    let shared = table::published_by(table::Writer::Exportd)
        .filter(|d| families.iter().any(|f| f.name == d.name))
        .count();
    assert_eq!(
        shared,
        table::published_by(table::Writer::Exportd).count(),
        "the exporter publishes every family the definition gives it"
    );
    let mut absent = Vec::new();
    let user_rows: Vec<_> = rows
        .iter()
        .filter(|r| r.userspace_source.is_some())
        .collect();
    for r in &user_rows {
        if families.iter().any(|f| r.matches(&f.name)) {
            continue;
        }
        // kernel.all.pressure.<res>.<line>.total: published if the kernel
        // has that line.
        let lacks_pressure = r
            .name
            .strip_prefix("kernel.all.pressure.")
            .and_then(|p| p.split_once('.'))
            .is_some_and(|(res, rest)| {
                let p = std::fs::read_to_string(format!("/proc/pressure/{res}"))
                    .map(|t| procfs::pressure(&t))
                    .unwrap_or_default();
                let line = if rest.starts_with("some") {
                    p.some
                } else {
                    p.full
                };
                line.is_none()
            });
        assert!(lacks_pressure, "{} is not published", r.name);
        absent.push(r.name);
    }
    stop(daemon);
    println!(
        "EXPORTD-CATALOG {} families published, each a row of the table with its kind, unit and dimension; {} of {} rows with a userspace source published, absent: {absent:?} (this kernel has no such /proc/pressure total)",
        families.len(),
        user_rows.len() - absent.len(),
        user_rows.len()
    );
}

/// Interfaces named with terminal controls, which the kernel accepts
/// (`ESC ] 0 ; pwn BEL` retitles a terminal, `ESC [ 2 J` clears it): the
/// daemon skips them (no instance string can hold them) and logs each
/// once, escaped, so that its log holds no control byte at all.
#[test]
fn interfaces_named_with_terminal_controls_are_logged_escaped() {
    let test = "interfaces_named_with_terminal_controls_are_logged_escaped";
    if !runnable(test, &["ip"]) {
        return;
    }
    let ns = Netns(format!("perfabi-esc-{}", std::process::id()));
    run_ok("ip", &["netns", "add", &ns.0]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let daemon = spawn_under(&["ip", "netns", "exec", &ns.0], &path, &[], || {
        path.exists()
    });
    let (title, clear) = ("\x1b]0;pwn\x07", "\x1b[2J");
    run_ok(
        "ip",
        &[
            "-n", &ns.0, "link", "add", "name", title, "type", "veth", "peer", "name", clear,
        ],
    );
    // Counted as skipped at the next refresh.
    let mut seg = Segment::open(&path).unwrap();
    let skipped = wait_for(Duration::from_secs(30), || {
        seg.snapshot().ok().is_some_and(|snap| {
            snap.find("exportd.skipped_instances")
                .is_some_and(|i| snap.total(i) >= 2)
        })
    });
    let out = stop(daemon);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(
        skipped.is_some(),
        "the two interfaces were not skipped: {log}"
    );
    for shown in ["\\u{1b}]0;pwn\\u{7}", "\\u{1b}[2J"] {
        assert!(
            log.lines()
                .any(|l| l.contains(&format!("interface {shown}: its name cannot be"))),
            "{shown} not logged escaped: {log:?}"
        );
    }
    let controls: Vec<u8> = out
        .stderr
        .iter()
        .copied()
        .filter(|&b| b != b'\n' && (b < 0x20 || b == 0x7f))
        .collect();
    assert!(controls.is_empty(), "control bytes {controls:?} in {log:?}");
    println!(
        "EXPORTD-ESCAPE two interfaces named with terminal controls logged escaped, {} log lines, no control byte",
        log.lines().count()
    );
}
