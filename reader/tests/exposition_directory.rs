//! The exposition of a directory's merged read is the exposition of a
//! segment (one renderer, fed one shape): a directory of one writer renders
//! its families byte for byte as that writer's segment does, in both text
//! formats, followed by the reader's own gauges; a family named as one of
//! those is left out and said (`reserved-name`).

use perfabi::{Buckets, FamilySpec, GaugeMode, Kind, Semantics, Unit};
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_reader::exposition::{render_directory_into, render_into, Format};
use perfabi_reader::{Options, Segment};
use perfabi_shm::writer::{Config, Writer};

/// One writer of every kind, families and members added in name order
/// (a merged read lists them so; a snapshot by slot).
fn writer(dir: &std::path::Path) -> Writer {
    let w = Writer::create_in(
        dir,
        "one",
        &Config {
            max_instances: 128,
            max_families: 8,
            max_members: 16,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    let c = w
        .add("a_legacy.count", "bytes", Semantics::Counter)
        .unwrap();
    w.adjust(c, 4096).unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "app.latency_seconds",
            "Latency \"quoted\" and a \\ backslash",
            "op",
            Unit::NS,
            Buckets::Explicit(vec![1_000, 1_000_000]),
        ))
        .unwrap();
    for (op, v) in [("read", 500u64), ("write", 2_000_000)] {
        let m = w.add_member(lat, op, &[("disk", "sda")]).unwrap();
        w.observe(&m, v).unwrap();
    }
    let g = w
        .add_family(&FamilySpec::gauge(
            "app.level",
            "A level",
            "",
            Unit::COUNT,
            GaugeMode::Max,
        ))
        .unwrap();
    let m = w.add_member(g, "", &[]).unwrap();
    w.member_set(&m, -3).unwrap();
    let req = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests",
            "route",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    for (route, n) in [("api", 7), ("home", 11)] {
        let m = w.add_member(req, route, &[]).unwrap();
        w.member_add(&m, n).unwrap();
    }
    w
}

#[test]
fn a_directory_of_one_writer_renders_as_its_segment() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir).unwrap();
    let _w = writer(&dir);
    let file = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "perfabi"))
        .unwrap();
    let snap = Segment::open_with(&file, Options::default())
        .unwrap()
        .snapshot()
        .unwrap();
    let scrape = Directory::open(&dir, DirectoryOptions::default())
        .unwrap()
        .read()
        .unwrap();
    assert!(scrape.problems.is_empty(), "{:?}", scrape.problems);
    for format in [Format::OpenMetrics, Format::Prometheus] {
        let mut one = String::new();
        render_into(&mut one, &snap, false, format);
        let mut merged = String::new();
        assert!(render_directory_into(&mut merged, &scrape, format).is_empty());
        let one = one.strip_suffix("# EOF\n").unwrap_or(&one);
        assert!(
            merged.starts_with(one),
            "{format:?}: the directory's page begins with the segment's:\n{one}\n---\n{merged}"
        );
        let own = &merged[one.len()..];
        assert!(own.contains("perfabi_directory_segments 1\n"), "{own}");
        assert!(!own.contains("perfabi_directory_problems{"), "{own}");
        assert_eq!(own.ends_with("# EOF\n"), format == Format::OpenMetrics);
    }
}

#[test]
fn a_family_named_as_the_readers_own_is_left_out_and_said() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir).unwrap();
    let w = writer(&dir);
    let f = w
        .add_family(&FamilySpec::new(
            "directory.problems",
            "Mine",
            "",
            Kind::Gauge,
            Unit::COUNT,
        ))
        .unwrap();
    w.add_member(f, "", &[]).unwrap();
    let scrape = Directory::open(&dir, DirectoryOptions::default())
        .unwrap()
        .read()
        .unwrap();
    let mut page = String::new();
    let left_out = render_directory_into(&mut page, &scrape, Format::OpenMetrics);
    assert_eq!(left_out.len(), 1, "{left_out:?}");
    assert_eq!(left_out[0].code, "reserved-name");
    assert_eq!(left_out[0].family.as_deref(), Some("directory.problems"));
    assert_eq!(
        page.matches("# TYPE perfabi_directory_problems ").count(),
        1,
        "{page}"
    );
    assert!(!page.contains("Mine"), "{page}");
    assert!(
        page.contains("perfabi_directory_problems{code=\"reserved-name\"} 1\n"),
        "{page}"
    );
    assert!(page.contains("perfabi_app_requests_total{route=\"home\"} 11\n"));
}
