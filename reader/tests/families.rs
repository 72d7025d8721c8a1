//! Metric families (ABI 1.1) through the reader library: listing them with
//! instances, units, help and labels; consistent snapshots with histograms;
//! the family handle's hot path, which follows instances that come and go
//! and is never torn.

mod support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

use perfabi::family::Origin;
use perfabi_reader::{
    Buckets, Error, Family, FamilyValues, Histogram, Kind, Reading, Segment, Semantics, Unit,
};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::Deadline;
use perfabi_test_harness::forge::add_to_value;
use support::*;

use perfabi::FamilySpec;

fn config() -> Config {
    Config {
        max_instances: 512,
        max_families: 16,
        max_members: 128,
        damon_capacity: 0,
        ..Config::default()
    }
}

/// Run by other tests as a child writer process (see `support`).
#[test]
#[ignore = "helper: the writer process that other tests start and kill"]
fn child_writer() {
    run_child_writer();
}

/// A writer with one family of every kind and a 1.0 counter.
fn every_kind(w: &Writer) {
    let rx = w
        .add_family(&FamilySpec::new(
            "disk.read_bytes",
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
        .add_family(&FamilySpec::new(
            "sched.queue",
            "Runnable tasks",
            "",
            Kind::Gauge,
            Unit::COUNT,
        ))
        .unwrap();
    let ql = w.add_member(q, "", &[]).unwrap();
    w.member_set(&ql, 7).unwrap();
    let pk = w
        .add_family(&FamilySpec::new(
            "mem.peak_pages",
            "Most pages in use",
            "pool",
            Kind::Peak,
            Unit::PAGES,
        ))
        .unwrap();
    let p = w.add_member(pk, "main", &[]).unwrap();
    w.peak(&p, 300).unwrap();
    w.peak(&p, 200).unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "disk.latency",
            "Request latency",
            "device",
            Unit::NS,
            Buckets::Log2 { first: 10, n: 6 },
        ))
        .unwrap();
    let l = w.add_member(lat, "sda", &[]).unwrap();
    for v in [100, 2000, 2000, 40_000, 1 << 40] {
        w.observe(&l, v).unwrap();
    }
    let old = w.add("old.ticks", "count", Semantics::Counter).unwrap();
    w.adjust(old, 5).unwrap();
}

#[test]
fn families_list_instances_units_help_and_labels() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &config()).unwrap();
    every_kind(&w);
    let mut seg = Segment::open(&path).unwrap();
    let fams = seg.families().unwrap();
    let names: Vec<&str> = fams.iter().map(|f| f.name.as_str()).collect();
    // 1.0 entries first, as families of one instance; then the table's.
    assert_eq!(
        names,
        [
            "old.ticks",
            "disk.read_bytes",
            "sched.queue",
            "mem.peak_pages",
            "disk.latency"
        ]
    );
    let old = &fams[0];
    assert!(matches!(old.origin, Origin::Entry(_)));
    assert_eq!((old.kind, old.unit), (Kind::Counter, Unit::COUNT));
    assert_eq!(old.members.len(), 1);
    assert_eq!(old.members[0].instance, "");

    let rx = seg.family("disk.read_bytes").unwrap();
    assert_eq!(rx.help, "Bytes read from the device");
    assert_eq!(rx.dimension, "device");
    assert_eq!(rx.unit, Unit::BYTES);
    assert_eq!(rx.unit_text, "bytes");
    let sda = rx.member("sda").unwrap();
    assert_eq!(sda.labels, [("model".into(), "virtio disk".into())]);
    assert!(rx.member("vdb").unwrap().labels.is_empty());

    let lat = seg.family("disk.latency").unwrap();
    assert_eq!(lat.kind, Kind::Histogram);
    assert_eq!(lat.buckets, Some(Buckets::Log2 { first: 10, n: 6 }));
    assert_eq!(lat.members[0].words, 8);
    assert_eq!(seg.family("mem.peak_pages").unwrap().unit, Unit::PAGES);
    assert!(matches!(
        seg.family("disk"),
        Err(Error::NoSuchFamily(ref n)) if n == "disk"
    ));
    assert_eq!(
        seg.family_handle("nope").unwrap_err().code(),
        "no-such-family"
    );

    // The snapshot holds every family at one generation, histograms whole.
    let snap = seg.snapshot().unwrap();
    let f = snap.family("disk.latency").unwrap();
    let Reading::Histogram(h) = snap.reading(f, &f.members[0]) else {
        panic!("not a histogram");
    };
    // Bounds 1024, 2048, 4096, 8192, 16384, +Inf.
    assert_eq!(h.buckets, [1, 2, 0, 0, 0, 2]);
    assert_eq!((h.count, h.sum), (5, 44_100 + (1 << 40)));
    let p = snap.family("mem.peak_pages").unwrap();
    assert_eq!(snap.reading(p, &p.members[0]), Reading::Unsigned(300));
    let q = snap.family("sched.queue").unwrap();
    assert_eq!(snap.reading(q, &q.members[0]), Reading::Unsigned(7));
}

