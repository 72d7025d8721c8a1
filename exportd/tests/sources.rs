//! The `/proc` sources against a fake `/proc` and `/sys` tree: devices
//! that come and go, IRQ names, per-CPU columns, a full segment, and a
//! hostile file of a million rows. (The daemon against the real files,
//! with real devices, is `tests/devices.rs`.)

use std::path::Path;
use std::time::Duration;

use perfabi::Snapshot;
use perfabi_exportd::collectors::{Context, Selection};
use perfabi_exportd::follow::Room;
use perfabi_exportd::sources::{self, Paths, Sources};

/// The collectors whose files the fake tree has (the others are
/// `tests/collectors.rs`').
fn old() -> Selection {
    Selection::only(
        &sources::ALL,
        &[
            "cpu",
            "softirqs",
            "vmstat",
            "diskstats",
            "netdev",
            "interrupts",
            "pressure",
            "meminfo",
        ],
    )
}
use perfabi_shm::writer::{Config, Writer};

/// A fake tree of every file the sources read.
struct Tree {
    dir: tempfile::TempDir,
    paths: Paths,
}

const MEMINFO: &str = "MemTotal: 1000 kB\nMemFree: 900 kB\nMemAvailable: 950 kB\nBuffers: 1 kB\n\
Cached: 2 kB\nActive: 3 kB\nInactive: 4 kB\nDirty: 5 kB\nWriteback: 6 kB\nAnonPages: 7 kB\n\
Mapped: 8 kB\nShmem: 9 kB\nSlab: 10 kB\nSwapTotal: 11 kB\nSwapFree: 12 kB\nCommitted_AS: 13 kB\n\
HugePages_Total: 0\n";

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let paths = Paths {
            proc: dir.path().join("proc"),
            sys: dir.path().join("sys"),
        };
        let t = Tree { dir, paths };
        t.proc(
            "stat",
            "cpu  2 0 0 0\ncpu0 1 0 0 0\ncpu1 1 0 0 0\nctxt 4242\n",
        );
        t.proc("softirqs", "    CPU0 CPU1\n  TIMER: 5 6\n");
        t.proc("vmstat", "pgfault 5\n");
        t.proc("meminfo", MEMINFO);
        t.proc(
            "pressure/cpu",
            "some avg10=0.00 avg60=0.00 avg300=0.00 total=77\n",
        );
        t.disks(
            " 254 0 100 vda\n 254 1 50 vda1\n",
            "254 0 vda 10 0 80 0 20 0 160 0 0 0 0 3 0 24 0 5 0\n\
             254 1 vda1 9 0 72 0 19 0 150 0 0 0 0 0 0 0 0 0 0\n\
               7 0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
        );
        t.sys("block/vda/size", "200");
        t.sys("block/loop0/size", "0");
        t.proc(
            "net/dev",
            "Inter-|   Receive |  Transmit\n face |bytes packets|bytes packets\n\
                lo: 100 2 0 0 0 0 0 0 100 2 0 0 0 0 0 0\n\
              eth0: 500 5 0 0 0 0 0 0 300 3 0 0 0 0 0 0\n",
        );
        t.proc(
            "interrupts",
            "      CPU0 CPU1\n 24: 1 2 IO-APIC 5-edge ACPI:Ged\n 25: 3 4 IO-APIC 6-edge\n\
             NMI: 5 6 Non-maskable interrupts\n ERR: 7\n",
        );
        t.sys("kernel/irq/24/actions", "ACPI:Ged\n");
        t
    }

    fn write(&self, path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        // Written in place, as the kernel's files change: the sources keep
        // /proc files open.
        std::fs::write(path, text).unwrap();
    }

    /// `/proc/partitions` (its `listed` lines after the header) and
    /// `/proc/diskstats`.
    fn disks(&self, listed: &str, diskstats: &str) {
        let partitions = format!("major minor #blocks name\n\n{listed}");
        self.proc("partitions", &partitions);
        self.proc("diskstats", diskstats);
    }

    fn proc(&self, rel: &str, text: &str) {
        self.write(&self.paths.proc(rel), text);
    }

    fn sys(&self, rel: &str, text: &str) {
        self.write(&self.paths.sys.join(rel), text);
    }

    /// The collectors' configuration: the defaults, with this tree's files.
    fn ctx(&self) -> Context {
        Context::new(self.paths.clone())
    }

    fn writer(&self, max_members: u32) -> Writer {
        let config = Config {
            nr_cpus: Some(2),
            max_instances: max_members + 16,
            max_families: 64,
            max_members,
            auto_heartbeat: false,
            ..Config::default()
        };
        Writer::create(self.dir.path().join("seg"), &config).unwrap()
    }
}

/// The instances of `family` and their per-CPU values.
fn members(s: &Snapshot, family: &str) -> Vec<(String, Vec<u64>)> {
    let f = s
        .family(family)
        .unwrap_or_else(|| panic!("no family {family}"));
    let mut v: Vec<_> = f
        .members
        .iter()
        .map(|m| {
            let per: Vec<u64> = (0..s.nr_cpus).map(|c| s.words(c, m)[0]).collect();
            (m.instance.clone(), per)
        })
        .collect();
    v.sort();
    v
}

