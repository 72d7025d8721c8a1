//! Review findings on metric families through the reader and perfabi-cat.

mod support;

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use perfabi::layout::{FamilyEntry, InstanceEntry, MemberEntry};
use perfabi::{FamilySpec, Kind, Semantics, Unit};
use perfabi_shm::writer::{Config, Writer};

/// Run by other tests as a child writer process (see `support`).
#[test]
#[ignore = "helper: the writer process that other tests start and kill"]
fn child_writer() {
    support::run_child_writer();
}

fn config() -> Config {
    Config {
        auto_heartbeat: false,
        heartbeat_interval: Duration::ZERO,
        max_instances: 64,
        max_families: 4,
        max_members: 8,
        damon_capacity: 0,
        ..Config::default()
    }
}

fn put_u64(path: &Path, at: usize, v: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&v.to_ne_bytes(), at as u64).unwrap();
}

/// Spec §5, §5.1, §5.3 and §5.4 rules 1, 2 and 4 make registration ids
/// distinct among live entries, among live families and among live
/// members, each table on its own: a writer that numbers each table from 1
/// writes a valid segment in which the 1.0 entry `legacy` (reg_id 1) and
/// family `fam` (reg_id 1) with its member (reg_id 1) coexist.
///
/// perfabi-cat --watch (rates.rs `rows`) matches an instance of the
/// previous snapshot by the key (family reg_id, member reg_id), and a 1.0
/// entry's key is (reg_id, reg_id): both instances have the key (1, 1).
/// The previous value of `legacy` is then taken from `fam` (inserted
/// last), and `legacy`, which never moved, shows a rate of about -1e6 / dt.
#[test]
fn watch_never_takes_one_instance_for_another_with_equal_reg_ids() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &config()).unwrap();
    let _legacy = w.add("legacy", "", Semantics::Counter).unwrap();
    let f = w
        .add_family(&FamilySpec::new("fam", "", "", Kind::Counter, Unit::NONE))
        .unwrap();
    let m = w.add_member(f, "", &[]).unwrap();
    w.member_add(&m, 1_000_000).unwrap();
    let l = *w.layout();
    let t = l.families.unwrap();
    put_u64(
        &path,
        l.instances_offset + core::mem::offset_of!(InstanceEntry, reg_id),
        1,
    );
    put_u64(
        &path,
        t.families_offset + core::mem::offset_of!(FamilyEntry, reg_id),
        1,
    );
    put_u64(
        &path,
        t.members_offset + core::mem::offset_of!(MemberEntry, reg_id),
        1,
    );
    // The segment is valid.
    let s = w.snapshot().unwrap();
    assert_eq!(s.families.len(), 2);

    let out = Command::new(perfabi_test_harness::workspace::perfabi_cat())
        .arg(&path)
        .args(["--watch", "0.2", "--count", "1", "--json", "--allow-stale"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let line = String::from_utf8(out.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    assert_eq!(v["rates"]["fam"].as_f64(), Some(0.0), "{line}");
    assert_eq!(
        v["rates"]["legacy"].as_f64(),
        Some(0.0),
        "legacy's rate is computed from fam's value: {line}"
    );
}

/// OpenMetrics 1.0's ABNF: `# HELP <name> <escaped-string>`, where
/// `normal-char` is any character but newline, double quote and backslash,
/// and those three are written `\n`, `\"`, `\\`. Whether `s` is one.
fn escaped_string(s: &str) -> bool {
    let mut it = s.chars();
    while let Some(c) = it.next() {
        match c {
            '"' | '\n' => return false,
            '\\' => match it.next() {
                Some(n) if n != '\n' => {}
                _ => return false,
            },
            _ => {}
        }
    }
    true
}

/// A family's help is "0..=127 bytes of printable ASCII" (§5.1), `"`
/// included, and a 1.0 unit string is printable ASCII without spaces, `"`
/// included; perfabi-cat --openmetrics (exposition.rs `escape_help`)
/// escapes only `\` and newline, so the `# HELP` line holds a bare `"`,
/// which OpenMetrics' `escaped-string` does not allow (prometheus_client's
/// parser is lenient and accepts it; a strict one does not).
#[test]
fn openmetrics_help_lines_are_escaped_strings() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &config()).unwrap();
    w.add("legacy", "\"in\"", Semantics::Counter).unwrap();
    let f = w
        .add_family(&FamilySpec::new(
            "fam",
            "Bytes \"read\" by the device",
            "",
            Kind::Counter,
            Unit::NONE,
        ))
        .unwrap();
    w.add_member(f, "", &[]).unwrap();
    let out = Command::new(perfabi_test_harness::workspace::perfabi_cat())
        .arg(&path)
        .args(["--openmetrics", "--allow-stale"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let page = String::from_utf8(out.stdout).unwrap();
    for line in page.lines().filter(|l| l.starts_with("# HELP ")) {
        let text = line.splitn(4, ' ').nth(3).unwrap_or("");
        assert!(
            escaped_string(text),
            "not an OpenMetrics escaped-string: {line}"
        );
    }
}
