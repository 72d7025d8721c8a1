//! A review of the writer's liveness lock (`spec/PERFABI.md` §10) where
//! it meets the fold (§15.5) and a re-created segment (§11.5). Each
//! `finding N` test shows a way the code broke a promise: it failed on the
//! code as the review found it and passes since the fix its text names.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use perfabi::layout::{Header, FLAG_LIVE_LOCK, HEADER_SIZE_V1_0};
use perfabi::Reading;
use perfabi_reader::{Liveness, Segment};
use perfabi_shm::writer::fold::{fold, writer_dead};
use perfabi_shm::writer::{Config, Health, MemberId, Writer};
use perfabi_test_harness::deadline::Deadline;

mod support;
use support::directory::{count_requests, read, total};

fn config() -> Config {
    Config {
        // Heartbeats (and the folds of the heartbeat thread) only where
        // the test makes them.
        auto_heartbeat: false,
        ..support::directory::config(0)
    }
}

/// A writer `name` in `dir` whose counter `app.requests` counted `n`, and
/// that counter's member.
fn counting(dir: &Path, name: &str, n: i64) -> (Writer, MemberId) {
    let w = Writer::create_in(dir, name, &config()).unwrap();
    let m = count_requests(&w, "Requests", n);
    (w, m)
}

/// Stores `value` into the header word at byte `offset` of `path`, as the
/// file's owner may (damage after publication, §11.5).
fn poke(path: &Path, offset: usize, value: u64) {
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(&value.to_ne_bytes(), offset as u64).unwrap();
}

/// The header's `flags` of the file at `path`.
fn flags(path: &Path) -> u64 {
    let mut head = [0u8; HEADER_SIZE_V1_0];
    File::open(path)
        .unwrap()
        .read_exact_at(&mut head, 0)
        .unwrap();
    perfabi::layout::header_from_bytes(&head).flags
}

/// A pid that names no process: a child's, waited for.
fn dead_pid() -> u64 {
    let mut child = std::process::Command::new("true").spawn().unwrap();
    let pid = child.id();
    child.wait().unwrap();
    u64::from(pid)
}

