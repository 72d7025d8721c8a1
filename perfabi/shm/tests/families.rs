//! Metric families through the userspace writer (ABI 1.1): every kind,
//! units, labels, instances coming and going, bad input refused with the
//! segment still valid, and consistency under a full-speed writer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use perfabi::{Buckets, Error, FamilySpec, Histogram, Kind, Reading, Semantics, Unit, ValueType};
use perfabi_shm::writer::{Config, MethodChoice, Writer};
use perfabi_test_harness::deadline::Deadline;

fn writer(dir: &tempfile::TempDir, method: MethodChoice) -> Writer {
    let cfg = Config {
        method,
        max_instances: 512,
        max_families: 16,
        max_members: 64,
        damon_capacity: 0,
        ..Config::default()
    };
    Writer::create(dir.path().join("seg"), &cfg).unwrap()
}

fn methods() -> [MethodChoice; 2] {
    [MethodChoice::Auto, MethodChoice::Lock]
}

#[test]
fn every_kind_reads_back() {
    for method in methods() {
        let dir = tempfile::tempdir().unwrap();
        let w = writer(&dir, method);
        assert_eq!(w.layout().abi_minor, 1, "{:?}", w.layout());
        let rx = w
            .add_family(&FamilySpec::new(
                "disk.dev.read_bytes",
                "Bytes read from the device",
                "device",
                Kind::Counter,
                Unit::BYTES,
            ))
            .unwrap();
        let sda = w
            .add_member(rx, "sda", &[("model", "virtio disk")])
            .unwrap();
        let vdb = w.add_member(rx, "vdb", &[]).unwrap();
        w.member_add(&sda, 4096).unwrap();
        w.member_add(&vdb, 512).unwrap();
        let q = w
            .add_family(&FamilySpec {
                value_type: ValueType::I64,
                ..FamilySpec::new("sched.queue", "Queue length", "", Kind::Gauge, Unit::COUNT)
            })
            .unwrap();
        let ql = w.add_member(q, "", &[]).unwrap();
        w.member_set(&ql, -3).unwrap();
        let lat = w
            .add_family(&FamilySpec::histogram(
                "disk.dev.latency",
                "Request latency",
                "device",
                Unit::NS,
                Buckets::Log2 { first: 10, n: 8 },
            ))
            .unwrap();
        let sda_lat = w.add_member(lat, "sda", &[]).unwrap();
        for v in [0, 1000, 1025, 5000, u64::MAX] {
            w.observe(&sda_lat, v).unwrap();
        }
        let pk = w
            .add_family(&FamilySpec::new(
                "net.queue_peak",
                "Longest queue",
                "device",
                Kind::Peak,
                Unit::PAGES,
            ))
            .unwrap();
        let eth = w.add_member(pk, "eth0", &[]).unwrap();
        thread::scope(|s| {
            for t in 0..4u64 {
                let (w, eth) = (&w, &eth);
                s.spawn(move || {
                    for v in 0..1000 {
                        w.peak(eth, t * 1000 + v).unwrap();
                    }
                });
            }
        });
        let legacy = w.add("old.counter", "bytes", Semantics::Counter).unwrap();
        w.adjust(legacy, 9).unwrap();

        let snap = w.snapshot().unwrap();
        let f = snap.family("disk.dev.read_bytes").unwrap();
        assert_eq!(f.unit, Unit::BYTES);
        assert_eq!(f.dimension, "device");
        assert_eq!(f.help, "Bytes read from the device");
        let m = f.member("sda").unwrap();
        assert_eq!(m.labels, [("model".into(), "virtio disk".into())]);
        assert_eq!(snap.reading(f, m), Reading::Unsigned(4096));
        assert_eq!(
            snap.reading(f, f.member("vdb").unwrap()),
            Reading::Unsigned(512)
        );
        let g = snap.family("sched.queue").unwrap();
        assert_eq!(snap.reading(g, &g.members[0]), Reading::Signed(-3));
        let h = snap.family("disk.dev.latency").unwrap();
        let Reading::Histogram(hv) = snap.reading(h, &h.members[0]) else {
            panic!("not a histogram")
        };
        assert_eq!(hv.count, 5);
        // Bounds 1024, 2048, 4096, 8192, ...: 0 and 1000 in the first, 1025 in
        // the second, 5000 in the fourth, u64::MAX in +Inf.
        assert_eq!(hv.buckets, [2, 1, 0, 1, 0, 0, 0, 1]);
        assert_eq!(hv.sum, 7025u64.wrapping_add(u64::MAX));
        let p = snap.family("net.queue_peak").unwrap();
        assert_eq!(snap.reading(p, &p.members[0]), Reading::Unsigned(3999));
        let o = snap.family("old.counter").unwrap();
        assert_eq!(o.unit, Unit::BYTES);
        assert_eq!(snap.reading(o, &o.members[0]), Reading::Unsigned(9));

        w.reset_peak(&eth).unwrap();
        let snap = w.snapshot().unwrap();
        let p = snap.family("net.queue_peak").unwrap();
        assert_eq!(snap.reading(p, &p.members[0]), Reading::Unsigned(0));
        // Kinds are enforced.
        assert_eq!(w.observe(&eth, 1), Err(Error::WrongKind));
        assert_eq!(w.peak(&sda, 1), Err(Error::WrongKind));
        assert_eq!(w.member_add(&sda_lat, 1), Err(Error::WrongKind));
    }
}

