//! The fold lock and readers of another user (`spec/PERFABI.md` §15.5,
//! §11.1): a reader running as another uid (pmcd's `pcp`, an exporter's
//! user) takes the lock too, so it never reads during a fold; it cannot
//! take the fold's kind of lock; and holding the lock forever does not stop
//! folds (the fold replaces it, and the reader that held it reads again).
//!
//! The other user's reader is this test binary again (a copy anyone may
//! run), running the ignored test `other_user`.

use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use perfabi::Reading;
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_shm::directory::lock::{self, Want};
use perfabi_shm::directory::LOCK_NAME;
use perfabi_shm::safe_open::Folder;
use perfabi_shm::writer::fold::fold;
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness as harness;

mod support;
use support::directory::count_requests;

const ENV_DIR: &str = "PERFABI_TEST_OTHER_DIR";
const ENV_MODE: &str = "PERFABI_TEST_OTHER_MODE";

/// The other user's side. `read`: one directory read with a 300 ms busy
/// timeout, printing `ok <requests>` or `err <message>`. `hold`: takes the
/// read lock, prints `held`, waits for a line on stdin, then prints
/// `current` or `replaced`. `write`: tries the fold's lock, printing
/// `write-lock refused` or `write-lock taken`.
#[test]
#[ignore = "the other user's process of the tests of this file"]
fn other_user() {
    let (Some(dir), Some(mode)) = (std::env::var_os(ENV_DIR), std::env::var(ENV_MODE).ok()) else {
        panic!("run by this file's tests only");
    };
    let dir = Path::new(&dir);
    match mode.as_str() {
        "read" => {
            let mut opts = DirectoryOptions::default();
            opts.segment.busy_timeout = Duration::from_millis(300);
            match Directory::open(dir, opts).and_then(|mut d| d.read()) {
                Ok(s) => println!("ok {}", requests(&s)),
                Err(e) => println!("err {e}"),
            }
        }
        "hold" => {
            let folder = Folder::open(dir).unwrap();
            let held = lock::for_reader(&folder, Duration::from_secs(5)).unwrap();
            assert!(held.held(), "the lock is readable by others");
            println!("held");
            let mut line = String::new();
            std::io::stdin().read_line(&mut line).unwrap();
            let current = held.still_current(&folder).unwrap();
            println!("{}", if current { "current" } else { "replaced" });
        }
        "write" => {
            let f = std::fs::File::open(dir.join(LOCK_NAME)).unwrap();
            match lock::try_lock(&f, Want::Write) {
                Ok(true) => println!("write-lock taken"),
                _ => println!("write-lock refused"),
            }
        }
        m => panic!("mode {m}"),
    }
}

fn requests(s: &perfabi_reader::directory::Scrape) -> u64 {
    s.families
        .iter()
        .filter(|f| f.family.name == "app.requests")
        .flat_map(|f| f.readings.iter())
        .map(|r| match r {
            Reading::Unsigned(n) => *n,
            _ => 0,
        })
        .sum()
}

/// A closed writer of `dir` that counted `n` requests (a dead writer for
/// the fold).
fn dead_writer(dir: &Path, n: i64) {
    let w = Writer::create_in(
        dir,
        "w",
        &Config {
            nr_cpus: Some(2),
            max_instances: 16,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    count_requests(&w, "Requests", n);
    w.close();
}

struct Setup {
    _top: tempfile::TempDir,
    dir: std::path::PathBuf,
    exe: std::path::PathBuf,
}

fn setup(test: &str) -> Option<Setup> {
    if !harness::need_root(test) {
        return None;
    }
    let top = tempfile::tempdir().unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let dir = top.path().join("segs");
    let exe = harness::executable_copy(&std::env::current_exe().unwrap(), top.path());
    Some(Setup {
        _top: top,
        dir,
        exe,
    })
}

fn other(s: &Setup, mode: &str) -> std::process::Child {
    harness::as_other_user(
        Command::new(&s.exe)
            .args([
                "--ignored",
                "--exact",
                "other_user",
                "--nocapture",
                "--quiet",
            ])
            .env(ENV_DIR, &s.dir)
            .env(ENV_MODE, mode)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped()),
    )
    .spawn()
    .unwrap()
}

fn meaningful(l: &str) -> bool {
    !l.trim().is_empty() && !l.starts_with("running") && !l.starts_with("test ")
}

fn lines(child: &mut std::process::Child) -> impl Iterator<Item = String> {
    BufReader::new(child.stdout.take().unwrap())
        .lines()
        .map_while(Result::ok)
        .filter(|l| meaningful(l))
}

/// Runs the other user's side in `mode` to its end: its first line.
fn answer(s: &Setup, mode: &str) -> String {
    let out = other(s, mode).wait_with_output().unwrap();
    assert!(out.status.success(), "{mode}: {}", out.status);
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| meaningful(l))
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_reader_of_another_user_waits_for_a_fold_and_cannot_take_its_lock() {
    let Some(s) = setup("a_reader_of_another_user_waits_for_a_fold_and_cannot_take_its_lock")
    else {
        return;
    };
    dead_writer(&s.dir, 5);
    fold(&s.dir).unwrap();
    dead_writer(&s.dir, 7);
    let md = std::fs::metadata(s.dir.join(LOCK_NAME)).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        md.mode() & 0o777,
        0o644,
        "readers of any user may open the lock"
    );
    // Not during a fold: the other user's read is exact.
    assert_eq!(answer(&s, "read"), "ok 12");
    // During a fold (its locks held here): the other user's read waits its
    // busy timeout, then fails with a message to read again.
    let folder = Folder::open(&s.dir).unwrap();
    let locks = lock::for_fold(&folder, Duration::from_millis(200))
        .unwrap()
        .expect("no other fold");
    let t = Instant::now();
    let got = answer(&s, "read");
    assert!(
        got.starts_with("err ") && got.contains("read again"),
        "a read during a fold: {got}"
    );
    assert!(t.elapsed() >= Duration::from_millis(300), "it waited");
    // Nor can another user take a fold's kind of lock (it would stop
    // readers): its descriptor is read-only.
    drop(locks);
    assert_eq!(answer(&s, "write"), "write-lock refused");
}

#[test]
fn a_lock_held_forever_by_another_user_stops_no_fold() {
    let Some(s) = setup("a_lock_held_forever_by_another_user_stops_no_fold") else {
        return;
    };
    dead_writer(&s.dir, 5);
    fold(&s.dir).unwrap();
    dead_writer(&s.dir, 7);
    let mut c = other(&s, "hold");
    let mut out = lines(&mut c);
    assert_eq!(out.next().as_deref(), Some("held"));
    // The fold waits its patience, replaces the lock, and folds.
    let t = Instant::now();
    let r = fold(&s.dir).unwrap();
    assert!(!r.busy && r.folded == 1, "{r:?}");
    assert!(t.elapsed() < Duration::from_secs(5));
    // The reader that held the old lock learns its read may have seen the
    // fold (and reads again).
    writeln!(c.stdin.as_mut().unwrap()).unwrap();
    assert_eq!(out.next().as_deref(), Some("replaced"));
    out.for_each(drop);
    assert!(c.wait().unwrap().success());
    let mut d = Directory::open(&s.dir, DirectoryOptions::default()).unwrap();
    let scrape = d.read().unwrap();
    assert_eq!((requests(&scrape), scrape.segments), (12, 0));
}