/// `chattr FLAG path`: whether it worked.
fn chattr(flag: &str, path: &Path) -> bool {
    std::process::Command::new("chattr")
        .arg(flag)
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// Takes `chattr +a` off the folder when dropped (a failed assertion
/// included), so the temporary folder can be removed.
struct AppendOnly(PathBuf);

impl Drop for AppendOnly {
    fn drop(&mut self) {
        chattr("-a", &self.0);
    }
}

/// Finding 1: a re-created segment whose publication fails loses the live
/// writer's file and hides its counts for good. The writer let go of the
/// damaged file's liveness lock before renaming the new file over it; when
/// the rename failed, the damaged file (`FLAG_LIVE_LOCK`, no lock held)
/// looked dead to a fold, which folded it, listed its identity
/// (`<pid>.<nonce>`) as folded and removed it; the next heartbeat created
/// the segment again under the same name, which readers then skipped (its
/// identity listed) and the next fold removed ("already folded"), and so
/// at every heartbeat. (The same happened without a failure when a fold
/// ran between the two steps.) Fixed: the damaged file's lock is held
/// until the new file has its name; a fold folds a file only if its name
/// still names it once its lock is seen released, and never removes a file
/// whose lock is held (§10, §15.5).
#[test]
fn finding_1_a_failed_republish_hides_no_live_writers_counts() {
    let test = "finding_1_a_failed_republish_hides_no_live_writers_counts";
    if !perfabi_test_harness::need_root(test) {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let (w, m) = counting(&dir, "app", 5);
    let path = w.path().unwrap().to_path_buf();
    // Damage: a fixed header word that readers do not check, so that the
    // damaged file stays readable (a fold could fold it).
    let start = std::mem::offset_of!(Header, writer_start_ns);
    let mut word = [0u8; 8];
    File::open(&path)
        .unwrap()
        .read_exact_at(&mut word, start as u64)
        .unwrap();
    poke(&path, start, u64::from_ne_bytes(word) + 1);
    // An append-only folder: files may be created in it, none renamed or
    // removed, so publishing the re-created segment fails.
    let guard = AppendOnly(dir.clone());
    if !chattr("+a", &dir) {
        // tests/setup installs e2fsprogs; the test folder is on a
        // filesystem with the flag (ext4 /tmp).
        assert!(std::env::var_os("CI").is_none(), "{test}: chattr +a failed");
        perfabi_test_harness::skip(test, "chattr +a is not supported here");
        return;
    }
    let h = w.heartbeat();
    drop(guard);
    assert!(
        matches!(h, Health::Damaged { .. }),
        "the re-created segment cannot be published: {h:?}"
    );
    assert_ne!(
        flags(&path) & FLAG_LIVE_LOCK,
        0,
        "the damaged file promised a lock"
    );
    let r = fold(&dir).unwrap();
    assert_eq!(
        r.folded, 0,
        "the live writer's damaged file is not folded: {r:?}"
    );
    let h = w.heartbeat();
    assert!(matches!(h, Health::Recreated { .. }), "{h:?}");
    // The re-created segment counts from zero.
    w.member_add(&m, 7).unwrap();
    let r = fold(&dir).unwrap();
    assert!(path.exists(), "the live writer's file stays ({r:?})");
    let s = read(&dir);
    assert_eq!(
        total(&s, "app.requests"),
        Some(Reading::Unsigned(7)),
        "the live writer's counts are read ({:?})",
        s.problems
    );
}

const ENV_FOLD_DIR: &str = "PERFABI_LIVE_LOCK_FOLD_DIR";

/// A fold of `$PERFABI_LIVE_LOCK_FOLD_DIR`, for finding 2 (which stops it
/// dead with `CRASH_ENV`).
#[test]
#[ignore = "a process of finding_2_a_live_writers_file_under_a_folded_identity_is_never_removed"]
fn folder() {
    let dir = std::env::var_os(ENV_FOLD_DIR).expect("run by finding 2 only");
    fold(Path::new(&dir)).unwrap();
}

/// Finding 2: the fold removed every listed file whose identity the kept
/// file lists ("folded by a fold that stopped before removing it"), even
/// one whose writer holds its liveness lock: a live writer's counts
/// deleted. Here a fold stopped dead after renaming the kept file (§15.5
/// step 5), and a live writer's file then took the folded file's name (as
/// finding 1 made one). Fixed: such a file stays, and is reported (§15.5
/// step 6).
#[test]
fn finding_2_a_live_writers_file_under_a_folded_identity_is_never_removed() {
    use std::os::unix::process::ExitStatusExt;
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let (live, _) = counting(&dir, "app", 4);
    let (dead, _) = counting(&dir, "app", 3);
    let folded = dead.path().unwrap().to_path_buf();
    dead.close();
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "folder", "--quiet"])
        .env(ENV_FOLD_DIR, &dir)
        .env(perfabi_shm::writer::fold::CRASH_ENV, "renamed")
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert_eq!(status.signal(), Some(9), "the fold stopped dead ({status})");
    assert!(folded.exists(), "folded, not yet removed");
    std::fs::rename(live.path().unwrap(), &folded).unwrap();
    let r = fold(&dir).unwrap();
    assert!(folded.exists(), "the live writer's file stays: {r:?}");
    assert!(
        r.left.iter().any(|l| l.contains("liveness lock")),
        "and is reported: {r:?}"
    );
    drop(live);
}