/// Every reading of `values` (read through a handle of `f`) equals the
/// snapshot's reading of the same member.
fn same_as_snapshot(f: &Family, values: &FamilyValues, snap: &perfabi::Snapshot) {
    let sf = snap.family(&f.name).unwrap();
    assert_eq!(values.len(), f.members.len());
    for (k, m) in f.members.iter().enumerate() {
        let sm = sf.member(&m.instance).unwrap();
        assert_eq!(values.reading(f, k), snap.reading(sf, sm), "{}", m.instance);
        for cpu in 0..values.nr_cpus() {
            assert_eq!(values.words(k, cpu), snap.words(cpu, sm));
        }
    }
}

#[test]
fn a_family_handle_reads_what_the_snapshot_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &config()).unwrap();
    every_kind(&w);
    let mut seg = Segment::open(&path).unwrap();
    let snap = seg.snapshot().unwrap();
    for f in &snap.families {
        let mut h = seg.family_handle(&f.name).unwrap();
        let mut out = FamilyValues::default();
        let g = seg.read_family(&mut h, &mut out).unwrap();
        assert_eq!(g, snap.generation);
        assert_eq!(out.generation(), g);
        assert_eq!(out.nr_cpus(), seg.nr_cpus());
        assert_eq!(h.family(), f);
        same_as_snapshot(h.family(), &out, &snap);
    }
}

/// Spec §5.1: a consistent copy in which a histogram's count is not the
/// sum of its buckets (a broken or hostile writer; here the test, adding 1
/// to CPU 1's count behind the writer) is served by no read: a snapshot
/// decoding the tables afresh, one keeping them from an earlier read, and
/// the family's handle all fail with `bad-histogram`, naming the member
/// slot and the CPU. The handle of another family still reads; once the
/// count is its buckets' sum again, everything does.
#[test]
fn a_histogram_whose_count_is_not_its_buckets_sum_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(
        &path,
        &Config {
            nr_cpus: Some(2),
            ..config()
        },
    )
    .unwrap();
    every_kind(&w);
    let mut seg = Segment::open(&path).unwrap();
    let mut kept = seg.snapshot().unwrap();
    let mut lat = seg.family_handle("disk.latency").unwrap();
    let mut rx = seg.family_handle("disk.read_bytes").unwrap();
    let mut out = FamilyValues::default();
    seg.read_family(&mut lat, &mut out).unwrap();
    let m = &lat.family().members[0];
    let want = perfabi::Error::BadHistogram {
        slot: m.slot.unwrap(),
        cpu: 1,
    };
    let count = u64::from(m.value_slot);
    add_to_value(&path, 1, count, 1);
    let refused = |r: Result<(), Error>| {
        let e = r.unwrap_err();
        assert!(matches!(e, Error::Abi(a) if a == want), "{e}");
        assert_eq!(e.code(), "bad-histogram");
    };
    refused(seg.snapshot_into(&mut kept));
    refused(seg.snapshot().map(drop));
    refused(seg.read_family(&mut lat, &mut out).map(drop));
    assert!(out.is_empty(), "a refused read leaves no values");
    seg.read_family(&mut rx, &mut out).unwrap();
    assert_eq!(out.len(), 2);

    add_to_value(&path, 1, count, u64::MAX);
    seg.snapshot_into(&mut kept).unwrap();
    seg.read_family(&mut lat, &mut out).unwrap();
    same_as_snapshot(lat.family(), &out, &kept);
}