#[test]
fn bad_input_is_refused_and_the_segment_stays_valid() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(&dir, MethodChoice::Lock);
    let f = |name: &str| FamilySpec::new(name, "help", "device", Kind::Counter, Unit::COUNT);
    let net = w.add_family(&f("net.rx")).unwrap();
    let cases: Vec<(FamilySpec, Error)> = vec![
        (f("net_rx"), Error::DuplicateName),
        (f("net.rx_total"), Error::DuplicateName),
        (f("net.rx.bytes"), Error::DuplicateName),
        (f("net"), Error::DuplicateName),
        (f("9net"), Error::BadName),
        (
            FamilySpec {
                help: "x".repeat(128),
                ..f("a")
            },
            Error::BadHelp,
        ),
        (
            FamilySpec {
                help: "tab\there".into(),
                ..f("a")
            },
            Error::BadHelp,
        ),
        (
            FamilySpec {
                dimension: "Device".into(),
                ..f("a")
            },
            Error::BadLabelKey,
        ),
        (
            FamilySpec {
                dimension: "cpu".into(),
                ..f("a")
            },
            Error::BadLabelKey,
        ),
        (
            FamilySpec {
                unit: Unit::new(0, 0, 0, 2, 0, 0, 0),
                ..f("a")
            },
            Error::BadUnit,
        ),
        (
            FamilySpec::histogram("h", "", "", Unit::NS, Buckets::Explicit(vec![5, 5])),
            Error::BadBuckets,
        ),
        (
            FamilySpec::histogram("h", "", "", Unit::NS, Buckets::Explicit((1..40).collect())),
            Error::BadBuckets,
        ),
        (
            FamilySpec::histogram("h", "", "", Unit::NS, Buckets::Log2 { first: 60, n: 8 }),
            Error::BadBuckets,
        ),
        (
            FamilySpec {
                kind: Kind::Histogram,
                ..f("h")
            },
            Error::WrongKind,
        ),
    ];
    for (spec, want) in cases {
        assert_eq!(w.add_family(&spec), Err(want), "{spec:?}");
    }
    assert_eq!(
        w.add("net_rx", "", Semantics::Counter),
        Err(Error::DuplicateName)
    );
    assert_eq!(
        w.add("net.rx.x", "", Semantics::Counter),
        Err(Error::DuplicateName)
    );
    assert_eq!(w.add_member(net, "", &[]).err(), Some(Error::BadInstance));
    assert_eq!(
        w.add_member(net, "a b", &[]).err(),
        Some(Error::BadInstance)
    );
    assert_eq!(
        w.add_member(net, "a\"b", &[]).err(),
        Some(Error::BadInstance)
    );
    assert_eq!(
        w.add_member(net, "eth0", &[("device", "x")]).err(),
        Some(Error::BadLabels)
    );
    assert_eq!(
        w.add_member(net, "eth0", &[("a", "1"), ("a", "2")]).err(),
        Some(Error::BadLabels)
    );
    let five = [("a", "1"), ("b", "1"), ("c", "1"), ("d", "1"), ("e", "1")];
    assert_eq!(
        w.add_member(net, "eth0", &five).err(),
        Some(Error::BadLabels)
    );
    assert_eq!(
        w.add_member(net, "eth0", &[("le", "1")]).err(),
        Some(Error::BadLabelKey)
    );
    assert_eq!(
        w.add_member(net, "eth0", &[("k", &"v".repeat(48))]).err(),
        Some(Error::BadInstance)
    );
    w.add_member(net, "eth0", &[]).unwrap();
    assert_eq!(
        w.add_member(net, "eth0", &[]).err(),
        Some(Error::DuplicateInstance)
    );
    // After all the refusals, the segment reads, with exactly what was added.
    let snap = w.snapshot().unwrap();
    assert_eq!(snap.families.len(), 1);
    assert_eq!(snap.families[0].members.len(), 1);
    perfabi::validate(&std::fs::read(dir.path().join("seg")).unwrap()).unwrap();
}

