//! A `Directory` kept open between reads (`spec/PERFABI.md` §15) keeps
//! each segment's decoded tables and its merge names from read to read:
//! whatever changes between two reads (values, new families and members,
//! conflicting metadata, writers gone and new), its next read is exactly
//! what a directory opened afresh reads.

use std::path::Path;

use perfabi::{Buckets, FamilySpec, GaugeMode, Kind, Reading, Unit};
use perfabi_reader::directory::{Directory, DirectoryOptions, Scrape};
use perfabi_shm::writer::Writer;

mod support;
use support::directory::config;

/// A writer `w<k>`: a counter of two routes (one labelled), a histogram
/// and gauges of modes max and all, values scaled by `k`.
fn worker(dir: &Path, k: u64) -> Writer {
    let w = Writer::create_in(dir, &format!("w{k}"), &config(0)).unwrap();
    let req = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests",
            "route",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    let home = w.add_member(req, "home", &[("code", "200")]).unwrap();
    w.member_add(&home, (10 * k) as i64).unwrap();
    let api = w.add_member(req, "api", &[]).unwrap();
    w.member_add(&api, (3 * k) as i64).unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "app.latency",
            "Latency",
            "",
            Unit::NS,
            Buckets::Explicit(vec![10, 100]),
        ))
        .unwrap();
    let l = w.add_member(lat, "", &[]).unwrap();
    w.observe(&l, 50 * k).unwrap();
    for mode in [GaugeMode::Max, GaugeMode::All] {
        let f = w
            .add_family(&FamilySpec::gauge(
                &format!("app.pool_{}", mode.as_str()),
                "Pool",
                "",
                Unit::COUNT,
                mode,
            ))
            .unwrap();
        let g = w.add_member(f, "", &[]).unwrap();
        w.member_set(&g, (7 * k) as i64).unwrap();
    }
    w
}

/// `kept`'s read equals a fresh directory's read of the same files.
fn same_as_fresh(kept: &mut Directory, opts: &DirectoryOptions) -> Scrape {
    let a = kept.read().unwrap();
    let b = Directory::open(kept.path(), opts.clone())
        .unwrap()
        .read()
        .unwrap();
    assert_eq!(a.families, b.families);
    assert_eq!(a.problems, b.problems);
    assert_eq!(a.segments, b.segments);
    // Families by name, each one's series by instance, then labels.
    for w in a.families.windows(2) {
        assert!(w[0].family.name < w[1].family.name);
    }
    for f in &a.families {
        let keys: Vec<_> = f
            .family
            .members
            .iter()
            .map(|m| (&m.instance, &m.labels))
            .collect();
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "{keys:?}");
    }
    a
}

fn reading(s: &Scrape, family: &str, instance: &str) -> Reading {
    let f = s.families.iter().find(|f| f.family.name == family).unwrap();
    let k = f
        .family
        .members
        .iter()
        .position(|m| m.instance == instance)
        .unwrap();
    f.readings[k].clone()
}

fn changes_between_reads(opts: DirectoryOptions) {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir).unwrap();
    let w1 = worker(&dir, 1);
    let w2 = worker(&dir, 2);
    let mut d = Directory::open(&dir, opts.clone()).unwrap();
    let s = same_as_fresh(&mut d, &opts);
    if opts.writer_label.is_none() {
        assert_eq!(reading(&s, "app.requests", "api"), Reading::Unsigned(9));
    }

    // New values, a new member and a new family (the generation moves),
    // a family of one name with other metadata, a writer gone, a new one.
    let f = w1
        .add_family(&FamilySpec::new(
            "app.errors",
            "Errors",
            "",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    let e = w1.add_member(f, "", &[]).unwrap();
    w1.member_add(&e, 5).unwrap();
    let odd = w2
        .add_family(&FamilySpec::new(
            "app.errors",
            "Errors",
            "",
            Kind::Counter,
            Unit::BYTES,
        ))
        .unwrap();
    w2.add_member(odd, "", &[]).unwrap();
    let w3 = worker(&dir, 3);
    drop(w2);
    let s = same_as_fresh(&mut d, &opts);
    assert_eq!(s.segments, 3);
    assert!(
        s.problems
            .iter()
            .any(|p| p.family.as_deref() == Some("app.errors")),
        "{:?}",
        s.problems
    );
    if opts.writer_label.is_none() {
        // 3 + 6 (w2, closed: its counts kept) + 9.
        assert_eq!(reading(&s, "app.requests", "api"), Reading::Unsigned(18));
    }
    drop((w1, w3));
    same_as_fresh(&mut d, &opts);
}

#[test]
fn a_kept_directory_reads_what_a_fresh_one_reads() {
    changes_between_reads(DirectoryOptions::default());
}

#[test]
fn a_kept_directory_reads_what_a_fresh_one_reads_with_a_writer_label() {
    changes_between_reads(DirectoryOptions {
        writer_label: Some("worker".into()),
        ..DirectoryOptions::default()
    });
}