#[test]
fn a_family_handle_follows_instances_and_refuses_a_deleted_family() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(
        &path,
        &Config {
            nr_cpus: Some(16),
            ..config()
        },
    )
    .unwrap();
    let fam = w
        .add_family(&FamilySpec::new(
            "net.dev.rx_bytes",
            "Bytes received",
            "interface",
            Kind::Counter,
            Unit::BYTES,
        ))
        .unwrap();
    let eth0 = w.add_member(fam, "eth0", &[]).unwrap();
    w.member_add(&eth0, 100).unwrap();
    let mut seg = Segment::open(&path).unwrap();
    assert_eq!(seg.nr_cpus(), 16);
    let mut h = seg.family_handle("net.dev.rx_bytes").unwrap();
    let mut out = FamilyValues::default();
    let g0 = seg.read_family(&mut h, &mut out).unwrap();
    assert_eq!(out.len(), 1);
    assert_eq!(out.reading(h.family(), 0), Reading::Unsigned(100));

    // Instances come and go: the handle resolves them again at the new
    // generation, with their values.
    let eth1 = w.add_member(fam, "eth1", &[("driver", "virtio")]).unwrap();
    w.member_add(&eth1, 7).unwrap();
    let g1 = seg.read_family(&mut h, &mut out).unwrap();
    assert!(g1 > g0);
    assert_eq!(h.generation(), Some(g1));
    let instances: Vec<&str> = h
        .family()
        .members
        .iter()
        .map(|m| m.instance.as_str())
        .collect();
    assert_eq!(instances, ["eth0", "eth1"]);
    assert_eq!(out.reading(h.family(), 1), Reading::Unsigned(7));
    w.del_member(&eth0).unwrap();
    seg.read_family(&mut h, &mut out).unwrap();
    assert_eq!(h.family().members.len(), 1);
    assert_eq!(out.len(), 1);
    assert_eq!(out.reading(h.family(), 0), Reading::Unsigned(7));
    same_as_snapshot(h.family(), &out, &seg.snapshot().unwrap());

    // Values without a metadata change: no resolution, the same handle.
    w.member_add(&eth1, 1).unwrap();
    let g = seg.read_family(&mut h, &mut out).unwrap();
    assert_eq!(out.reading(h.family(), 0), Reading::Unsigned(8));
    assert_eq!(g, h.generation().unwrap());

    // The family is deleted, and one of the same name registered: the
    // handle is bound to the old registration and refuses to read.
    w.del_family(fam).unwrap();
    let again = w
        .add_family(&FamilySpec::new(
            "net.dev.rx_bytes",
            "Bytes received",
            "interface",
            Kind::Counter,
            Unit::BYTES,
        ))
        .unwrap();
    w.add_member(again, "eth0", &[]).unwrap();
    assert!(matches!(
        seg.read_family(&mut h, &mut out),
        Err(Error::Abi(perfabi::Error::UnknownInstance))
    ));
    let mut h = seg.family_handle("net.dev.rx_bytes").unwrap();
    seg.read_family(&mut h, &mut out).unwrap();
    assert_eq!(out.reading(h.family(), 0), Reading::Unsigned(0));
}

/// A read that fails leaves no values behind: the attempt copied the
/// slots of the handle's old runs before it found its family deleted, and
/// a new family's member took those slots, so they held another family's
/// value (999999) that `out` then gave as member 0 of `rv.a`.
#[test]
fn a_failed_read_leaves_no_values() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(
        &path,
        &Config {
            nr_cpus: Some(2),
            ..config()
        },
    )
    .unwrap();
    let spec = |name| FamilySpec::new(name, "", "k", Kind::Counter, Unit::NONE);
    let a = w.add_family(&spec("rv.a")).unwrap();
    let x = w.add_member(a, "x", &[]).unwrap();
    w.member_add(&x, 111).unwrap();
    let mut seg = Segment::open(&path).unwrap();
    let mut h = seg.family_handle("rv.a").unwrap();
    let mut out = FamilyValues::default();
    seg.read_family(&mut h, &mut out).unwrap();
    assert_eq!(out.reading(h.family(), 0), Reading::Unsigned(111));

    w.del_family(a).unwrap();
    let b = w.add_family(&spec("rv.b")).unwrap();
    let y = w.add_member(b, "y", &[]).unwrap();
    w.member_add(&y, 999_999).unwrap();
    assert_eq!(
        y.value_slot(),
        h.family().members[0].value_slot,
        "y took x's slot"
    );
    assert!(matches!(
        seg.read_family(&mut h, &mut out),
        Err(Error::Abi(perfabi::Error::UnknownInstance))
    ));
    assert_eq!(out, FamilyValues::default());
    assert!(out.is_empty());
    assert_eq!(out.nr_cpus(), 0);
}

