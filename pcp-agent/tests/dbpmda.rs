//! The agent alone, driven by dbpmda (no pmcd), as PCP's own PMDAs are
//! tested; and its shipped help file. dbpmda, the agent and newhelp run in
//! the test folder's private PCP environment (`support::private_env`): the
//! agent's saved state goes to its `PCP_VAR_DIR`, never the machine's.

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use perfabi::damon::Aggregation;
use perfabi::Semantics;
use perfabi_shm::writer::{Config, Writer};
use support::*;

fn dbpmda(dir: &Path, segment: &Path, commands: &str) -> String {
    dbpmda_serving(dir, &format!("-s {}", segment.display()), commands)
}

/// dbpmda running `commands` against the agent serving `source` (its
/// arguments: `-s PATH`, `--directory DIR`...).
fn dbpmda_serving(dir: &Path, source: &str, commands: &str) -> String {
    let pmns = dir.join("pmns");
    std::fs::write(&pmns, "root {\n    perfabi 502:*:*\n}\n").unwrap();
    let log = dir.join("agent.log");
    let script = format!(
        "open pipe {AGENT} -d 502 -l {} {source}\ngetdesc on\n{commands}",
        log.display(),
    );
    let mut child = tool("dbpmda", dir)
        .arg("-n")
        .arg(&pmns)
        .arg("-ie")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(script.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    println!("{text}");
    text
}

#[test]
fn dbpmda_fetches_values_descriptors_help_and_the_dynamic_namespace() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let w = Writer::create(&seg, &Config::default()).unwrap();
    let id = w.add("db.checks", "count", Semantics::Counter).unwrap();
    w.adjust(id, 4321).unwrap();
    let out = dbpmda(
        dir.path(),
        &seg,
        "fetch perfabi.db.checks\nfetch perfabi.segment.available\nchildren perfabi\nchildren perfabi.percpu\nchildren perfabi.db\n\
         text perfabi.db.checks\ntext perfabi.segment.busy_reads\ndesc perfabi.percpu.db.checks\ninstance 502.0\n\
         fetch perfabi.no.such.metric\npmid perfabi.db.checks\nname 502.2048.0\ntraverse perfabi.db\n\
         children perfabi.db.checks\nchildren perfabi.d\n",
    );
    assert!(out.contains("value 4321"), "total");
    assert!(
        out.contains("502.0.0 (perfabi.segment.available): numval: 1") || out.contains("502.0.0"),
        "available"
    );
    for leaf in [
        "non-leaf segment",
        "non-leaf damon",
        "non-leaf percpu",
        "non-leaf db",
        "leaf checks",
    ] {
        assert!(out.contains(leaf), "children: {leaf}");
    }
    assert!(out.contains("db.checks, summed over CPUs"), "counter help");
    assert!(
        out.contains("reads that found the writer mid-update"),
        "fixed help"
    );
    assert!(
        out.contains("Semantics: counter") && out.contains("InDom: 502.0"),
        "desc"
    );
    assert!(out.contains("name: \"cpu0\""), "instances");
    // The agent's own namespace: name → PMID → name, and a subtree.
    assert!(
        out.contains("Metric: perfabi.db.checks\n   502.2048.0\n"),
        "pmid"
    );
    assert!(
        out.contains("PMID: 502.2048.0\n   perfabi.db.checks\n"),
        "name"
    );
    assert!(
        out.contains("Metric: perfabi.db\n   perfabi.db.checks\n"),
        "traverse"
    );
    assert!(out.contains("Unknown metric name"), "a prefix is no name");
    assert!(
        !out.contains("Segmentation") && !out.contains("panic"),
        "{out}"
    );
}

/// `--directory`: two writers' segments served merged, with their count,
/// help that says so, and no per-CPU metrics.
#[test]
fn dbpmda_serves_a_directory_of_segments_merged() {
    let dir = tempfile::tempdir().unwrap();
    let segs = dir.path().join("segs");
    let writers: Vec<Writer> = [("a", 5), ("b", 7)]
        .into_iter()
        .map(|(name, n)| {
            let w = Writer::create_in(&segs, name, &Config::default()).unwrap();
            let id = w.add("dbdir.x", "count", Semantics::Counter).unwrap();
            w.adjust(id, n).unwrap();
            w
        })
        .collect();
    let out = dbpmda_serving(
        dir.path(),
        &format!("--directory {}", segs.display()),
        "fetch perfabi.dbdir.x\nfetch perfabi.segment.nr_segments\n\
         fetch perfabi.segment.nr_problems\ntext perfabi.dbdir.x\nchildren perfabi.percpu\n",
    );
    assert!(out.contains("value 12"), "merged total");
    assert!(out.contains("value 2"), "two segments");
    assert!(out.contains("value 0"), "no problem");
    assert!(
        out.contains("Served merged over the segments of the directory"),
        "help"
    );
    assert!(!out.contains("non-leaf dbdir"), "no per-CPU metrics");
    assert!(!out.contains("panic"), "{out}");
    drop(writers);
}

