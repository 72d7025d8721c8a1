//! The machine's PCP files are left as found: every PCP program the tests
//! run, run as the tests run it (through `support`, each in the private PCP
//! environment of `pcp-agent/test/private-env`), writes only below its
//! test's folder. Checked with strace, which sees each write as it happens
//! (a machine shared with other test runs cannot be checked by comparing
//! its files before and after one test): a session of them all, the same
//! test binary run again under `strace -f`, and every file it created,
//! opened for writing, removed, renamed or bound a socket to, outside the
//! session's folder, is a failure.

mod support;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use perfabi::{Buckets, FamilySpec, Semantics, Unit};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::trace::{traced, FileWrite};
use support::*;

/// Set to the session's folder: the test, run again under strace, runs the
/// session itself instead.
const SESSION: &str = "PERFABI_PCP_SESSION_DIR";
const TEST: &str = "every_pcp_program_the_tests_run_writes_only_below_the_test_folder";
/// The session's last line: it ran to its end.
const DONE: &str = "PCP-SESSION DONE";

#[test]
fn every_pcp_program_the_tests_run_writes_only_below_the_test_folder() {
    if let Some(dir) = std::env::var_os(SESSION) {
        session(Path::new(&dir));
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let traces = tempfile::tempdir().unwrap();
    let mut me = std::process::Command::new(std::env::current_exe().unwrap());
    me.args(["--exact", TEST, "--nocapture", "--test-threads=1"])
        .env(SESSION, dir.path())
        .stdin(Stdio::null());
    let (done, writes) = traced(&me, traces.path(), Duration::from_secs(300));
    println!("{}", done.stdout);
    assert!(
        done.code() == Some(0) && done.stdout.contains(DONE),
        "the traced session failed ({:?}):\n{}\n{}",
        done.status,
        done.stdout,
        done.stderr
    );
    let root = dir.path().canonicalize().unwrap();
    let outside: Vec<&FileWrite> = writes.iter().filter(|w| !allowed(&w.path, &root)).collect();
    let inside = writes.len() - outside.len();
    // The trace saw the session's own PCP files: pmlogger's in its private
    // PCP_TMP_DIR (the session's pmcd folder), the agent's saved PMIDs in
    // its private PCP_VAR_DIR, pmcd's socket.
    for want in [
        "pmcd/tmp/pmlogger/",
        "pmcd/var/config/pmda/perfabi/",
        "dbpmda/var/config/pmda/perfabi/",
        "pmcd/pmcd.socket",
    ] {
        assert!(
            writes.iter().any(|w| w.path.starts_with(&root)
                && w.path.to_string_lossy().contains(&format!("/{want}"))),
            "strace saw no write to {want} in {}: {writes:#?}",
            root.display()
        );
    }
    println!(
        "PCP programs' writes: {inside} below the session's folder, {} elsewhere",
        outside.len()
    );
    assert!(
        outside.is_empty(),
        "PCP programs wrote outside their test's folder {}:\n{}",
        root.display(),
        outside
            .iter()
            .map(|w| format!(
                "  {} ({}, pid {}): {}",
                w.program,
                w.call,
                w.pid,
                w.path.display()
            ))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Where a session may write: its folder, and devices (a terminal,
/// /dev/null) and /proc, which are no files; not /dev/shm.
fn allowed(path: &Path, root: &Path) -> bool {
    path.starts_with(root)
        || (path.starts_with("/dev") && !path.starts_with("/dev/shm"))
        || path.starts_with("/proc")
}

/// Every PCP program the tests run, as they run it: pmcd with the agent
/// (private-pmcd), pminfo, pmval, pmprobe, pmlogger, pmdumplog, pmrep,
/// PCP's Python binding, pmproxy (private-pmproxy), dbpmda with the agent,
/// and newhelp. Each must succeed.
fn session(dir: &Path) {
    let seg = dir.join("seg");
    let w = Writer::create(
        &seg,
        &Config {
            heartbeat_interval: Duration::from_secs(1),
            ..Config::default()
        },
    )
    .unwrap();
    let ops = w.add("session.ops", "count", Semantics::Counter).unwrap();
    w.adjust(ops, 42).unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "session.latency",
            "Latency",
            "op",
            Unit::NS,
            Buckets::Explicit(vec![100, 1000]),
        ))
        .unwrap();
    let get = w.add_member(lat, "get", &[]).unwrap();
    w.observe(&get, 500).unwrap();

    let ok = |what: &str, out: &std::process::Output| {
        assert!(
            out.status.success(),
            "{what}: {:?}\n{}{}",
            out.status,
            stdout(out),
            String::from_utf8_lossy(&out.stderr)
        );
        stdout(out)
    };
    let pmcd = Pmcd::start(&dir.join("pmcd"), port(), &seg, &[]);
    assert_eq!(pmcd.value("perfabi.session.ops").as_deref(), Some("42"));
    ok(
        "pmval",
        &run(pmcd
            .client("pmval")
            .args(["-s", "2", "-t", "0.2", "perfabi.session.ops"])),
    );
    ok(
        "pmprobe",
        &run(pmcd.client("pmprobe").args(["-v", "perfabi.session.ops"])),
    );

    let archive = dir.join("archive");
    ok(
        "pmlogger",
        &run(pmcd
            .client("pmlogger")
            .arg("-c")
            .arg(pmlogger_config_every_second(dir))
            .args(["-s", "2", "-t", "1"])
            .arg("-l")
            .arg(dir.join("pmlogger.log"))
            .arg(&archive)),
    );
    let dump = ok(
        "pmdumplog",
        &run(tool("pmdumplog", dir)
            .arg(&archive)
            .arg("perfabi.session.ops")),
    );
    assert!(dump.contains("value 42"), "{dump}");
    ok(
        "pmrep",
        &run(pmrep(dir)
            .arg("-a")
            .arg(&archive)
            .args(["-s", "1", "perfabi.session.ops"])),
    );
    let py = ok(
        "PCP's Python binding",
        &run(pcp_python(&pmcd.dir).args([
            "-c",
            "import sys\nfrom pcp import pmapi\n\
             c = pmapi.pmContext(pmapi.c_api.PM_CONTEXT_HOST, sys.argv[1])\n\
             ids = c.pmLookupName('perfabi.session.ops')\n\
             d = c.pmLookupDescs(ids)[0]\n\
             r = c.pmFetch(ids)\n\
             v = c.pmExtractValue(r.contents.get_valfmt(0), r.contents.get_vlist(0, 0), \
             d.type, pmapi.c_api.PM_TYPE_U64)\n\
             print(v.ull)\n",
            &pmcd.host(),
        ])),
    );
    assert_eq!(py.trim(), "42");

    let pmproxy = Pmproxy::start(&dir.join("pmproxy"), port(), &pmcd);
    let (status, page) = pmproxy.metrics("perfabi.session.ops");
    assert_eq!(status, 200, "{page}");
    drop(pmproxy);
    pmcd.restart_agent();
    drop(pmcd);

    // dbpmda runs the agent itself (no pmcd), as the dbpmda tests do.
    let db = dir.join("dbpmda");
    std::fs::create_dir_all(&db).unwrap();
    std::fs::write(db.join("pmns"), "root {\n    perfabi 502:*:*\n}\n").unwrap();
    let script = format!(
        "open pipe {AGENT} -d 502 -l {} -s {}\nfetch perfabi.session.ops\n",
        db.join("agent.log").display(),
        seg.display()
    );
    std::fs::write(db.join("script"), script).unwrap();
    let out = run(tool("dbpmda", &db)
        .arg("-n")
        .arg(db.join("pmns"))
        .arg("-ie")
        .stdin(std::fs::File::open(db.join("script")).unwrap()));
    let text = ok("dbpmda", &out);
    assert!(text.contains("value 42"), "dbpmda: {text}");

    // newhelp, as the help file's test runs it.
    std::fs::write(
        dir.join("help.pmns"),
        "root {\n    perfabi\n}\nperfabi {\n    session\n}\nperfabi.session {\n    ops 502:0:0\n}\n",
    )
    .unwrap();
    std::fs::write(
        dir.join("help.txt"),
        "$perfabi = 502\n\n@ perfabi.session.ops operations\nOperations of the session.\n",
    )
    .unwrap();
    ok(
        "newhelp",
        &run(tool("newhelp", dir)
            .arg("-n")
            .arg(dir.join("help.pmns"))
            .arg("-o")
            .arg(dir.join("help"))
            .arg(dir.join("help.txt"))),
    );
    drop(w);
    println!("{DONE}");
}