#[test]
fn a_handle_of_a_recreated_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &config()).unwrap();
    every_kind(&w);
    let mut seg = open_checking_every_read(&path);
    let mut h = seg.family_handle("disk.read_bytes").unwrap();
    let mut out = FamilyValues::default();
    seg.read_family(&mut h, &mut out).unwrap();
    drop(w);
    let _w = Writer::create(&path, &config()).unwrap();
    every_kind(&_w);
    // The next look maps the new segment (another epoch).
    seg.refresh().unwrap();
    assert!(matches!(
        seg.read_family(&mut h, &mut out),
        Err(Error::Abi(perfabi::Error::UnknownInstance))
    ));
    let mut h = seg.family_handle("disk.read_bytes").unwrap();
    seg.read_family(&mut h, &mut out).unwrap();
    assert_eq!(out.len(), 2);
}

/// Under two threads observing a histogram at full speed and a third
/// adding and deleting instances of the same family, every handle read is
/// consistent: per CPU, count equals the sum of the buckets and the sum
/// what those buckets' values add up to; a churned instance shows only its
/// own values. The reads go on past their count until the churn was seen
/// (more than 10 generations) and the observers' counts too, up to a
/// minute: on busy CPUs the reader can finish its count before the churn
/// thread has run.
#[test]
fn handle_reads_are_never_torn_under_a_full_speed_writer() {
    let n: u64 = std::env::var("PERFABI_HANDLE_READS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Arc::new(Writer::create(&path, &config()).unwrap());
    let fam = w
        .add_family(&FamilySpec::histogram(
            "rpc.latency",
            "RPC latency",
            "method",
            Unit::US,
            Buckets::Explicit(vec![10, 1000]),
        ))
        .unwrap();
    let hot = w.add_member(fam, "get", &[]).unwrap();
    let values = [7u64, 500, 70_000]; // one per bucket
    let stop = Arc::new(AtomicBool::new(false));
    let observed = Arc::new(AtomicU64::new(0));
    let mut threads: Vec<_> = (0..2)
        .map(|t| {
            let (w, m, stop, observed) = (w.clone(), hot.clone(), stop.clone(), observed.clone());
            thread::spawn(move || {
                let mut k = t;
                while !stop.load(Ordering::Relaxed) {
                    w.observe(&m, values[k % 3]).unwrap();
                    k += 1;
                    observed.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    {
        // Churn: instances put / del come and go, each observing its own
        // registration id's bucket once (bucket 2, value = 1000 + reg_id).
        let (w, stop) = (w.clone(), stop.clone());
        threads.push(thread::spawn(move || {
            let mut k = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let m = w.add_member(fam, &format!("m{}", k % 8), &[]).unwrap();
                w.observe(&m, 1000 + m.reg_id()).unwrap();
                thread::yield_now();
                w.del_member(&m).unwrap();
                k += 1;
            }
        }));
    }
    let mut seg = Segment::open(&path).unwrap();
    let mut h = seg.family_handle("rpc.latency").unwrap();
    let mut out = FamilyValues::default();
    let (mut reads, mut gens, mut last, mut max_count) = (0u64, 0u64, 0u64, 0u64);
    let until = Deadline::witness();
    while reads < n || ((gens <= 10 || max_count == 0) && !until.passed()) {
        let g = match seg.read_family(&mut h, &mut out) {
            Ok(g) => g,
            Err(e @ Error::Busy(_)) => panic!("busy for the whole timeout: {e}"),
            Err(e) => panic!("{e}"),
        };
        reads += 1;
        if g != last {
            gens += 1;
            last = g;
        }
        let f = h.family();
        assert_eq!(out.len(), f.members.len());
        for (k, m) in f.members.iter().enumerate() {
            for cpu in 0..out.nr_cpus() {
                let hist = Histogram::from_words(out.words(k, cpu));
                assert!(hist.consistent(), "{} on cpu {cpu}: {hist:?}", m.instance);
                if m.instance == "get" {
                    let sum: u64 = hist.buckets.iter().zip(values).map(|(b, v)| b * v).sum();
                    assert_eq!(sum, hist.sum, "torn: {hist:?}");
                    max_count = max_count.max(hist.count);
                } else {
                    // 0 or 1 observation, of its own registration id.
                    assert!(hist.count <= 1, "{hist:?}");
                    if hist.count == 1 {
                        assert_eq!(hist.sum, 1000 + m.reg_id, "another instance's values");
                        assert_eq!(hist.buckets, [0, 0, 1]);
                    }
                }
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    for t in threads {
        t.join().unwrap();
    }
    println!(
        "FAMILY-HANDLE {reads} handle reads over {gens} generations, {} observations: none torn, churned instances their own",
        observed.load(Ordering::Relaxed)
    );
    until.assert(
        max_count > 0 && gens > 10,
        format_args!("the churn and the observers seen: {gens} generations (more than 10 wanted), most observations on a CPU {max_count}, in {reads} reads"),
    );
}
