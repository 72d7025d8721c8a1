//! perfabi-cat on a directory of segments (`spec/PERFABI.md` §15): the
//! table, `--json` and `--openmetrics` of the merged families exact, a
//! conflicting family and a hostile file left out and said while the rest
//! is printed, and `--watch` whose rates over merged counters never go
//! negative when a writer's counts leave the merge or a dead writer is
//! folded.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;

use perfabi::{Buckets, FamilySpec, Kind, Unit};
use perfabi_shm::writer::{Config, MemberId, Writer};
use perfabi_test_harness::deadline::Deadline;
use perfabi_test_harness::KillOnDrop;

fn cat(args: &[&std::ffi::OsStr]) -> Output {
    Command::new(perfabi_test_harness::workspace::perfabi_cat())
        .args(args)
        .output()
        .expect("run perfabi-cat")
}

fn config() -> Config {
    Config {
        max_instances: 64,
        max_families: 8,
        max_members: 16,
        damon_capacity: 0,
        ..Config::default()
    }
}

/// A writer `name` in `dir` with `n` requests on route `home` and `n`
/// observations of 50 ns; `unit` the requests family's unit.
fn writer(dir: &Path, name: &str, n: u64, unit: Unit) -> (Writer, MemberId) {
    let w = Writer::create_in(dir, name, &config()).unwrap();
    let req = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests served",
            "route",
            Kind::Counter,
            unit,
        ))
        .unwrap();
    let m = w.add_member(req, "home", &[]).unwrap();
    w.member_add(&m, n as i64).unwrap();
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
    for _ in 0..n {
        w.observe(&l, 50).unwrap();
    }
    (w, m)
}

/// A fresh directory for writers, in a temporary one.
fn directory() -> (tempfile::TempDir, PathBuf) {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir).unwrap();
    (top, dir)
}

/// The segment file of writer `name` in `dir`.
fn file_of(dir: &Path, name: &str) -> PathBuf {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("{name}."))
        })
        .unwrap()
}

