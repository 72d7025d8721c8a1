//! A directory of segments read as one (`spec/PERFABI.md` §15): merges of
//! every kind, conflicting metadata refused naming both files while the
//! rest is served, and hostile files that spoil only themselves.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use perfabi::{Buckets, FamilySpec, GaugeMode, Kind, Reading, Unit};
use perfabi_reader::directory::{Directory, DirectoryOptions, Scrape};
use perfabi_shm::writer::Writer;

mod support;
use support::directory::config;

/// A writer `w<k>` of one of each kind in `dir`, with values scaled by `k`
/// (the writers of one test share a pid: their names tell them apart).
fn worker(dir: &Path, k: u64) -> Writer {
    let w = Writer::create_in(dir, &format!("w{k}"), &config(64)).unwrap();
    let req = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests served",
            "route",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    for (route, n) in [("home", 10), ("api", 3)] {
        let m = w.add_member(req, route, &[]).unwrap();
        w.member_add(&m, (n * k) as i64).unwrap();
    }
    let lat = w
        .add_family(&FamilySpec::histogram(
            "app.latency",
            "Request latency",
            "",
            Unit::NS,
            Buckets::Explicit(vec![10, 100]),
        ))
        .unwrap();
    let l = w.add_member(lat, "", &[]).unwrap();
    for v in [5, 50, 500] {
        for _ in 0..k {
            w.observe(&l, v).unwrap();
        }
    }
    let peak = w
        .add_family(&FamilySpec::new(
            "app.queue_peak",
            "Longest queue",
            "",
            Kind::Peak,
            Unit::COUNT,
        ))
        .unwrap();
    let p = w.add_member(peak, "", &[]).unwrap();
    w.peak(&p, 100 * k).unwrap();
    for mode in [
        GaugeMode::Sum,
        GaugeMode::Max,
        GaugeMode::Min,
        GaugeMode::All,
    ] {
        let f = w
            .add_family(&FamilySpec::gauge(
                &format!("app.pool_{}", mode.as_str()),
                "Connections in use",
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

fn values(s: &Scrape) -> BTreeMap<String, Vec<(String, Reading)>> {
    s.families
        .iter()
        .map(|f| {
            let v = f
                .family
                .members
                .iter()
                .zip(&f.readings)
                .map(|(m, r)| {
                    let labels: Vec<String> =
                        m.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    (format!("{}{:?}", m.instance, labels), r.clone())
                })
                .collect();
            (f.family.name.clone(), v)
        })
        .collect()
}

fn one(s: &Scrape, family: &str) -> Reading {
    let v = &values(s)[family];
    assert_eq!(v.len(), 1, "{family}: {v:?}");
    v[0].1.clone()
}

#[test]
fn every_kind_merges_and_a_closed_writer_keeps_its_counts_but_not_its_gauges() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let a = worker(&dir, 1);
    let b = worker(&dir, 2);
    let c = worker(&dir, 4);
    let mut d = Directory::open(&dir, DirectoryOptions::default()).unwrap();
    let s = d.read().unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(s.segments, 3);
    let v = values(&s);
    assert_eq!(
        v["app.requests"],
        vec![
            ("api[]".to_string(), Reading::Unsigned(3 * 7)),
            ("home[]".to_string(), Reading::Unsigned(10 * 7)),
        ]
    );
    match one(&s, "app.latency") {
        Reading::Histogram(h) => {
            assert_eq!((h.count, h.sum, h.buckets), (21, 555 * 7, vec![7, 7, 7]))
        }
        r => panic!("{r:?}"),
    }
    assert_eq!(one(&s, "app.queue_peak"), Reading::Unsigned(400));
    assert_eq!(one(&s, "app.pool_sum"), Reading::Unsigned(49));
    assert_eq!(one(&s, "app.pool_max"), Reading::Unsigned(28));
    assert_eq!(one(&s, "app.pool_min"), Reading::Unsigned(7));
    let all = &v["app.pool_all"];
    assert_eq!(all.len(), 3, "one series per writer: {all:?}");
    let mut got: Vec<Reading> = all.iter().map(|(_, r)| r.clone()).collect();
    got.sort_by_key(|r| format!("{r:?}"));
    assert_eq!(
        got,
        vec![
            Reading::Unsigned(14),
            Reading::Unsigned(28),
            Reading::Unsigned(7)
        ]
    );
    let pid = std::process::id();
    for k in [1, 2, 4] {
        assert!(all
            .iter()
            .any(|(l, _)| l.contains(&format!("writer=w{k}.{pid}"))));
    }

    // The largest writer closes: its counts stay, its gauges go.
    c.close();
    let s = d.read().unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(
        values(&s)["app.requests"][1].1,
        Reading::Unsigned(10 * 7),
        "a closed writer's counts are kept"
    );
    assert_eq!(one(&s, "app.queue_peak"), Reading::Unsigned(400));
    assert_eq!(one(&s, "app.pool_sum"), Reading::Unsigned(21));
    assert_eq!(one(&s, "app.pool_max"), Reading::Unsigned(14));
    assert_eq!(values(&s)["app.pool_all"].len(), 2);
    drop((a, b));
}

#[test]
fn a_writer_label_keeps_writers_apart() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let _a = worker(&dir, 1);
    let _b = worker(&dir, 2);
    let opts = DirectoryOptions {
        writer_label: Some("worker".into()),
        ..DirectoryOptions::default()
    };
    let s = Directory::open(&dir, opts).unwrap().read().unwrap();
    let v = values(&s);
    assert_eq!(v["app.requests"].len(), 4, "{:?}", v["app.requests"]);
    let pid = std::process::id();
    for (k, route, n) in [
        (1, "home", 10),
        (1, "api", 3),
        (2, "home", 20),
        (2, "api", 6),
    ] {
        let key = format!("{route}[\"worker=w{k}.{pid}\"]");
        assert!(
            v["app.requests"].contains(&(key.clone(), Reading::Unsigned(n))),
            "{key}: {v:?}"
        );
    }
}

#[test]
fn conflicting_metadata_refuses_that_family_alone_naming_both_files() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let a = worker(&dir, 1);
    let b = Writer::create_in(&dir, "other", &config(64)).unwrap();
    let f = b
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests served",
            "route",
            Kind::Counter,
            Unit::BYTES,
        ))
        .unwrap();
    let m = b.add_member(f, "home", &[]).unwrap();
    b.member_add(&m, 5).unwrap();
    let s = Directory::open(&dir, DirectoryOptions::default())
        .unwrap()
        .read()
        .unwrap();
    assert_eq!(s.problems.len(), 1, "{:?}", s.problems);
    let p = &s.problems[0];
    println!("refused: {p}");
    assert_eq!(p.code, "family-conflict");
    assert_eq!(p.family.as_deref(), Some("app.requests"));
    for w in [&a, &b] {
        let name = w.path().unwrap().file_name().unwrap().to_str().unwrap();
        assert!(p.message.contains(name), "{p} names {name}");
    }
    assert!(p.message.contains("unit"), "{p}");
    let v = values(&s);
    assert!(!v.contains_key("app.requests"));
    assert_eq!(
        one(&s, "app.pool_sum"),
        Reading::Unsigned(7),
        "the rest served"
    );
}

