//! The agent alone, driven by dbpmda (no pmcd), as PCP's own PMDAs are
//! tested; and its shipped help file.

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use perfabi::writer::{Config, Writer};
use perfabi::Semantics;
use support::*;

fn dbpmda(dir: &Path, segment: &Path, commands: &str) -> String {
    let pmns = dir.join("pmns");
    std::fs::write(&pmns, "root {\n    perfabi 502:*:*\n}\n").unwrap();
    let log = dir.join("agent.log");
    let script = format!(
        "open pipe {AGENT} -d 502 -l {} -s {}\ngetdesc on\n{commands}",
        log.display(),
        segment.display()
    );
    let mut child = tool("dbpmda")
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
        "fetch perfabi.total.db_checks\nfetch perfabi.segment.available\nchildren perfabi\nchildren perfabi.counter\n\
         text perfabi.total.db_checks\ntext perfabi.segment.busy_reads\ndesc perfabi.counter.db_checks\ninstance 502.0\n\
         fetch perfabi.no.such.metric\n",
    );
    assert!(out.contains("value 4321"), "total");
    assert!(
        out.contains("502.0.0 (perfabi.segment.available): numval: 1") || out.contains("502.0.0"),
        "available"
    );
    for leaf in [
        "non-leaf segment",
        "non-leaf damon",
        "non-leaf counter",
        "non-leaf total",
        "leaf db_checks",
    ] {
        assert!(out.contains(leaf), "children: {leaf}");
    }
    assert!(out.contains("db.checks summed over CPUs"), "counter help");
    assert!(
        out.contains("reads that found the writer mid-update"),
        "fixed help"
    );
    assert!(
        out.contains("Semantics: counter") && out.contains("InDom: 502.0"),
        "desc"
    );
    assert!(out.contains("name: \"cpu0\""), "instances");
    assert!(
        !out.contains("Segmentation") && !out.contains("panic"),
        "{out}"
    );
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
        out.contains("502.0.2 (<noname>): No values returned!"),
        "no epoch"
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
    let out = tool("newhelp")
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