#[test]
fn table_json_and_openmetrics_merge_exactly_and_say_what_was_left_out() {
    let (_top, dir) = directory();
    let _a = writer(&dir, "a", 100, Unit::COUNT);
    let _b = writer(&dir, "b", 23, Unit::COUNT);
    std::fs::write(
        dir.join("evil.4242.00000000000000aa.perfabi"),
        [0x5au8; 8192],
    )
    .unwrap();
    let d = dir.as_os_str();

    let out = cat(&[d, "--json".as_ref()]);
    assert!(out.status.success(), "{out:?}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["directory"]["segments"], 2, "{doc:#}");
    let req = &doc["families"]["app.requests"];
    assert_eq!(req["writers"], 2);
    assert_eq!(req["series"][0]["instance"], "home");
    assert_eq!(req["series"][0]["total"], 123, "{doc:#}");
    let lat = &doc["families"]["app.latency"]["series"][0]["total"];
    assert_eq!(lat["count"], 123);
    assert_eq!(lat["sum"], 123 * 50);
    assert_eq!(lat["buckets"], serde_json::json!([0, 123, 0]));
    let problems = doc["directory"]["problems"].as_array().unwrap();
    assert_eq!(problems.len(), 1, "{doc:#}");
    assert_eq!(problems[0]["code"], "bad-magic");
    assert!(problems[0]["file"]
        .as_str()
        .unwrap()
        .ends_with("evil.4242.00000000000000aa.perfabi"));

    let out = cat(&[d, "--openmetrics".as_ref()]);
    assert!(out.status.success());
    let page = String::from_utf8(out.stdout).unwrap();
    assert!(
        page.contains("perfabi_app_requests_total{route=\"home\"} 123\n"),
        "{page}"
    );
    assert!(
        page.contains("perfabi_app_latency_bucket{le=\"100\"} 123\n"),
        "{page}"
    );
    assert!(page.contains("perfabi_directory_segments 2\n"), "{page}");
    assert!(
        page.contains("perfabi_directory_problems{code=\"bad-magic\"} 1\n"),
        "{page}"
    );
    assert!(page.ends_with("# EOF\n"));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("left out:") && err.contains("evil.4242"),
        "{err}"
    );

    // Kept apart by writer: a series each, their sum the merged one.
    let out = cat(&[d, "--json".as_ref(), "--writer-label=who".as_ref()]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let series = doc["families"]["app.requests"]["series"]
        .as_array()
        .unwrap();
    let mut by_writer: Vec<(String, u64)> = series
        .iter()
        .map(|s| {
            let who = s["labels"]["who"].as_str().unwrap();
            (
                who.split('.').next().unwrap().to_string(),
                s["total"].as_u64().unwrap(),
            )
        })
        .collect();
    by_writer.sort();
    assert_eq!(by_writer, [("a".to_string(), 100), ("b".to_string(), 23)]);

    // A conflicting family: refused, naming both files; the rest printed.
    let _c = writer(&dir, "c", 7, Unit::BYTES);
    let out = cat(&[d]);
    assert!(out.status.success());
    let table = String::from_utf8(out.stdout).unwrap();
    assert!(!table.contains("app.requests"), "{table}");
    assert!(table.contains("app.latency"), "{table}");
    assert!(table.contains("130"), "130 observations merged:\n{table}");
    let err = String::from_utf8(out.stderr).unwrap();
    let conflict: Vec<&str> = err.lines().filter(|l| l.contains("app.requests")).collect();
    assert_eq!(conflict.len(), 1, "{err}");
    for name in ["a", "c"] {
        let f = file_of(&dir, name);
        assert!(
            conflict[0].contains(f.file_name().unwrap().to_str().unwrap()),
            "{conflict:?} names {}",
            f.display()
        );
    }
}

/// Options that need one segment are refused on a directory (exit 2),
/// and options for a directory on a segment file.
#[test]
fn options_that_do_not_apply_are_refused() {
    let (_top, dir) = directory();
    let _a = writer(&dir, "a", 1, Unit::COUNT);
    for flag in ["--cpu", "--info", "--damon"] {
        let out = cat(&[dir.as_os_str(), flag.as_ref()]);
        assert_eq!(out.status.code(), Some(2), "{flag}: {out:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("does not apply to a directory"));
    }
    let file = file_of(&dir, "a");
    let out = cat(&[file.as_os_str(), "--writer-label".as_ref()]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
}

/// `--watch --json` over a directory, a line per interval.
struct Watch {
    _child: KillOnDrop,
    lines: mpsc::Receiver<serde_json::Value>,
}

impl Watch {
    fn start(dir: &Path) -> Watch {
        let mut child = Command::new(perfabi_test_harness::workspace::perfabi_cat())
            .arg(dir)
            .args(["--watch", "0.05", "--json"])
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let out = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for l in BufReader::new(out).lines().map_while(Result::ok) {
                let _ = tx.send(serde_json::from_str(&l).unwrap());
            }
        });
        Watch {
            _child: KillOnDrop(child),
            lines,
        }
    }

    /// Lines until one `ok` says is the one (each checked by `every`
    /// first), within the witness limit.
    fn until(
        &self,
        what: &str,
        every: &impl Fn(&serde_json::Value),
        ok: impl Fn(&serde_json::Value) -> bool,
    ) -> serde_json::Value {
        let d = Deadline::witness();
        loop {
            let left = perfabi_test_harness::deadline::WITNESS_LIMIT.saturating_sub(d.elapsed());
            let Ok(line) = self.lines.recv_timeout(left) else {
                d.fail(what);
            };
            every(&line);
            if ok(&line) {
                return line;
            }
        }
    }
}

#[test]
fn watch_rates_over_a_directory_never_go_negative() {
    let (_top, dir) = directory();
    let (a, home) = writer(&dir, "a", 10, Unit::COUNT);
    let b = writer(&dir, "b", 1000, Unit::COUNT);
    let w = Watch::start(&dir);
    let rate = |l: &serde_json::Value| l["rates"]["app.requests"]["home"].clone();
    let never_negative = |l: &serde_json::Value| {
        for v in [rate(l), l["rates"]["app.latency"]["per_s"].clone()] {
            if let Some(x) = v.as_f64() {
                assert!(x >= 0.0, "a negative rate: {l}");
            }
        }
    };
    // Counting shows (after a first interval, so that it falls in one).
    w.until("a first interval", &never_negative, |l| l["segments"] == 2);
    a.member_add(&home, 500).unwrap();
    w.until("a positive rate", &never_negative, |l| {
        l["segments"] == 2 && rate(l).as_f64().is_some_and(|x| x > 0.0)
    });
    // b's counts leave the merge (its file removed, not folded): the
    // merged total falls by 1,000, an interval without a rate.
    std::fs::remove_file(file_of(&dir, "b")).unwrap();
    w.until("the fall shown as no rate", &never_negative, |l| {
        l["segments"] == 1 && rate(l).is_null()
    });
    // Then rates again.
    w.until("an interval after the fall", &never_negative, |_| true);
    a.member_add(&home, 5).unwrap();
    w.until("a rate again", &never_negative, |l| {
        rate(l).as_f64().is_some_and(|x| x > 0.0)
    });
    drop(b);
    // A dead writer (closed) folded into the kept file by the next one:
    // the total stays, no fall.
    a.close();
    drop(home);
    let c = writer(&dir, "c", 1, Unit::COUNT);
    assert!(dir.join(perfabi_shm::directory::KEPT_NAME).exists());
    let line = w.until("the fold seen", &never_negative, |l| {
        l["segments"] == 1 && !rate(l).is_null()
    });
    assert!(rate(&line).as_f64().unwrap() >= 0.0);
    drop(c);
}

/// With no path, perfabi-cat finds the default segment directory
/// (`$PERFABI_DIR`) when no kernel or exportd segment is there to be found
/// first, and reads it as one; where one is, that one wins.
#[test]
fn the_default_directory_is_found_after_the_kernels_and_exportds() {
    let (_top, dir) = directory();
    let _a = writer(&dir, "a", 9, Unit::COUNT);
    let out = Command::new(perfabi_test_harness::workspace::perfabi_cat())
        .arg("--json")
        .env_remove("PERFABI_SEGMENT")
        .env("PERFABI_DIR", &dir)
        .output()
        .unwrap();
    let earlier = [
        "/dev/perfabi",
        perfabi_reader::DEFAULT_BPF_PIN,
        "/dev/shm/perfabi.seg",
    ]
    .into_iter()
    .find(|p| Path::new(p).exists());
    match earlier {
        None => {
            assert!(out.status.success(), "{out:?}");
            let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            assert_eq!(doc["directory"]["path"], dir.to_str().unwrap());
            assert_eq!(doc["families"]["app.requests"]["series"][0]["total"], 9);
        }
        Some(p) => {
            // Not the directory: the kernel's or exportd's segment.
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(!text.contains("\"directory\""), "{p} exists: {text}");
        }
    }
}