#[test]
fn instances_come_and_go() {
    let dir = tempfile::tempdir().unwrap();
    let w = writer(&dir, MethodChoice::Auto);
    let fam = w
        .add_family(&FamilySpec::new(
            "irq.count",
            "Interrupts",
            "irq",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    let a = w.add_member(fam, "24:virtio0-input", &[]).unwrap();
    let b = w.add_member(fam, "25:virtio0-output", &[]).unwrap();
    w.member_add(&a, 7).unwrap();
    let id_of = |inst: &str| {
        let s = w.snapshot().unwrap();
        let f = s.family("irq.count").unwrap();
        f.member(inst).map(|m| (m.instance_id, m.reg_id))
    };
    let (a_no, a_reg) = id_of("24:virtio0-input").unwrap();
    w.del_member(&a).unwrap();
    assert_eq!(id_of("24:virtio0-input"), None);
    assert_eq!(
        w.member_add(&a, 1),
        Err(Error::UnknownInstance),
        "stale handle"
    );
    let a2 = w.add_member(fam, "24:virtio0-input", &[]).unwrap();
    let (no, reg) = id_of("24:virtio0-input").unwrap();
    assert_eq!(no, a_no, "a returning instance keeps its number");
    assert_ne!(reg, a_reg, "but not its registration id");
    let s = w.snapshot().unwrap();
    let f = s.family("irq.count").unwrap();
    assert_eq!(
        s.reading(f, f.member("24:virtio0-input").unwrap()),
        Reading::Unsigned(0)
    );
    assert_ne!(id_of("25:virtio0-output").unwrap().0, no);
    w.del_family(fam).unwrap();
    assert!(w.snapshot().unwrap().family("irq.count").is_none());
    assert_eq!(w.member_add(&a2, 1), Err(Error::UnknownInstance));
    assert_eq!(w.member_add(&b, 1), Err(Error::UnknownInstance));
    // The name is free again.
    w.add_family(&FamilySpec::new(
        "irq_count",
        "",
        "",
        Kind::Gauge,
        Unit::NONE,
    ))
    .unwrap();
}

#[test]
fn a_segment_without_family_tables_is_abi_1_0() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        max_families: 0,
        max_members: 0,
        damon_capacity: 0,
        ..Config::default()
    };
    let w = Writer::create(dir.path().join("seg"), &cfg).unwrap();
    assert_eq!(w.layout().abi_minor, 0);
    assert_eq!(
        w.add_family(&FamilySpec::new("a", "", "", Kind::Counter, Unit::COUNT)),
        Err(Error::NoFamilyRoom)
    );
    let bytes = std::fs::read(dir.path().join("seg")).unwrap();
    assert_eq!(&bytes[12..16], &192u32.to_ne_bytes(), "header_size");
}

