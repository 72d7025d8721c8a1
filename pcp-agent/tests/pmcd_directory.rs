//! pmdaperfabi serving a directory of segments (`--directory`, issue 32
//! item 4) under a real private pmcd: writer processes (this test binary,
//! [`directory_writer`]) each write their own segment, and PCP's clients
//! read the merged values exactly, see problems, and keep instance ids as
//! writers are killed and started.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use perfabi::{Buckets, FamilySpec, GaugeMode, Kind, Unit};
use perfabi_shm::writer::{Config, Writer};
use support::*;

/// The directory, name and scale of a [`directory_writer`] process.
const WRITER_DIR: &str = "PERFABI_PCPDIR_WRITER_DIR";
const WRITER_NAME: &str = "PERFABI_PCPDIR_WRITER_NAME";
const WRITER_K: &str = "PERFABI_PCPDIR_WRITER_K";
/// `bytes` for an `app.mixed` in bytes (a conflict), else in counts.
const WRITER_MIXED: &str = "PERFABI_PCPDIR_WRITER_MIXED";

/// A writer process: a segment in a directory with values scaled by k;
/// prints `ready` once they are written, exits when its stdin ends (or a
/// SIGKILL comes).
struct WriterProcess {
    child: Child,
    /// `<name>.<pid>`, as the merge names the writer.
    name: String,
}

impl WriterProcess {
    fn start(dir: &Path, name: &str, k: u64, mixed: &str) -> Self {
        let mut child = Command::new(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "directory_writer", "--nocapture"])
            .env(WRITER_DIR, dir)
            .env(WRITER_NAME, name)
            .env(WRITER_K, k.to_string())
            .env(WRITER_MIXED, mixed)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while line != "ready\n" {
            line.clear();
            assert!(
                out.read_line(&mut line).unwrap() > 0,
                "writer {name} ended before it was ready"
            );
        }
        let pid = child.id();
        Self {
            child,
            name: format!("{name}.{pid}"),
        }
    }

    /// SIGKILL, and reaped: its pid no longer names a process.
    fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for WriterProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The writer process of [`WriterProcess`] (run by it, not by the suite).