fn names(s: &Snapshot, family: &str) -> Vec<String> {
    members(s, family).into_iter().map(|(n, _)| n).collect()
}

/// How many families of the family table `s` has (not 1.0 entries).
fn registered(s: &Snapshot) -> usize {
    s.families
        .iter()
        .filter(|f| matches!(f.origin, perfabi::family::Origin::Family(_)))
        .count()
}

fn skipped(w: &Writer) -> u64 {
    let s = w.snapshot().unwrap();
    s.total(s.find(Room::SKIPPED).unwrap())
}

#[test]
fn devices_come_and_go_with_the_files() {
    let t = Tree::new();
    let need = sources::need(&t.ctx(), &old());
    let w = t.writer(256);
    let mut src = Sources::new(&w, &t.ctx(), &old()).unwrap();
    let s = w.snapshot().unwrap();
    // Whole disks with a medium only: not the partition, not the unbound
    // loop device.
    assert_eq!(
        members(&s, "disk.dev.read"),
        [("vda".to_string(), vec![10, 0])]
    );
    assert_eq!(members(&s, "disk.dev.write_bytes")[0].1, [160 * 512, 0]);
    assert_eq!(members(&s, "disk.dev.discard")[0].1, [3, 0]);
    assert_eq!(members(&s, "disk.dev.discard_bytes")[0].1, [24 * 512, 0]);
    assert_eq!(members(&s, "disk.dev.flush")[0].1, [5, 0]);
    assert_eq!(names(&s, "network.interface.in.bytes"), ["eth0", "lo"]);
    assert_eq!(
        members(&s, "network.interface.out.packets")[0],
        ("eth0".into(), vec![3, 0])
    );
    // IRQ 25 has no actions file: "25:". Counts per CPU column; ERR's one
    // count on the first column's CPU.
    assert_eq!(
        members(&s, "kernel.interrupts.count"),
        [
            ("24:ACPI:Ged".to_string(), vec![1, 2]),
            ("25:".to_string(), vec![3, 4])
        ]
    );
    assert_eq!(
        members(&s, "kernel.interrupts.other"),
        [
            ("ERR".to_string(), vec![7, 0]),
            ("NMI".to_string(), vec![5, 6])
        ]
    );
    assert_eq!(members(&s, "kernel.all.pswitch")[0].1, [4242, 0]);
    assert_eq!(
        members(&s, "kernel.all.pressure.cpu.some.total")[0].1,
        [77, 0]
    );
    // A file without a full line, and files the kernel lacks: absent.
    assert!(s.family("kernel.all.pressure.cpu.full.total").is_none());
    assert!(s.family("kernel.all.pressure.irq.full.total").is_none());
    assert_eq!(members(&s, "mem.physmem")[0].1, [1000, 0]);
    assert_eq!(members(&s, "mem.util.committed_AS")[0].1, [13, 0]);
    // What `need` counted is what was registered.
    assert_eq!(registered(&s), need.families);
    let reg_vda = s
        .family("disk.dev.read")
        .unwrap()
        .member("vda")
        .unwrap()
        .clone();

    // losetup: loop0 gets a size and is listed; eth0 goes; IRQ 24 gets
    // another action (its row changes); vda goes and comes back.
    t.sys("block/loop0/size", "2048");
    t.disks(
        " 254 1 50 vda1\n 7 0 1024 loop0\n",
        "254 1 vda1 9 0 72 0 19 0 150 0 0 0 0 0 0 0 0 0 0\n\
           7 0 loop0 4 0 32 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
    );
    t.proc(
        "net/dev",
        "h|\nh|\n lo: 100 2 0 0 0 0 0 0 100 2 0 0 0 0 0 0\n",
    );
    t.proc(
        "interrupts",
        "      CPU0 CPU1\n 24: 1 2 IO-APIC 5-edge ACPI:Ged, my dev\n 25: 3 4 IO-APIC 6-edge\n",
    );
    t.sys("kernel/irq/24/actions", "ACPI:Ged,my \"dev\"\n");
    src.refresh(&w);
    let s = w.snapshot().unwrap();
    assert_eq!(
        members(&s, "disk.dev.read_bytes"),
        [("loop0".to_string(), vec![32 * 512, 0])]
    );
    assert_eq!(names(&s, "network.interface.in.packets"), ["lo"]);
    assert_eq!(
        names(&s, "kernel.interrupts.count"),
        ["24:ACPI:Ged,my__dev_", "25:"]
    );
    assert!(names(&s, "kernel.interrupts.other").is_empty());
    // vda returns: a new registration under its old instance number.
    t.disks(
        " 254 0 100 vda\n 7 0 1024 loop0\n",
        "254 0 vda 11 0 80 0 20 0 160 0 0 0 0 3 0 24 0 5 0\n\
           7 0 loop0 4 0 32 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n",
    );
    src.refresh(&w);
    let s = w.snapshot().unwrap();
    assert_eq!(names(&s, "disk.dev.write"), ["loop0", "vda"]);
    let vda = s.family("disk.dev.read").unwrap().member("vda").unwrap();
    assert_eq!(vda.instance_id, reg_vda.instance_id);
    assert_ne!(vda.reg_id, reg_vda.reg_id);
    // Detached: size 0, not listed, its counts unchanged.
    t.sys("block/loop0/size", "0");
    t.proc("partitions", "major minor #blocks name\n\n 254 0 100 vda\n");
    src.refresh(&w);
    assert_eq!(names(&w.snapshot().unwrap(), "disk.dev.write"), ["vda"]);
    assert_eq!(skipped(&w), 0);
    println!(
        "EXPORTD-FAKE-PROC need at start {} families, {} members; disks, interfaces and IRQs followed",
        need.families, need.members
    );
}