#[test]
fn recreated_segment_keeps_families() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config {
        auto_heartbeat: false,
        max_families: 4,
        max_members: 8,
        damon_capacity: 0,
        ..Config::default()
    };
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &cfg).unwrap();
    let fam = w
        .add_family(&FamilySpec::new(
            "x.y",
            "h",
            "k",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    let m = w.add_member(fam, "one", &[("l", "v")]).unwrap();
    let len = std::fs::metadata(&path).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(len / 2)
        .unwrap();
    assert!(matches!(
        w.heartbeat(),
        perfabi_shm::writer::Health::Recreated { .. }
    ));
    w.member_add(&m, 3).unwrap();
    let s = w.snapshot().unwrap();
    let f = s.family("x.y").unwrap();
    let one = f.member("one").unwrap();
    assert_eq!(one.labels, [("l".into(), "v".into())]);
    assert_eq!(s.reading(f, one), Reading::Unsigned(3));
}

/// Instances added and deleted while a reader snapshots at full speed: no
/// snapshot shows a member whose values are not its own. Every member's
/// total is 0 or its registration id (the writer adds exactly that once),
/// so a deleted instance's values under a new one would show.
#[test]
fn churn_never_shows_values_under_another_instance() {
    for method in methods() {
        let dir = tempfile::tempdir().unwrap();
        let w = Arc::new(writer(&dir, method));
        let fam = w
            .add_family(&FamilySpec::new(
                "dev.ops",
                "ops",
                "device",
                Kind::Counter,
                Unit::COUNT,
            ))
            .unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let done = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let churn = {
            let (w, stop, done) = (w.clone(), stop.clone(), done.clone());
            thread::spawn(move || {
                let mut live = std::collections::VecDeque::new();
                let mut k = 0u64;
                let mut rounds = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let m = w.add_member(fam, &format!("d{}", k % 40), &[]).unwrap();
                    w.member_add(&m, m.reg_id() as i64).unwrap();
                    live.push_back(m);
                    if live.len() > 20 {
                        w.del_member(&live.pop_front().unwrap()).unwrap();
                    }
                    // Full speed, but let a reader on the same core in.
                    thread::yield_now();
                    k += 1;
                    rounds += 1;
                    done.store(rounds, Ordering::Relaxed);
                }
                rounds
            })
        };
        let reader = perfabi_reader_snapshots(&w, 20_000, &done);
        stop.store(true, Ordering::Relaxed);
        let rounds = churn.join().unwrap();
        let (snaps, busy, gens) = reader;
        println!(
            "FAMILY-CHURN {method:?}: {snaps} snapshots ({busy} busy attempts) over {gens} generations, {rounds} add/delete rounds: every member's values its own"
        );
        assert!(gens >= 200);
    }
}

/// Snapshots `w` at full speed, at least `n` times and until the writer
/// made 2,000 add/delete rounds and the snapshots saw 200 generations;
/// returns (snapshots, busy attempts,
/// generations seen).
fn perfabi_reader_snapshots(
    w: &Writer,
    n: usize,
    rounds: &std::sync::atomic::AtomicU64,
) -> (usize, usize, u64) {
    let view = w.view();
    let mut snap = perfabi::Snapshot::default();
    let mut gens = std::collections::BTreeSet::new();
    let (mut taken, mut busy) = (0, 0);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(120);
    while taken < n || rounds.load(Ordering::Relaxed) < 2_000 || gens.len() < 200 {
        assert!(
            std::time::Instant::now() < deadline,
            "in 2 minutes, {taken} snapshots saw only {} generations",
            gens.len()
        );
        match view.snapshot_into(&mut snap, perfabi::view::DEFAULT_RETRIES) {
            Ok(()) => {}
            // The metadata moved for the whole bound: the reader library
            // waits and tries again; so does this loop.
            Err(e) if e.is_busy() => {
                busy += 1;
                continue;
            }
            Err(e) => panic!("{e}"),
        }
        taken += 1;
        gens.insert(snap.generation);
        let f = snap.family("dev.ops").unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for m in &f.members {
            assert!(
                seen.insert(m.instance.clone()),
                "instance twice in one snapshot"
            );
            match snap.reading(f, m) {
                Reading::Unsigned(v) => assert!(
                    v == 0 || v == m.reg_id,
                    "member {} (reg {}) shows {v}: another instance's values",
                    m.instance,
                    m.reg_id
                ),
                r => panic!("{r:?}"),
            }
        }
        assert!(f.members.len() <= 21, "more members than ever live at once");
    }
    (taken, busy, gens.len() as u64)
}