#[test]
#[ignore = "helper: the writer process the directory tests start"]
fn directory_writer() {
    let var = |k: &str| std::env::var(k).unwrap();
    let k: u64 = var(WRITER_K).parse().unwrap();
    let config = Config {
        heartbeat_interval: Duration::from_secs(1),
        ..Config::default()
    };
    let w = Writer::create_in(var(WRITER_DIR), &var(WRITER_NAME), &config).unwrap();
    let jobs = w
        .add_family(&FamilySpec::new(
            "app.jobs",
            "Jobs done",
            "kind",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    for (kind, n) in [("build", 10), ("test", 3)] {
        let m = w.add_member(jobs, kind, &[]).unwrap();
        w.member_add(&m, (n * k) as i64).unwrap();
    }
    let busy = w
        .add_family(&FamilySpec::gauge(
            "app.busy",
            "Busy workers",
            "",
            Unit::COUNT,
            GaugeMode::Sum,
        ))
        .unwrap();
    let b = w.add_member(busy, "", &[]).unwrap();
    w.member_set(&b, k as i64).unwrap();
    let sizes = w
        .add_family(&FamilySpec::histogram(
            "app.sizes",
            "Sizes seen",
            "",
            Unit::BYTES,
            Buckets::Explicit(vec![10, 100]),
        ))
        .unwrap();
    let s = w.add_member(sizes, "", &[]).unwrap();
    for v in [5, 50, 500] {
        for _ in 0..k {
            w.observe(&s, v).unwrap();
        }
    }
    let queue = w
        .add_family(&FamilySpec::new(
            "app.queue",
            "Longest queue",
            "",
            Kind::Peak,
            Unit::COUNT,
        ))
        .unwrap();
    let q = w.add_member(queue, "", &[]).unwrap();
    w.peak(&q, 100 * k).unwrap();
    let unit = if var(WRITER_MIXED) == "bytes" {
        Unit::BYTES
    } else {
        Unit::COUNT
    };
    let mixed = w
        .add_family(&FamilySpec::new(
            "app.mixed",
            "A unit in dispute",
            "",
            Kind::Counter,
            unit,
        ))
        .unwrap();
    let m = w.add_member(mixed, "", &[]).unwrap();
    w.member_add(&m, 1).unwrap();
    println!("ready");
    std::io::stdout().flush().unwrap();
    let mut rest = String::new();
    let _ = std::io::stdin().read_line(&mut rest);
}

/// A private pmcd whose agent serves the directory `segs` (`--directory`,
/// and `extra` agent arguments).
fn pmcd(dir: &Path, segs: &Path, extra: &str) -> Pmcd {
    let source = format!("--directory {} {extra}", segs.display());
    Pmcd::start(&dir.join("pmcd"), Path::new(&source), &[])
}

/// `pminfo -f` of `names`, by metric: (instance id, instance name, value).
fn values_with_ids(pmcd: &Pmcd, names: &[&str]) -> Vec<(String, Option<i64>, String, String)> {
    let out = run(pmcd.client("pminfo").arg("-f").args(names));
    let text = stdout(&out);
    let mut rows = Vec::new();
    let mut metric = String::new();
    for line in text.lines() {
        if !line.starts_with(' ') && !line.is_empty() {
            metric = line.trim().to_string();
        } else if let Some(rest) = line.trim().strip_prefix("inst [") {
            // inst [3 or "build"] value 70
            let id = rest.split(' ').next().and_then(|i| i.parse().ok());
            let name = rest.split('"').nth(1).unwrap_or_default().to_string();
            let v = rest.rsplit_once("] value ").map_or("", |(_, v)| v);
            rows.push((metric.clone(), id, name, v.to_string()));
        } else if let Some(v) = line.trim().strip_prefix("value ") {
            rows.push((metric.clone(), None, String::new(), v.to_string()));
        }
    }
    rows
}

/// Family metric `name`'s values by instance name.
fn by_instance(pmcd: &Pmcd, name: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = pmcd
        .values(&[name])
        .remove(name)
        .unwrap_or_default()
        .into_iter()
        .map(|(i, v)| (i.unwrap_or_default(), v))
        .collect();
    v.sort();
    v
}

fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = v
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    v.sort();
    v
}

fn segs(top: &Path) -> PathBuf {
    let d = top.join("segs");
    std::fs::create_dir(&d).unwrap();
    d
}

/// Issue 32 item 4, PCP: three writer processes' segments, a fourth whose
/// `app.mixed` disagrees and a symbolic link named as a segment, served by
/// the agent under pmcd: pminfo and pmval read every kind merged exactly;
/// the conflict and the link are problems (a metric and the agent's log),
/// every other family is served; a writer killed with SIGKILL keeps its
/// counts and loses its gauge; a new one is added.
#[test]
fn pminfo_reads_a_directory_of_writer_processes_merged_exactly() {
    let top = tempfile::tempdir().unwrap();
    let segs = segs(top.path());
    let mut writers: Vec<WriterProcess> = [("w1", 1), ("w2", 2), ("w4", 4)]
        .into_iter()
        .map(|(n, k)| WriterProcess::start(&segs, n, k, "count"))
        .collect();
    writers.push(WriterProcess::start(&segs, "odd", 0, "bytes"));
    let link = segs.join("evil.1.0123456789abcdef.perfabi");
    std::os::unix::fs::symlink(top.path().join("elsewhere"), &link).unwrap();
    let pmcd = pmcd(top.path(), &segs, "");

    let v = pmcd.values(&[
        "perfabi.app.busy",
        "perfabi.app.sizes.count",
        "perfabi.app.sizes.sum",
        "perfabi.app.queue",
        "perfabi.segment.nr_segments",
        "perfabi.segment.nr_problems",
        "perfabi.segment.available",
    ]);
    let one = |m: &str| v[m].first().map(|(_, x)| x.clone()).unwrap_or_default();
    assert_eq!(one("perfabi.app.busy"), "7", "{v:?}");
    assert_eq!(one("perfabi.app.sizes.count"), "21");
    assert_eq!(one("perfabi.app.sizes.sum"), (555 * 7).to_string());
    assert_eq!(one("perfabi.app.queue"), "400");
    assert_eq!(one("perfabi.segment.nr_segments"), "4");
    assert_eq!(one("perfabi.segment.nr_problems"), "2");
    assert_eq!(one("perfabi.segment.available"), "1");
    assert_eq!(
        by_instance(&pmcd, "perfabi.app.jobs"),
        pairs(&[("build", "70"), ("test", "21")])
    );
    assert_eq!(
        by_instance(&pmcd, "perfabi.app.sizes.bucket"),
        pairs(&[("0-10", "7"), ("11-100", "7"), ("101-inf", "7")])
    );
    // The problems: a metric naming each, and one log line each.
    let problems = pmcd.value("perfabi.segment.problems").unwrap();
    assert!(
        problems.contains("evil.1.0123456789abcdef.perfabi"),
        "{problems}"
    );
    assert!(
        problems.contains("family app.mixed refused") && problems.contains("unit"),
        "{problems}"
    );
    let out = run(pmcd.client("pminfo").arg("perfabi.app"));
    assert!(
        !stdout(&out).contains("perfabi.app.mixed"),
        "{}",
        stdout(&out)
    );
    assert!(
        stdout(&out).contains("perfabi.app.jobs"),
        "{}",
        stdout(&out)
    );
    let log = pmcd.agent_log();
    assert_eq!(log.matches("left out of the merge:").count(), 2, "{log}");
    // Merged values have no per-CPU metrics.
    let out = run(pmcd.client("pminfo").arg("perfabi.percpu"));
    assert!(!stdout(&out).contains("app."), "{}", stdout(&out));
    // Help says how the value is merged.
    let out = run(pmcd.client("pminfo").arg("-T").arg("perfabi.app.busy"));
    assert!(
        stdout(&out).contains("over the live writers by the family's gauge mode, sum"),
        "{}",
        stdout(&out)
    );

    // w4 killed: its counts stay at every read, its gauge goes once the
    // agent's reader sees it dead (it looks at a writer once a second).
    writers[2].kill();
    eventually(60, "the killed writer's gauge gone", || {
        assert_eq!(
            by_instance(&pmcd, "perfabi.app.jobs"),
            pairs(&[("build", "70"), ("test", "21")])
        );
        pmcd.value("perfabi.app.busy").as_deref() == Some("3")
    });
    assert_eq!(pmcd.value("perfabi.app.queue").as_deref(), Some("400"));
    // A new writer joins.
    writers.push(WriterProcess::start(&segs, "w8", 8, "count"));
    eventually(60, "the new writer merged", || {
        by_instance(&pmcd, "perfabi.app.jobs") == pairs(&[("build", "150"), ("test", "45")])
    });
    let out = run(pmcd
        .client("pmval")
        .args(["-r", "-s", "1", "perfabi.app.queue"]));
    let text = stdout(&out);
    assert!(
        text.lines().any(|l| l.trim() == "800"),
        "pmval -r perfabi.app.queue:\n{text}"
    );
}

/// With `--writer-label`, each writer's series are instances of their own
/// (`<instance>::<name>.<pid>`, and `<name>.<pid>` for a family without
/// dimension): a killed writer's counter instances stay with their ids, a
/// new writer's get new ids, and no id changes hands.
#[test]
fn a_writer_label_names_each_writers_instances_and_their_ids_hold() {
    let top = tempfile::tempdir().unwrap();
    let segs = segs(top.path());
    let mut a = WriterProcess::start(&segs, "w1", 1, "count");
    let b = WriterProcess::start(&segs, "w2", 2, "count");
    let pmcd = pmcd(top.path(), &segs, "--writer-label worker");
    let names = ["perfabi.app.jobs", "perfabi.app.busy"];
    let before = values_with_ids(&pmcd, &names);
    let expect = |rows: &[(String, Option<i64>, String, String)], m: &str, inst: &str| {
        rows.iter()
            .find(|r| r.0 == m && r.2 == inst)
            .map(|r| (r.1.unwrap(), r.3.clone()))
            .unwrap_or_else(|| panic!("{m} [{inst}] in {rows:#?}"))
    };
    let (an, bn) = (a.name.clone(), b.name.clone());
    let build_a = expect(&before, "perfabi.app.jobs", &format!("build::{an}"));
    let build_b = expect(&before, "perfabi.app.jobs", &format!("build::{bn}"));
    assert_eq!((build_a.1.as_str(), build_b.1.as_str()), ("10", "20"));
    assert_eq!(
        expect(&before, "perfabi.app.jobs", &format!("test::{bn}")).1,
        "6"
    );
    assert_eq!(expect(&before, "perfabi.app.busy", &an).1, "1");
    assert_eq!(expect(&before, "perfabi.app.busy", &bn).1, "2");
    let out = run(pmcd.client("pminfo").arg("-l").arg("perfabi.app.jobs"));
    assert!(
        stdout(&out).contains(&format!("\"worker\":\"{bn}\"")),
        "{}",
        stdout(&out)
    );

    a.kill();
    // w3's start folds the dead w1 into the directory's kept counts
    // (spec §15.5), unless a reader held the lock: its series are then
    // the kept file's, `build::kept`, or still its own.
    let c = WriterProcess::start(&segs, "w3", 3, "count");
    let cn = c.name.clone();
    let mut after = Vec::new();
    eventually(60, "w1's gauge gone and w3 merged", || {
        after = values_with_ids(&pmcd, &names);
        after.iter().any(|r| r.2 == format!("build::{cn}"))
            && !after.iter().any(|r| r.0 == "perfabi.app.busy" && r.2 == an)
    });
    // The same names keep their ids and values; the dead writer's counts
    // stay.
    let own = after
        .iter()
        .find(|r| r.0 == "perfabi.app.jobs" && r.2 == format!("build::{an}"));
    match own {
        Some(r) => assert_eq!((r.1.unwrap(), r.3.clone()), build_a),
        None => assert_eq!(expect(&after, "perfabi.app.jobs", "build::kept").1, "10"),
    }
    assert_eq!(
        expect(&after, "perfabi.app.jobs", &format!("build::{bn}")),
        build_b
    );
    let build_c = expect(&after, "perfabi.app.jobs", &format!("build::{cn}"));
    assert_eq!(build_c.1, "30");
    let ids_before: Vec<i64> = before.iter().filter_map(|r| r.1).collect();
    assert!(
        !ids_before.contains(&build_c.0),
        "a new writer's instance got an id given before: {after:#?}"
    );
    drop(b);
}