#[test]
fn hostile_files_spoil_only_themselves() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let good = worker(&dir, 1);
    let good_path = good.path().unwrap().to_path_buf();
    let bytes = std::fs::read(&good_path).unwrap();
    let named = |n: &str| dir.join(format!("{n}.1.00000000000000ff.perfabi"));
    // A symbolic link to the good segment.
    std::os::unix::fs::symlink(&good_path, named("link")).unwrap();
    // A FIFO (would block an open without O_NONBLOCK).
    rustix::fs::mknodat(
        rustix::fs::CWD,
        named("fifo"),
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    // A truncated copy.
    std::fs::write(named("short"), &bytes[..bytes.len() / 2]).unwrap();
    // A copy with a hole where its per-CPU blocks are.
    {
        use std::os::unix::fs::FileExt;
        let f = std::fs::File::create(named("holed")).unwrap();
        f.write_all_at(&bytes[..4096], 0).unwrap();
        f.set_len(bytes.len() as u64).unwrap();
    }
    // A copy writable by others.
    std::fs::write(named("open"), &bytes).unwrap();
    std::fs::set_permissions(named("open"), std::fs::Permissions::from_mode(0o666)).unwrap();
    // Another user's copy (needs root to make).
    let root = perfabi_test_harness::need_root(
        "hostile_files_spoil_only_themselves (another user's file)",
    );
    if root {
        std::fs::write(named("foreign"), &bytes).unwrap();
        std::os::unix::fs::chown(named("foreign"), Some(4242), Some(4242)).unwrap();
    }
    // Names that are not segments are not even looked at.
    std::fs::write(dir.join("notes.txt"), b"hello").unwrap();
    std::fs::write(dir.join(".worker.1.00000000000000ff.perfabi.tmp"), b"x").unwrap();

    let s = Directory::open(&dir, DirectoryOptions::default())
        .unwrap()
        .read()
        .unwrap();
    let mut codes: Vec<(String, &str)> = s
        .problems
        .iter()
        .map(|p| {
            println!("{} {p}", p.code);
            let name = p.file.file_name().unwrap().to_string_lossy();
            assert!(p.message.contains(&*name), "{p} names its file");
            (
                p.file.file_name().unwrap().to_string_lossy()[..4].to_string(),
                p.code,
            )
        })
        .collect();
    codes.sort();
    let mut want = vec![
        ("fifo".to_string(), "not-a-segment-file"),
        ("hole".to_string(), "sparse"),
        ("link".to_string(), "symlink"),
        ("open".to_string(), "writable-by-others"),
        ("shor".to_string(), "truncated"),
    ];
    if root {
        want.push(("fore".to_string(), "untrusted-owner"));
        want.sort();
    }
    assert_eq!(codes, want);
    assert_eq!(s.segments, 1);
    assert_eq!(one(&s, "app.pool_sum"), Reading::Unsigned(7));
}