/// Finding 3: a writer that re-creates its segment (damaged by its
/// owner) while folds run. Holds since finding 1's fix: every fold either
/// sees the old file's lock held, or the name naming the new file; no
/// fold folds the live writer's counts or removes its file. Runs for a
/// time, not a number of rounds (the interleaving is the scheduler's).
#[test]
fn finding_3_folds_during_re_creation_never_take_a_live_writers_file() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let (w, m) = counting(&dir, "app", 0);
    let stop = std::sync::atomic::AtomicBool::new(false);
    let start = std::mem::offset_of!(Header, writer_start_ns);
    let (rounds, folds) = std::thread::scope(|s| {
        let folder = s.spawn(|| {
            let mut folds = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let r = fold(&dir).unwrap();
                assert_eq!(r.folded, 0, "a live writer's file was folded: {r:?}");
                folds += 1;
            }
            folds
        });
        let mut rounds = 0u32;
        let until = Deadline::after(Duration::from_secs(3));
        while !until.passed() {
            let path = w.path().unwrap().to_path_buf();
            poke(&path, start, u64::from(rounds) + 1);
            let h = w.heartbeat();
            assert!(matches!(h, Health::Recreated { .. }), "{h:?}");
            w.member_add(&m, 1).unwrap();
            rounds += 1;
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        (rounds, folder.join().unwrap())
    });
    println!("{rounds} re-creations beside {folds} folds");
    assert!(w.path().unwrap().exists(), "the live writer's file stays");
    // Each re-created segment counts from zero: its one add since.
    let s = read(&dir);
    assert_eq!(
        total(&s, "app.requests"),
        Some(Reading::Unsigned(1)),
        "the live writer's last count is read ({:?})",
        s.problems
    );
}

const ENV_SQUAT_DIR: &str = "PERFABI_LIVE_LOCK_SQUAT_DIR";

/// Another user for finding 4: read-locks the liveness lock's bytes of
/// every writer's temporary file it can open in `$PERFABI_LIVE_LOCK_SQUAT_DIR/segs`,
/// holds them, and prints how many it opened when `stop` appears in
/// `sig` (at most a minute).
#[test]
#[ignore = "a process of finding_4_another_user_cannot_keep_a_writer_from_its_lock"]
fn squatter() {
    use perfabi_shm::directory::lock::{try_lock_range, Want};
    use perfabi_shm::writer::live_lock::{LOCK_LEN, LOCK_START};
    let top = PathBuf::from(std::env::var_os(ENV_SQUAT_DIR).expect("run by finding 4 only"));
    let (dir, sig) = (top.join("segs"), top.join("sig"));
    let mut held = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    std::fs::write(sig.join("ready"), b"").unwrap();
    let until = Deadline::after(Duration::from_secs(60));
    while !sig.join("stop").exists() && !until.passed() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if !name.starts_with('.') || !name.ends_with(".tmp") || seen.contains(&name) {
                continue;
            }
            if let Ok(f) = File::open(e.path()) {
                seen.insert(name);
                if try_lock_range(&f, Want::Read, LOCK_START, LOCK_LEN).unwrap_or(false) {
                    held.push(f);
                }
            }
        }
    }
    println!("opened: {} locked: {}", seen.len(), held.len());
}