#[test]
fn a_file_missing_at_start_leaves_its_families_out() {
    let t = Tree::new();
    std::fs::remove_file(t.paths.proc("diskstats")).unwrap();
    std::fs::remove_file(t.paths.proc("interrupts")).unwrap();
    let need = sources::need(&t.ctx(), &old());
    let w = t.writer(256);
    let mut src = Sources::new(&w, &t.ctx(), &old()).unwrap();
    src.refresh(&w);
    let s = w.snapshot().unwrap();
    assert!(s.family("disk.dev.read").is_none());
    assert!(s.family("kernel.interrupts.count").is_none());
    assert_eq!(names(&s, "network.interface.in.bytes"), ["eth0", "lo"]);
    assert_eq!(registered(&s), need.families);
}

#[test]
fn a_full_segment_skips_new_devices_and_keeps_the_others() {
    let t = Tree::new();
    let need = sources::need(&t.ctx(), &old());
    // Room for what is live now and 5 members more: one interface (4
    // members), not two.
    let w = t.writer(need.members as u32 + 5);
    let mut src = Sources::new(&w, &t.ctx(), &old()).unwrap();
    let before = w.snapshot().unwrap();
    let net = |extra: &str| {
        format!("h|\nh|\n lo: 100 2 0 0 0 0 0 0 100 2 0 0 0 0 0 0\n eth0: 500 5 0 0 0 0 0 0 300 3 0 0 0 0 0 0\n{extra}")
    };
    t.proc(
        "net/dev",
        &net(" veth1: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n veth2: 2 2 0 0 0 0 0 0 2 2 0 0 0 0 0 0\n"),
    );
    for _ in 0..3 {
        src.refresh(&w);
    }
    let s = w.snapshot().unwrap();
    assert_eq!(
        names(&s, "network.interface.in.bytes"),
        ["eth0", "lo", "veth1"]
    );
    assert_eq!(skipped(&w), 1, "veth2, counted once");
    for f in ["disk.dev.read", "kernel.interrupts.count", "mem.physmem"] {
        assert_eq!(members(&s, f), members(&before, f), "{f} is intact");
    }
    // veth1 goes: veth2 finds its room.
    t.proc("net/dev", &net(" veth2: 2 2 0 0 0 0 0 0 2 2 0 0 0 0 0 0\n"));
    src.refresh(&w);
    src.refresh(&w);
    let s = w.snapshot().unwrap();
    assert_eq!(
        names(&s, "network.interface.out.bytes"),
        ["eth0", "lo", "veth2"]
    );
    println!(
        "EXPORTD-FULL members {} + 5 of headroom: veth1 published, veth2 skipped ({} counted) until veth1 went",
        need.members,
        skipped(&w)
    );
}

#[test]
fn a_million_rows_cost_a_bounded_refresh() {
    let t = Tree::new();
    let w = t.writer(512);
    let mut src = Sources::new(&w, &t.ctx(), &old()).unwrap();
    let mut text = String::from("h|\nh|\n");
    for i in 0..1_000_000 {
        text.push_str(&format!("e{i}: 1 1 0 0 0 0 0 0 1 1 0 0 0 0 0 0\n"));
    }
    t.proc("net/dev", &text);
    // This thread's CPU time, not the wall clock: other work on the
    // machine delays a refresh but does not make it cost more.
    let cpu = || {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
        Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
    };
    let start = cpu();
    src.refresh(&w);
    let first = cpu() - start;
    let start = cpu();
    src.refresh(&w);
    let second = cpu() - start;
    let s = w.snapshot().unwrap();
    let published = names(&s, "network.interface.in.bytes").len();
    let members: usize = s.families.iter().map(|f| f.members.len()).sum();
    assert!(members <= 512 + 16);
    let skipped = skipped(&w);
    // Rows past MAX_LINES are not read: never more devices than that.
    assert!(
        published as u64 + skipped <= perfabi_exportd::procfs::MAX_LINES as u64,
        "{published} + {skipped}"
    );
    assert!(second < Duration::from_secs(2), "{second:?}");
    println!(
        "EXPORTD-MILLION-ROWS {published} interfaces published, {skipped} skipped of 1000000 rows; refreshes took {first:?} then {second:?} of CPU"
    );
}