#[test]
fn a_directory_others_can_replace_files_in_is_refused() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let _w = worker(&dir, 1);
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let e = Directory::open(&dir, DirectoryOptions::default())
        .err()
        .expect("refused");
    println!("{e}");
    assert_eq!(e.code(), "writable-by-others");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert_eq!(
        Directory::open(&dir, DirectoryOptions::default())
            .unwrap()
            .read()
            .unwrap()
            .segments,
        1
    );
}

/// The README's directory example (`reader/examples/read_directory.rs`,
/// shown verbatim in "Many programs, one reader") prints what the README
/// says it prints.
#[test]
fn the_readme_directory_example_prints_what_the_readme_says() {
    use perfabi_test_harness::{readme, workspace};
    readme::example("reader/examples/read_directory.rs");
    let (_, text) = readme::document_showing("reader/examples/read_directory.rs");
    let after = &text[text
        .find("<!-- example: reader/examples/read_directory.rs -->")
        .unwrap()..];
    let fence = "prints\n\n```text\n";
    let shown = &after[after.find(fence).unwrap() + fence.len()..];
    let shown = &shown[..shown.find("```").unwrap()];
    let example = workspace::profile_dir().join("examples/read_directory");
    assert!(
        example.exists(),
        "{} (cargo test builds examples)",
        example.display()
    );
    let top = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(&example)
        .arg(top.path().join("segs"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(String::from_utf8_lossy(&out.stdout), shown);
}