#[test]
fn dbpmda_with_no_segment_gets_no_values_and_a_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("missing");
    let out = dbpmda(
        dir.path(),
        &seg,
        "fetch perfabi.segment.available\nfetch perfabi.segment.epoch\n",
    );
    assert!(out.contains("value 0"), "available = 0");
    assert!(
        out.contains("502.0.2 (<noname>): Try again. Information not currently available"),
        "no epoch: PM_ERR_AGAIN"
    );
    let log = std::fs::read_to_string(dir.path().join("agent.log")).unwrap();
    assert!(
        log.contains("no segment at this path; will retry at every request"),
        "{log}"
    );
    // A corrupt segment: the same, with its reason.
    std::fs::write(&seg, vec![0xa5u8; 8192]).unwrap();
    let out = dbpmda(dir.path(), &seg, "fetch perfabi.segment.available\n");
    assert!(out.contains("value 0"), "corrupt: available = 0");
    let log = std::fs::read_to_string(dir.path().join("agent.log")).unwrap();
    assert_eq!(
        log.lines().filter(|l| l.contains("Info: ")).count(),
        2,
        "{log}"
    );
}

#[test]
fn the_shipped_help_file_is_the_agent_s_and_newhelp_accepts_it() {
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("pmda/help");
    let generated = Command::new(AGENT).arg("--help-text").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&generated.stdout),
        std::fs::read_to_string(&shipped).unwrap(),
        "regenerate: pmdaperfabi --help-text > pcp-agent/pmda/help"
    );
    // newhelp needs the names' identifiers: a static namespace of the fixed metrics.
    let dir = tempfile::tempdir().unwrap();
    let mut pmns = String::from("root {\n    perfabi\n}\n");
    let mut tree: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for m in perfabi_pcp_agent::catalog::fixed(502) {
        let parts: Vec<&str> = m.name.split('.').collect();
        for i in 1..parts.len() {
            let node = parts[..i].join(".");
            let child = if i + 1 == parts.len() {
                let id = m.pmid;
                format!("{} 502:{}:{}", parts[i], (id >> 10) & 0xfff, id & 0x3ff)
            } else {
                parts[i].to_string()
            };
            let kids = tree.entry(node).or_default();
            if !kids.contains(&child) {
                kids.push(child);
            }
        }
    }
    for (node, kids) in &tree {
        pmns += &format!("{node} {{\n    {}\n}}\n", kids.join("\n    "));
    }
    std::fs::write(dir.path().join("pmns"), pmns).unwrap();
    let out = tool("newhelp", dir.path())
        .arg("-n")
        .arg(dir.path().join("pmns"))
        .arg("-o")
        .arg(dir.path().join("help"))
        .arg(&shipped)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}{}",
        stdout(&out),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.path().join("help.dir").exists());
}

#[test]
fn a_missing_pcp_library_is_one_line_saying_what_to_install() {
    // An empty library path and a loader told to look nowhere else.
    let out = Command::new(AGENT)
        .env("LD_LIBRARY_PATH", "/nonexistent")
        .env("PERFABI_PCP_LIBRARY", "libpcp_pmda_absent.so.3")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("apt-get install libpcp-pmda3"), "{err}");
}

/// `instance INDOM` output: instance name → id.
fn instances(out: &str, indom: &str) -> Vec<(String, i64)> {
    let mut lines = out
        .lines()
        .skip_while(|l| *l != format!("pmInDom: {indom}"));
    lines.next();
    lines
        .map_while(|l| {
            // [  0] inst: 7 name: "kdamond1/target0/region0"
            let rest = l.trim_start().strip_prefix('[')?;
            let (_, rest) = rest.split_once("] inst: ")?;
            let (id, name) = rest.split_once(" name: ")?;
            Some((name.trim_matches('"').to_string(), id.parse().ok()?))
        })
        .collect()
}

#[test]
fn two_thousand_one_hundred_damon_streams_get_as_many_region_ids() {
    // The old agent packed a stream's number into 11 bits of the region
    // id: stream 2,048 took stream 0's ids (2,100 streams, 2,048 ids).
    const STREAMS: u64 = 2100;
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let w = Writer::create(
        &seg,
        &Config {
            damon_capacity: 8192,
            ..Config::default()
        },
    )
    .unwrap();
    let iv = perfabi::damon::Intervals {
        sample_us: 5000,
        aggr_us: 100_000,
    };
    for k in 0..STREAMS {
        let r = perfabi::damon::Region {
            start: 0x1000 * (k + 1),
            end: 0x1000 * (k + 2),
            nr_accesses: 1,
            age: 0,
        };
        w.publish_damon(&Aggregation::new(1000 + k, 0, iv, vec![r]))
            .unwrap();
    }
    let out = dbpmda(
        dir.path(),
        &seg,
        "fetch perfabi.damon.streams\ninstance 502.1\ninstance 502.2\ngetiname on\nfetch perfabi.damon.region.start\n",
    );
    assert!(out.contains(&format!("value {STREAMS}\n")), "streams");
    for (indom, what) in [("502.1", "stream"), ("502.2", "region")] {
        let insts = instances(&out, indom);
        let mut ids: Vec<i64> = insts.iter().map(|(_, id)| *id).collect();
        ids.sort_unstable();
        ids.dedup();
        println!(
            "{STREAMS} streams: {} {what} instances, {} distinct ids",
            insts.len(),
            ids.len()
        );
        assert_eq!(insts.len() as u64, STREAMS, "{what} instances");
        assert_eq!(ids.len() as u64, STREAMS, "one id per {what}");
    }
    // Each region's value is its own stream's, found by its name.
    let mut seen = 0;
    for l in out.lines() {
        // inst [5 or "kdamond1005/target0/region0"] value 24576
        let Some(rest) = l.trim_start().strip_prefix("inst [") else {
            continue;
        };
        let Some((_, rest)) = rest.split_once(" or \"kdamond") else {
            continue;
        };
        let (k, rest) = rest.split_once('/').unwrap();
        let v: u64 = rest.rsplit_once("value ").unwrap().1.parse().unwrap();
        let k: u64 = k.parse::<u64>().unwrap() - 1000;
        assert_eq!(v, 0x1000 * (k + 1), "{l}");
        seen += 1;
    }
    assert_eq!(seen, STREAMS, "region.start values");
    drop(w);
}