/// Finding 4: a writer's temporary file was created mode 0644 and filled
/// before its liveness lock was taken, so another local user could open it
/// and read-lock the lock's bytes first: the writer then took no lock, set
/// no `FLAG_LIVE_LOCK`, and was judged by its pid (wrong across pid
/// namespaces). Fixed: the file is created 0600, locked, then given its
/// readers' mode (§10, §11.1).
#[test]
fn finding_4_another_user_cannot_keep_a_writer_from_its_lock() {
    use std::io::Read;
    use std::os::unix::fs::PermissionsExt;
    let test = "finding_4_another_user_cannot_keep_a_writer_from_its_lock";
    if !perfabi_test_harness::need_root(test) {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = perfabi_test_harness::executable_copy(&std::env::current_exe().unwrap(), top.path());
    let dir = top.path().join("segs");
    perfabi_shm::directory::prepare(&dir).unwrap();
    let sig = top.path().join("sig");
    std::fs::create_dir(&sig).unwrap();
    std::fs::set_permissions(&sig, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut cmd = std::process::Command::new(&exe);
    cmd.args(["--ignored", "--exact", "squatter", "--nocapture", "--quiet"])
        .env(ENV_SQUAT_DIR, top.path())
        .stdout(std::process::Stdio::piped());
    perfabi_test_harness::as_other_user(&mut cmd);
    let mut child = perfabi_test_harness::KillOnDrop(cmd.spawn().unwrap());
    let until = Deadline::after(Duration::from_secs(30));
    while !sig.join("ready").exists() && !until.passed() {
        std::thread::sleep(Duration::from_millis(5));
    }
    until.assert(
        sig.join("ready").exists(),
        "the other user's process started",
    );
    // Segments of 8 MiB: filling one takes long enough for the other
    // user to find its temporary file.
    let big = Config {
        max_instances: 1 << 16,
        ..config()
    };
    let mut writers = Vec::new();
    let mut unlocked = Vec::new();
    let until = Deadline::after(Duration::from_secs(20));
    while writers.len() < 8 && !until.passed() {
        let w = Writer::create_in(&dir, "app", &big).unwrap();
        if flags(w.path().unwrap()) & FLAG_LIVE_LOCK == 0 {
            unlocked.push(w.path().unwrap().to_path_buf());
        }
        writers.push(w);
    }
    std::fs::write(sig.join("stop"), b"").unwrap();
    let mut said = String::new();
    child
        .0
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut said)
        .unwrap();
    let said = said
        .lines()
        .find(|l| l.starts_with("opened: "))
        .unwrap_or("")
        .to_string();
    println!(
        "{} writers; the other user's process: {said}",
        writers.len()
    );
    assert!(writers.len() >= 2, "writers were created");
    assert!(
        unlocked.is_empty(),
        "writers without their lock ({said}): {unlocked:?}"
    );
    // It may open a temporary file once it is locked and given its
    // readers' mode, never lock it.
    assert!(said.ends_with(" locked: 0"), "{said}");
}

/// Finding 5: a writer that promised its lock (`FLAG_LIVE_LOCK`) but whose
/// lock cannot be asked about was judged by the pid rule, which is wrong
/// for a writer of another pid namespace (its pid names nothing here, as
/// the header below says): a fold folded it, a reader called it dead.
/// Fixed: such a writer is unknown, never gone (§10).
#[test]
fn finding_5_a_lock_not_to_be_asked_about_is_not_a_dead_writer() {
    let top = tempfile::tempdir().unwrap();
    let path = top.path().join("w.perfabi");
    let w = Writer::create(&path, &config()).unwrap();
    assert_ne!(flags(&path) & FLAG_LIVE_LOCK, 0);
    // Its pid as a writer of another pid namespace shows it here: none.
    poke(&path, std::mem::offset_of!(Header, writer_pid), dead_pid());
    // The fold's rule, asked through a descriptor no lock can be asked on
    // (`O_PATH`: fcntl fails).
    let opath = File::from(
        rustix::fs::open(&path, rustix::fs::OFlags::PATH, rustix::fs::Mode::empty()).unwrap(),
    );
    let (info, liveness) = Segment::open(&path).unwrap().status().unwrap();
    assert_eq!(liveness, Liveness::Alive, "its lock is held");
    assert!(
        !writer_dead(&opath, &info),
        "a fold never takes a writer it cannot ask about for dead"
    );
    // A reader whose path names no file any more: it keeps its mapping,
    // and cannot ask the lock.
    let mut s = Segment::open(&path).unwrap();
    std::fs::remove_file(&path).unwrap();
    s.refresh().unwrap();
    assert_eq!(
        s.status().unwrap().1,
        Liveness::Alive,
        "a reader never takes a writer it cannot ask about for dead"
    );
    drop(w);
}