/// One observation is one update: in every per-CPU copy, count equals the
/// sum of the buckets and the sum equals what those buckets' values add up
/// to (each bucket receives one fixed value).
#[test]
fn histogram_is_consistent_under_a_full_speed_writer() {
    let n: u64 = std::env::var("PERFABI_HIST_SNAPSHOTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000_000);
    for method in methods() {
        let dir = tempfile::tempdir().unwrap();
        let w = Arc::new(writer(&dir, method));
        let fam = w
            .add_family(&FamilySpec::histogram(
                "lat",
                "latency",
                "",
                Unit::NS,
                Buckets::Explicit(vec![10, 1000]),
            ))
            .unwrap();
        let m = w.add_member(fam, "", &[]).unwrap();
        let values = [7u64, 500, 70_000]; // one per bucket
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..2)
            .map(|t| {
                let (w, m, stop) = (w.clone(), m.clone(), stop.clone());
                thread::spawn(move || {
                    let mut k = t;
                    let mut done = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        w.observe(&m, values[k % 3]).unwrap();
                        k += 1;
                        done += 1;
                    }
                    done
                })
            })
            .collect();
        let view = w.view();
        let mut snap = perfabi::Snapshot::default();
        // The writers are seen observing before the snapshots are counted:
        // on busy CPUs the count could otherwise end before they start.
        let until = Deadline::witness();
        let observing = |snap: &mut perfabi::Snapshot| {
            view.snapshot_into(snap, perfabi::view::DEFAULT_RETRIES)
                .is_ok()
                && (0..snap.nr_cpus).any(|cpu| {
                    Histogram::from_words(snap.words(cpu, &snap.families[0].members[0])).count > 0
                })
        };
        let mut seen = false;
        while !seen && !until.passed() {
            seen = observing(&mut snap);
            thread::yield_now();
        }
        until.assert(
            seen,
            format_args!("an observation by the writers ({method:?})"),
        );
        let mut bad = 0u64;
        let mut busy = 0u64;
        for _ in 0..n {
            match view.snapshot_into(&mut snap, perfabi::view::DEFAULT_RETRIES) {
                Ok(()) => {}
                Err(e) if e.is_busy() => {
                    busy += 1;
                    continue;
                }
                Err(e) => panic!("{e}"),
            }
            let f = &snap.families[0];
            for cpu in 0..snap.nr_cpus {
                let h = Histogram::from_words(snap.words(cpu, &f.members[0]));
                let sum: u64 = h.buckets.iter().zip(values).map(|(b, v)| b * v).sum();
                if !h.consistent() || sum != h.sum {
                    bad += 1;
                }
            }
        }
        stop.store(true, Ordering::Relaxed);
        let observed: u64 = writers.into_iter().map(|t| t.join().unwrap()).sum();
        println!(
            "HISTOGRAM-CONSISTENCY {method:?}: {n} snapshots, {observed} observations by 2 writer threads, {bad} inconsistent, {busy} busy"
        );
        assert_eq!(bad, 0);
        assert!(busy < n / 10, "the reader was mostly starved: {busy} busy");
    }
}