#[test]
fn family_pmids_outlive_the_agent_and_are_never_given_to_another_name() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let w = Writer::create(&seg, &Config::default()).unwrap();
    let a = w.add("keep.a", "count", Semantics::Counter).unwrap();
    w.add("keep.b", "count", Semantics::Counter).unwrap();
    let first = dbpmda(dir.path(), &seg, "pmid perfabi.keep.b\n");
    assert!(
        first.contains("   502.2048.1\n"),
        "b is the second counter met"
    );
    // a goes, c comes (in a's slot): a new agent meets c first.
    w.del(a).unwrap();
    w.add("keep.c", "count", Semantics::Counter).unwrap();
    let second = dbpmda(
        dir.path(),
        &seg,
        "pmid perfabi.keep.b\npmid perfabi.keep.c\npmid perfabi.percpu.keep.c\n",
    );
    assert!(
        second.contains("Metric: perfabi.keep.b\n   502.2048.1\n"),
        "b keeps its PMID"
    );
    assert!(
        second.contains("Metric: perfabi.keep.c\n   502.2048.2\n")
            && second.contains("Metric: perfabi.percpu.keep.c\n   502.16.2\n"),
        "c takes a new number, not a's"
    );
    let saved =
        std::fs::read_to_string(dir.path().join("var/config/pmda/perfabi/502.pmids")).unwrap();
    assert_eq!(
        saved,
        "pmdaperfabi counter numbers 1\n0 keep_a keep.a\n1 keep_b keep.b\n2 keep_c keep.c\n"
    );
}

#[test]
fn saved_state_that_is_bad_or_not_the_agent_s_is_refused_and_said() {
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let w = Writer::create(&seg, &Config::default()).unwrap();
    let id = w.add("st.x", "count", Semantics::Counter).unwrap();
    w.adjust(id, 9).unwrap();
    let state = dir.path().join("var/config/pmda/perfabi");
    std::fs::create_dir_all(&state).unwrap();
    let file = state.join("502.pmids");
    let log = || std::fs::read_to_string(dir.path().join("agent.log")).unwrap();

    // Not the agent's format: set aside, said, numbered anew.
    std::fs::write(&file, "pmdaperfabi counter numbers 1\n0 a a\n0 b b\n").unwrap();
    let out = dbpmda(dir.path(), &seg, "fetch perfabi.st.x\n");
    assert!(out.contains("value 9"), "served anyway");
    assert!(
        log().contains("502.pmids: line 3: number 0 is given twice; counters are numbered anew"),
        "{}",
        log()
    );
    assert_eq!(
        std::fs::read_to_string(state.join("502.pmids.bad")).unwrap(),
        "pmdaperfabi counter numbers 1\n0 a a\n0 b b\n"
    );
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "pmdaperfabi counter numbers 1\n0 st_x st.x\n"
    );

    // A link planted in its place: refused, never followed or replaced.
    let target = dir.path().join("elsewhere");
    std::fs::write(&target, "precious\n").unwrap();
    std::fs::remove_file(&file).unwrap();
    std::os::unix::fs::symlink(&target, &file).unwrap();
    let out = dbpmda(dir.path(), &seg, "fetch perfabi.st.x\n");
    assert!(out.contains("value 9"), "served anyway");
    assert!(
        log().contains("it is a symbolic link")
            && log().contains("will not be kept across restarts"),
        "{}",
        log()
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "precious\n");
    assert!(std::fs::symlink_metadata(&file)
        .unwrap()
        .file_type()
        .is_symlink());

    // A state folder others may write in: refused.
    std::fs::remove_file(&file).unwrap();
    std::fs::set_permissions(&state, std::os::unix::fs::PermissionsExt::from_mode(0o777)).unwrap();
    let out = dbpmda(dir.path(), &seg, "fetch perfabi.st.x\n");
    assert!(out.contains("value 9"), "served anyway");
    assert!(
        log().contains("others could replace files in it"),
        "{}",
        log()
    );
    assert!(!file.exists(), "nothing written there");
    drop(w);
}
