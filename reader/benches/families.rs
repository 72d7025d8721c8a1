//! Reading one metric family through a [`FamilyHandle`] against a full
//! snapshot of the segment, as a consumer that wants one family would.
//!
//! The segment has 16 per-CPU blocks (`Config::nr_cpus`: the writer uses
//! the lock method then, which does not matter to a reader), a family of 64
//! counter instances, and 960 more value slots (1.0 counters and a family
//! of histograms). The family's values are at the start of the counter
//! arrays (`*_first`) or at their end (`*_last`): a handle read copies the
//! counters up to the family's last value slot on every CPU (the core's
//! per-CPU copy starts at slot 0), so its cost depends on where the family
//! is; a snapshot copies every used slot.
//!
//! `cargo bench -p perfabi-reader --bench families`, then
//! `python3 perfabi/shm/benches/ratios.py`.

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use perfabi::{Buckets, FamilySpec, Kind, Semantics, Unit};
use perfabi_reader::{FamilyValues, Segment, Snapshot};
use perfabi_shm::writer::{Config, Writer};

const CPUS: u32 = 16;
const INSTANCES: u32 = 64;

/// A segment at `path` with the 64-instance family `net.dev.rx_bytes`
/// placed first or last among 1,024 used value slots.
fn segment(path: &std::path::Path, family_first: bool) -> Writer {
    let w = Writer::create(
        path,
        &Config {
            nr_cpus: Some(CPUS),
            max_instances: 1024,
            max_families: 8,
            max_members: 256,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let family = |w: &Writer| {
        let f = w
            .add_family(&FamilySpec::new(
                "net.dev.rx_bytes",
                "Bytes received",
                "interface",
                Kind::Counter,
                Unit::BYTES,
            ))
            .unwrap();
        for i in 0..INSTANCES {
            let m = w.add_member(f, &format!("eth{i}"), &[]).unwrap();
            w.member_add(&m, i64::from(i) * 1000).unwrap();
        }
    };
    let others = |w: &Writer| {
        // 32 histograms of 2 + 8 words, and 640 1.0 counters: 960 slots.
        let h = w
            .add_family(&FamilySpec::histogram(
                "rpc.latency",
                "RPC latency",
                "method",
                Unit::NS,
                Buckets::Log2 { first: 10, n: 8 },
            ))
            .unwrap();
        for i in 0..32 {
            let m = w.add_member(h, &format!("m{i}"), &[]).unwrap();
            w.observe(&m, 5000).unwrap();
        }
        for i in 0..640 {
            let c = w.add(&format!("c{i}"), "", Semantics::Counter).unwrap();
            w.adjust(c, i).unwrap();
        }
    };
    if family_first {
        family(&w);
        others(&w);
    } else {
        others(&w);
        family(&w);
    }
    assert_eq!(w.snapshot().unwrap().slots, 1024);
    w
}

fn family_read(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut g = c.benchmark_group("family_read");
    g.throughput(Throughput::Elements(u64::from(INSTANCES * CPUS)));
    for (place, first) in [("first", true), ("last", false)] {
        let path = dir.path().join(place);
        let _w = segment(&path, first);
        let mut seg = Segment::open(&path).unwrap();
        assert_eq!(seg.nr_cpus(), CPUS as usize);
        let mut h = seg.family_handle("net.dev.rx_bytes").unwrap();
        let mut out = FamilyValues::default();
        seg.read_family(&mut h, &mut out).unwrap();
        assert_eq!(out.len(), INSTANCES as usize);
        g.bench_function(format!("handle_{INSTANCES}x{CPUS}_{place}"), |b| {
            b.iter(|| {
                seg.read_family(black_box(&mut h), black_box(&mut out))
                    .unwrap()
            })
        });
        let mut snap = Snapshot::default();
        seg.snapshot_into(&mut snap).unwrap();
        g.bench_function(format!("snapshot_{INSTANCES}x{CPUS}_{place}"), |b| {
            b.iter(|| seg.snapshot_into(black_box(&mut snap)).unwrap())
        });
        // The consumer's whole job: one family's totals, both ways.
        g.bench_function(format!("handle_totals_{INSTANCES}x{CPUS}_{place}"), |b| {
            b.iter(|| {
                seg.read_family(&mut h, &mut out).unwrap();
                let f = h.family();
                (0..out.len())
                    .map(|k| out.reading(f, k))
                    .filter(|r| matches!(r, perfabi::Reading::Unsigned(v) if *v > 0))
                    .count()
            })
        });
        g.bench_function(format!("snapshot_totals_{INSTANCES}x{CPUS}_{place}"), |b| {
            b.iter(|| {
                seg.snapshot_into(&mut snap).unwrap();
                let f = snap.family("net.dev.rx_bytes").unwrap();
                f.members
                    .iter()
                    .map(|m| snap.reading(f, m))
                    .filter(|r| matches!(r, perfabi::Reading::Unsigned(v) if *v > 0))
                    .count()
            })
        });
    }
    g.finish();
}

criterion_group!(benches, family_read);
criterion_main!(benches);
