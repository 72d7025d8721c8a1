//! The machine's PCP files are left as found: every PCP program the tests
//! run, run as the tests run it (through `support`, each in the private PCP
//! environment of `pcp-agent/test/private-env`), writes only below its
//! test's folder. Checked with strace, which sees each write as it happens
//! (a machine shared with other test runs cannot be checked by comparing
//! its files before and after one test): a session of them all, the same
//! test binary run again under `strace -f`, and every file it created,
//! opened for writing, removed, renamed or bound a socket to, outside the
//! session's folder, is a failure. (`tests/run` also hashes the machine's
//! PCP tree before and after the whole suite: `pcp-agent/test/pcp-tree`.)

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
    let pmcd = Pmcd::start(&dir.join("pmcd"), &seg, &[]);
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

    let pmproxy = Pmproxy::start(&dir.join("pmproxy"), &pmcd);
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

/// `pcp-agent/test/pcp-tree` on a made-up machine root (`PERFABI_PCP_ROOT`).
fn pcp_tree(root: &Path, check: Option<&Path>) -> (i32, String) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("test/pcp-tree");
    let mut c = std::process::Command::new(&script);
    c.env("PERFABI_PCP_ROOT", root).env("HOME", "/home/t");
    if let Some(f) = check {
        c.arg("--check").arg(f);
    }
    let out = run(&mut c);
    let text = format!("{}{}", stdout(&out), String::from_utf8_lossy(&out.stderr));
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn the_pcp_tree_check_names_each_kind_of_change_and_passes_once_undone() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let dir = tempfile::tempdir().unwrap();
    let r = dir.path();
    let at = |p: &str| r.join(p.trim_start_matches('/'));
    for d in [
        "/etc/pcp/pmcd",
        "/var/lib/pcp/tmp/pmlogger",
        "/var/lib/pcp/config/pmda",
        "/var/lib/pcp/pmdas/x",
        "/var/log/pcp/pmcd",
        "/var/tmp",
        "/etc/init.d",
        "/etc/default",
    ] {
        std::fs::create_dir_all(at(d)).unwrap();
    }
    std::fs::write(at("/etc/pcp.conf"), "PCP_VAR_DIR=/var/lib/pcp\n").unwrap();
    std::fs::write(at("/etc/pcp.env"), "# env\n").unwrap();
    std::fs::write(at("/etc/pcp/pmcd/pmcd.conf"), "aaaa\n").unwrap();
    std::fs::write(at("/var/log/pcp/pmcd/pmcd.log"), "log\n").unwrap();
    symlink("/etc/pcp/x.conf", at("/var/lib/pcp/pmdas/x/x.conf")).unwrap();
    // A file PCP's package puts outside its folders, if this machine's
    // dpkg lists it (Debian: /etc/default/pmcd).
    let packaged = std::process::Command::new("dpkg-query")
        .args(["-L", "pcp"])
        .output()
        .is_ok_and(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .any(|l| l == "/etc/default/pmcd")
        });
    if packaged {
        std::fs::write(at("/etc/default/pmcd"), "OPTS=\n").unwrap();
    }

    let found = dir.path().join("found");
    let (code, snapshot) = pcp_tree(r, None);
    assert_eq!(code, 0, "{snapshot}");
    std::fs::write(&found, &snapshot).unwrap();
    assert!(
        snapshot.starts_with("# PCP services running: none\n"),
        "{snapshot}"
    );
    for want in [
        "/etc/pcp/pmcd/pmcd.conf",
        "/var/lib/pcp/pmdas/x/x.conf -> /etc/pcp/x.conf",
        "absent /run/pcp",
    ] {
        assert!(snapshot.contains(want), "{want} not in\n{snapshot}");
    }
    let (code, text) = pcp_tree(r, Some(&found));
    assert_eq!(code, 0, "nothing changed yet: {text}");

    // Each change, alone: the check fails naming the path; undone, it passes.
    let mode = |p: &str, m: u32| {
        std::fs::set_permissions(at(p), std::fs::Permissions::from_mode(m)).unwrap()
    };
    type Step<'a> = Box<dyn Fn() + 'a>;
    let mut changes: Vec<(&str, &str, Step, Step)> = vec![
        (
            "content, same size",
            "/etc/pcp/pmcd/pmcd.conf",
            Box::new(|| std::fs::write(at("/etc/pcp/pmcd/pmcd.conf"), "bbbb\n").unwrap()),
            Box::new(|| std::fs::write(at("/etc/pcp/pmcd/pmcd.conf"), "aaaa\n").unwrap()),
        ),
        (
            "mode",
            "/etc/pcp.conf",
            Box::new(|| mode("/etc/pcp.conf", 0o600)),
            Box::new(|| mode("/etc/pcp.conf", 0o644)),
        ),
        (
            "a client's file in PCP_TMP_DIR",
            "/var/lib/pcp/tmp/pmlogger/4242",
            Box::new(|| std::fs::write(at("/var/lib/pcp/tmp/pmlogger/4242"), "").unwrap()),
            Box::new(|| std::fs::remove_file(at("/var/lib/pcp/tmp/pmlogger/4242")).unwrap()),
        ),
        (
            "an agent's cache",
            "/var/lib/pcp/config/pmda/502.1",
            Box::new(|| std::fs::write(at("/var/lib/pcp/config/pmda/502.1"), "1\n").unwrap()),
            Box::new(|| std::fs::remove_file(at("/var/lib/pcp/config/pmda/502.1")).unwrap()),
        ),
        (
            "a file removed",
            "/etc/pcp.env",
            Box::new(|| std::fs::remove_file(at("/etc/pcp.env")).unwrap()),
            Box::new(|| {
                std::fs::write(at("/etc/pcp.env"), "# env\n").unwrap();
                mode("/etc/pcp.env", 0o644);
            }),
        ),
        (
            "a link retargeted",
            "/var/lib/pcp/pmdas/x/x.conf",
            Box::new(|| {
                std::fs::remove_file(at("/var/lib/pcp/pmdas/x/x.conf")).unwrap();
                symlink("/tmp/elsewhere", at("/var/lib/pcp/pmdas/x/x.conf")).unwrap();
            }),
            Box::new(|| {
                std::fs::remove_file(at("/var/lib/pcp/pmdas/x/x.conf")).unwrap();
                symlink("/etc/pcp/x.conf", at("/var/lib/pcp/pmdas/x/x.conf")).unwrap();
            }),
        ),
        (
            "a log written",
            "/var/log/pcp/pmcd/pmcd.log",
            Box::new(|| std::fs::write(at("/var/log/pcp/pmcd/pmcd.log"), "log\nmore\n").unwrap()),
            Box::new(|| std::fs::write(at("/var/log/pcp/pmcd/pmcd.log"), "log\n").unwrap()),
        ),
        (
            "PCP_RUN_DIR made",
            "/run/pcp",
            Box::new(|| std::fs::create_dir_all(at("/run/pcp")).unwrap()),
            Box::new(|| std::fs::remove_dir(at("/run/pcp")).unwrap()),
        ),
        (
            "a client's ~/.pcp",
            "/home/t/.pcp",
            Box::new(|| std::fs::create_dir_all(at("/home/t/.pcp/run")).unwrap()),
            Box::new(|| std::fs::remove_dir_all(at("/home/t/.pcp")).unwrap()),
        ),
        (
            "pmlogger's copy of its configuration in PCP_TMPFILE_DIR",
            "/var/tmp/pmlogger_configAb12Cd",
            Box::new(|| std::fs::write(at("/var/tmp/pmlogger_configAb12Cd"), "log\n").unwrap()),
            Box::new(|| std::fs::remove_file(at("/var/tmp/pmlogger_configAb12Cd")).unwrap()),
        ),
    ];
    if packaged {
        changes.push((
            "a packaged file outside PCP's folders",
            "/etc/default/pmcd",
            Box::new(|| std::fs::write(at("/etc/default/pmcd"), "OPTS=-x\n").unwrap()),
            Box::new(|| std::fs::write(at("/etc/default/pmcd"), "OPTS=\n").unwrap()),
        ));
    }
    for (what, path, plant, undo) in &changes {
        plant();
        let (code, text) = pcp_tree(r, Some(&found));
        println!("{what}:\n{text}");
        assert_eq!(code, 1, "{what}: not caught:\n{text}");
        assert!(
            text.contains("THE MACHINE'S PCP FILES CHANGED") && text.contains(path),
            "{what}: {path} not named:\n{text}"
        );
        undo();
        let (code, text) = pcp_tree(r, Some(&found));
        assert_eq!(code, 0, "{what}, undone: {text}");
    }

    // While PCP's own services run, their working files are left out, and
    // the rest is still checked; services stopping is a change too.
    let mut pmcd = perfabi_test_harness::KillOnDrop(
        std::process::Command::new("sleep")
            .arg("600")
            .spawn()
            .unwrap(),
    );
    std::fs::create_dir_all(at("/run/pcp")).unwrap();
    std::fs::write(at("/run/pcp/pmcd.pid"), format!("{}\n", pmcd.0.id())).unwrap();
    let (code, live) = pcp_tree(r, None);
    assert_eq!(code, 0, "{live}");
    assert!(
        live.starts_with(&format!("# PCP services running: pmcd({})\n", pmcd.0.id())),
        "{live}"
    );
    std::fs::write(&found, &live).unwrap();
    std::fs::write(at("/var/lib/pcp/tmp/pmlogger/77"), "").unwrap();
    std::fs::write(at("/var/log/pcp/pmcd/pmcd.log"), "log\nmore\n").unwrap();
    let (code, text) = pcp_tree(r, Some(&found));
    assert_eq!(code, 0, "a live pmcd's own files: {text}");
    std::fs::write(at("/etc/pcp/pmcd/pmcd.conf"), "cccc\n").unwrap();
    let (code, text) = pcp_tree(r, Some(&found));
    assert!(
        code == 1 && text.contains("/etc/pcp/pmcd/pmcd.conf"),
        "{text}"
    );
    std::fs::write(at("/etc/pcp/pmcd/pmcd.conf"), "aaaa\n").unwrap();
    pmcd.0.kill().unwrap();
    pmcd.0.wait().unwrap();
    let (code, text) = pcp_tree(r, Some(&found));
    assert!(
        code == 1 && text.contains("# PCP services running"),
        "{text}"
    );
}
