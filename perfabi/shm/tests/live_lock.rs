//! The writer's liveness lock (`spec/PERFABI.md` §10): a writer holds an
//! open-file-description write lock on its segment's first 8 bytes for its
//! whole life (`FLAG_LIVE_LOCK`); the kernel lets it go when the writer
//! dies, however it dies; a reader's read lock never makes a dead writer
//! look alive; and a child of `fork()` that lets go of its copy
//! ([`Writer::abandon_in_fork_child`]) leaves the lock to its parent alone.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use perfabi::layout::{FLAG_LIVE_LOCK, HEADER_SIZE_V1_0};
use perfabi_shm::directory::lock::{try_lock_range, Want};
use perfabi_shm::writer::live_lock::{alive, LOCK_LEN, LOCK_START};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::Deadline;

const ENV_DIR: &str = "PERFABI_LIVE_LOCK_DIR";
const ENV_ABANDON: &str = "PERFABI_LIVE_LOCK_ABANDON";

fn config() -> Config {
    Config {
        nr_cpus: Some(1),
        max_instances: 8,
        damon_capacity: 0,
        // No thread of its own: the forking writer below forks a process
        // with one thread.
        auto_heartbeat: false,
        ..Config::default()
    }
}

/// The header's `flags`.
fn flags(file: &File) -> u64 {
    let mut head = [0u8; HEADER_SIZE_V1_0];
    file.read_exact_at(&mut head, 0).unwrap();
    perfabi::layout::header_from_bytes(&head).flags
}

/// A writer process for the test below: creates `w.perfabi` in
/// `$PERFABI_LIVE_LOCK_DIR`, forks a child that lets go of its copy of the
/// lock if `$PERFABI_LIVE_LOCK_ABANDON` is set and then waits to be
/// killed, writes the child's pid to `ready`, and waits to be killed (at
/// most a minute).
#[test]
#[ignore = "a process of a_killed_writers_lock_goes_with_it_and_a_fork_child_lets_go_of_its_copy"]
fn forking_writer() {
    let dir = PathBuf::from(std::env::var_os(ENV_DIR).expect("run by the test below only"));
    let abandon = std::env::var_os(ENV_ABANDON).is_some();
    let w = Writer::create(dir.join("w.perfabi"), &config()).unwrap();
    // SAFETY: the child runs only async-signal-safe code (an atomic swap,
    // close(2), pause(2)), as a child of a multithreaded process must.
    let child = unsafe { libc::fork() };
    assert!(child >= 0, "fork: {}", std::io::Error::last_os_error());
    if child == 0 {
        if abandon {
            w.abandon_in_fork_child();
        }
        loop {
            // SAFETY: pause(2) has no preconditions.
            unsafe { libc::pause() };
        }
    }
    std::fs::write(dir.join("ready"), child.to_string()).unwrap();
    std::thread::sleep(Duration::from_secs(60));
    drop(w);
}

fn kill(pid: i32) {
    // SAFETY: kill(2) has no memory preconditions.
    unsafe { libc::kill(pid, libc::SIGKILL) };
}

/// What the lock says of the segment at `path`, asked through `file`,
/// once it says `want` (within 30 s: a dying process lets go of its locks
/// as it exits).
fn until(file: &File, want: Option<bool>, what: &str) {
    let until = Deadline::after(Duration::from_secs(30));
    let f = flags(file);
    while alive(file, f) != want && !until.passed() {
        std::thread::sleep(Duration::from_millis(5));
    }
    until.assert(alive(file, f) == want, format_args!("{what}: {want:?}"));
}

#[test]
fn a_killed_writers_lock_goes_with_it_and_a_fork_child_lets_go_of_its_copy() {
    for abandon in [true, false] {
        let top = tempfile::tempdir().unwrap();
        let dir: &Path = top.path();
        let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
        cmd.args(["--ignored", "--exact", "forking_writer", "--quiet"])
            .env(ENV_DIR, dir)
            .stdout(std::process::Stdio::null());
        if abandon {
            cmd.env(ENV_ABANDON, "1");
        }
        let mut writer = cmd.spawn().unwrap();
        let started = Deadline::after(Duration::from_secs(30));
        while !dir.join("ready").exists() && !started.passed() {
            std::thread::sleep(Duration::from_millis(5));
        }
        started.assert(dir.join("ready").exists(), "the writer started");
        let child: i32 = std::fs::read_to_string(dir.join("ready"))
            .unwrap()
            .parse()
            .unwrap();
        let file = File::open(dir.join("w.perfabi")).unwrap();
        assert_ne!(
            flags(&file) & FLAG_LIVE_LOCK,
            0,
            "the writer promises a lock"
        );
        assert_eq!(alive(&file, flags(&file)), Some(true), "abandon {abandon}");
        // No reader takes a lock on a live writer's bytes.
        assert!(!try_lock_range(&file, Want::Read, LOCK_START, LOCK_LEN).unwrap());
        writer.kill().unwrap();
        writer.wait().unwrap();
        if abandon {
            until(&file, Some(false), "the killed writer's lock went with it");
            // Anyone may read-lock a dead writer's bytes: that never makes
            // it look alive.
            let other = File::open(dir.join("w.perfabi")).unwrap();
            assert!(try_lock_range(&other, Want::Read, LOCK_START, LOCK_LEN).unwrap());
            assert_eq!(alive(&file, flags(&file)), Some(false));
        } else {
            // A child that did not let go holds the parent's share: the
            // parent's death is seen only when the child's is (delayed,
            // never lost).
            assert_eq!(alive(&file, flags(&file)), Some(true));
        }
        kill(child);
        until(&file, Some(false), "the child's copy went with it");
    }
}
