//! perfabi-exportd against a hostile local user and hostile files
//! (`spec/PERFABI.md` §11): planted lock files (links, other users' files,
//! escapes), a lock held or removed by others, failures that are not
//! another daemon, a full tmpfs, special and oversized replay inputs,
//! configuration refused before anything exists, and a segment truncated
//! under the daemon.
//!
//! The two-user cases play the other user with a throw-away uid
//! (`perfabi_test_harness::OTHER_UID`) on a tmpfs the test mounts.

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use perfabi_reader::Segment;
use perfabi_test_harness::{self as harness, Tmpfs, OTHER_UID};
use support::*;

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The daemon on `path`, expected to refuse to start (stopped after 30 s
/// if it starts: the refusal must come first, however busy the machine).
fn try_start(path: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["--path", path.to_str().unwrap(), "--interval", "0.1"];
    args.extend_from_slice(extra);
    let f = harness::run_limited(Command::new(bin()).args(&args), Duration::from_secs(30));
    std::process::Output {
        status: f.status.unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            std::process::ExitStatus::from_raw(9)
        }),
        stdout: f.stdout.into_bytes(),
        stderr: f.stderr.into_bytes(),
    }
}

#[test]
fn a_planted_lock_link_never_clobbers_or_creates_its_target() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let lock = dir.path().join("seg.lock");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"root's file").unwrap();
    std::os::unix::fs::symlink(&victim, &lock).unwrap();
    let out = try_start(&path, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("symbolic link"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&victim).unwrap(), b"root's file");
    assert!(!path.exists(), "a segment was created");

    // A dangling link: its target must not come into existence.
    std::fs::remove_file(&lock).unwrap();
    let target = dir.path().join("made-by-root");
    std::os::unix::fs::symlink(&target, &lock).unwrap();
    let out = try_start(&path, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(!target.exists(), "the daemon created the link's target");

    // A hard link to another file: refused, the file untouched.
    std::fs::remove_file(&lock).unwrap();
    std::fs::hard_link(&victim, &lock).unwrap();
    let out = try_start(&path, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("hard links"), "{}", stderr(&out));
    assert_eq!(std::fs::read(&victim).unwrap(), b"root's file");
}

#[test]
fn another_users_lock_is_refused_and_its_content_never_printed() {
    if !harness::need_root("another_users_lock_is_refused_and_its_content_never_printed") {
        return;
    }
    let fs = Tmpfs::mount("16m");
    let path = fs.join("seg");
    let lock = fs.join("seg.lock");
    // The other user plants a lock with terminal escapes in it, and holds it.
    std::fs::write(&lock, b"\x1b]0;pwned\x07\x1b[2J 4242").unwrap();
    harness::give_to_other_user(&lock);
    let holder = harness::KillOnDrop(
        harness::as_other_user(Command::new("flock").arg(&lock).args(["sleep", "30"]))
            .spawn()
            .unwrap(),
    );
    wait_until_held(&lock);
    let out = try_start(&path, &[]);
    let msg = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    assert!(msg.contains(&format!("uid {OTHER_UID}")), "{msg}");
    assert!(
        !msg.contains('\x1b'),
        "escapes reached the terminal: {msg:?}"
    );
    assert_eq!(
        std::fs::read(&lock).unwrap(),
        b"\x1b]0;pwned\x07\x1b[2J 4242",
        "another user's file was written"
    );
    drop(holder);
    // When the other user deletes it, the daemon starts on a lock of its own.
    std::fs::remove_file(&lock).unwrap();
    let child = start(&path, &[]);
    assert_eq!(std::fs::metadata(&lock).unwrap().uid(), 0);
    stop(child);

    // Our own lock held by a process whose pid it does not plainly name:
    // "pid unknown", never the raw content.
    std::fs::write(&lock, b"\x1b[31mevil").unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o600)).unwrap();
    let holder = harness::KillOnDrop(
        Command::new("flock")
            .arg(&lock)
            .args(["sleep", "30"])
            .spawn()
            .unwrap(),
    );
    wait_until_held(&lock);
    let out = try_start(&path, &[]);
    let msg = stderr(&out);
    assert_eq!(out.status.code(), Some(3), "{msg}");
    assert!(
        msg.contains("pid unknown") && !msg.contains('\x1b'),
        "{msg:?}"
    );
    drop(holder);
}

/// Waits until a process holds `lock` (flock(1) cannot take it at once);
/// a fixed pause would assume the holder got the CPU in time.
fn wait_until_held(lock: &Path) {
    let held = || {
        !Command::new("flock")
            .args(["-n"])
            .arg(lock)
            .arg("true")
            .status()
            .unwrap()
            .success()
    };
    let until = harness::deadline::Deadline::witness();
    while !held() && !until.passed() {
        std::thread::sleep(Duration::from_millis(20));
    }
    until.assert(held(), format_args!("{} held", lock.display()));
}

#[test]
fn no_other_user_can_open_the_lock_and_hold_it() {
    if !harness::need_root("no_other_user_can_open_the_lock_and_hold_it") {
        return;
    }
    let fs = Tmpfs::mount("16m");
    let path = fs.join("seg");
    let child = start(&path, &[]);
    let lock = fs.join("seg.lock");
    let mode = std::fs::metadata(&lock).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "lock mode {mode:o}");
    let tried = harness::as_other_user(Command::new("flock").args(["-n"]).arg(&lock).arg("true"))
        .output()
        .unwrap();
    assert!(
        !tried.status.success(),
        "another user could open (and hold) the lock"
    );
    stop(child);
    assert!(
        !lock.exists(),
        "the lock file is removed when the daemon stops"
    );
}

#[test]
fn a_removed_lock_never_leaves_two_daemons_writing_one_path() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let first = start(&path, &[]);
    std::fs::remove_file(dir.path().join("seg.lock")).unwrap();
    let second = start_replacing(&path);
    let out = wait_exit(first, Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("removed or replaced"),
        "{}",
        stderr(&out)
    );
    let out = stop(second);
    assert!(out.status.success(), "{}", stderr(&out));
}

/// Starts a second daemon on `path`, which exists already: ready when the
/// segment at the path is a new file.
fn start_replacing(path: &Path) -> Running {
    let before = std::fs::metadata(path).unwrap().ino();
    spawn_until(path, &[], || {
        std::fs::metadata(path).map(|m| m.ino()).ok() != Some(before)
    })
}

fn wait_exit(mut r: Running, limit: Duration) -> std::process::Output {
    let end = Instant::now() + limit;
    while r.child().try_wait().unwrap().is_none() {
        assert!(Instant::now() < end, "the daemon kept running");
        std::thread::sleep(Duration::from_millis(20));
    }
    r.wait()
}

#[test]
fn a_lock_that_cannot_be_made_is_not_another_daemon() {
    if !harness::need_root("a_lock_that_cannot_be_made_is_not_another_daemon") {
        return;
    }
    let fs = Tmpfs::mount("16m");
    fs.remount("ro");
    let out = try_start(&fs.join("seg"), &[]);
    let msg = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("Read-only file system"), "{msg}");
    assert!(!msg.contains("another perfabi-exportd"), "{msg}");
}

#[test]
fn a_full_tmpfs_is_reported_at_start_as_no_space() {
    if !harness::need_root("a_full_tmpfs_is_reported_at_start_as_no_space") {
        return;
    }
    let fs = Tmpfs::mount("256k");
    let out = try_start(&fs.join("seg"), &[]);
    let msg = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{msg}");
    assert!(msg.contains("No space left on device"), "{msg}");
    assert!(!msg.contains("truncated"), "{msg}");
    let left: Vec<_> = std::fs::read_dir(fs.path()).unwrap().collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

#[test]
fn special_links_and_oversized_replay_inputs_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let fifo = dir.path().join("fifo");
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from(0o644)).unwrap();
    let link = dir.path().join("link");
    std::os::unix::fs::symlink(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("records/guest-6.12-vaddr-hot4of64.trace"),
        &link,
    )
    .unwrap();
    // 1.6 MB of zlib that decompresses to 1.6 GB: a damo json_compressed bomb.
    let bomb = dir.path().join("bomb");
    {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(
            std::fs::File::create(&bomb).unwrap(),
            flate2::Compression::default(),
        );
        z.write_all(b"[").unwrap();
        let spaces = vec![b' '; 1 << 20];
        for _ in 0..1600 {
            z.write_all(&spaces).unwrap();
        }
        z.finish().unwrap();
    }
    let big = dir.path().join("big");
    std::fs::File::create(&big)
        .unwrap()
        .set_len(65 << 20)
        .unwrap();
    for (input, why) in [
        (fifo.as_path(), "FIFO"),
        (Path::new("/dev/zero"), "character device"),
        (link.as_path(), "symbolic link"),
        (bomb.as_path(), "decompresses to more than"),
        (big.as_path(), "more than the limit"),
    ] {
        let f = harness::run_measured(
            &bin(),
            &[
                "--path".into(),
                path.display().to_string(),
                "--replay".into(),
                input.display().to_string(),
            ],
            Duration::from_secs(20),
        );
        assert!(f.status.is_some(), "--replay {} hung", input.display());
        assert_eq!(f.code(), Some(2), "{}: {}", input.display(), f.stderr);
        assert!(f.stderr.contains(why), "{}", f.stderr);
        assert!(
            f.max_rss_kib < 256 << 10,
            "--replay {}: {} KiB",
            input.display(),
            f.max_rss_kib
        );
        println!(
            "--replay {}: exit 2 in {:?}, peak {} KiB: {}",
            input.display(),
            f.elapsed,
            f.max_rss_kib,
            f.stderr.trim()
        );
        assert!(!path.exists() && !dir.path().join("seg.lock").exists());
    }
}

#[test]
fn a_refused_configuration_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let open = dir.path().join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let seg = dir.path().join("seg").display().to_string();
    let folder = format!("{}/", dir.path().display());
    let in_open = open.join("seg").display().to_string();
    let record = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("records/guest-6.12-vaddr-hot4of64.trace")
        .display()
        .to_string();
    for (args, why) in [
        (
            vec!["--path", &seg, "--vmstat", "pgfault", "--vmstat", "pgfault"],
            "given twice",
        ),
        (vec!["--path", &seg, "--max-instances", "4"], "too small"),
        (vec!["--path", &folder], "names a folder"),
        (vec!["--path", dir.path().to_str().unwrap()], "is a folder"),
        (vec!["--path", &in_open], "others could replace"),
        (
            vec![
                "--path",
                &seg,
                "--replay",
                &record,
                "--replay-speed",
                "1e300",
            ],
            "--replay-speed",
        ),
    ] {
        let out = run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(why), "{args:?}: {}", stderr(&out));
        assert_eq!(stderr(&out).lines().count(), 1, "{}", stderr(&out));
        let made: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .filter(|n| n != "open")
            .collect();
        assert!(made.is_empty(), "{args:?} created {made:?}");
        assert_eq!(std::fs::read_dir(&open).unwrap().count(), 0);
    }
}

#[test]
fn a_segment_truncated_under_the_daemon_is_created_again() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let child = start(&path, &[]);
    let mut seg = Segment::open(&path).unwrap();
    let epoch = seg.info().unwrap().header.epoch;
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(0).unwrap();
    f.set_len(len).unwrap();
    drop(f);
    let end = Instant::now() + Duration::from_secs(30);
    let new_epoch = loop {
        let now = Segment::open(&path).and_then(|mut s| s.info());
        match now {
            Ok(i) if i.header.epoch != epoch => break i.header.epoch,
            _ => {
                assert!(
                    Instant::now() < end,
                    "the daemon did not create its segment again"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    };
    // The running reader follows too.
    let end = Instant::now() + Duration::from_secs(30);
    while member(&mut seg, "kernel.cpu.time", "user").is_err() {
        assert!(Instant::now() < end, "the running reader did not follow");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(seg.info().unwrap().header.epoch, new_epoch);
    let out = stop(child);
    assert!(out.status.success());
    assert!(
        stderr(&out).contains("created it again"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_link_of_another_user_on_the_way_never_leads_the_daemon_elsewhere() {
    if !harness::need_root("a_link_of_another_user_on_the_way_never_leads_the_daemon") {
        return;
    }
    let fs = Tmpfs::mount("16m");
    let root_dir = tempfile::tempdir().unwrap();
    let victim = root_dir.path().join("victim");
    std::fs::write(&victim, b"precious").unwrap();
    let app = fs.join("app");
    std::os::unix::fs::symlink(root_dir.path(), &app).unwrap();
    std::os::unix::fs::lchown(&app, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    let out = try_start(&app.join("victim"), &[]);
    let msg = stderr(&out);
    assert_eq!(out.status.code(), Some(2), "{msg}");
    assert!(msg.contains("symbolic link of uid"), "{msg}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
    let left: Vec<_> = std::fs::read_dir(root_dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        left,
        ["victim"],
        "the daemon created files in root's folder"
    );
}

#[test]
fn a_daemon_of_another_user_refuses_root_s_lock_as_a_refusal() {
    if !harness::need_root("a_daemon_of_another_user_refuses_root_s_lock") {
        return;
    }
    let fs = Tmpfs::mount("64m");
    let exe = harness::executable_copy(&bin(), fs.path());
    let path = fs.join("seg");
    let root = start(&path, &[]);
    let out = harness::run_limited(
        harness::as_other_user(
            Command::new(&exe)
                .arg("--path")
                .arg(&path)
                .args(["--interval", "0.1"]),
        ),
        Duration::from_secs(30),
    );
    assert_eq!(out.code(), Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("belongs to uid 0"), "{}", out.stderr);
    assert_eq!(out.stderr.lines().count(), 1, "{}", out.stderr);
    stop(root);
}

#[test]
fn a_large_valid_damo_record_costs_memory_in_proportion() {
    // 900 aggregations of 1,000 regions (DAMON's default max_nr_regions):
    // 52 MiB of JSON, under the default limit. As a tree of JSON values it
    // took about 16 times that.
    let dir = tempfile::tempdir().unwrap();
    let rec = dir.path().join("big.damo");
    {
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(
            std::fs::File::create(&rec).unwrap(),
            flate2::Compression::default(),
        );
        z.write_all(br#"[{"target_id": 0, "snapshots": ["#).unwrap();
        for s in 0..900u64 {
            let sep = if s == 0 { "" } else { "," };
            write!(
                z,
                r#"{sep}{{"end_time": {}, "regions": ["#,
                (s + 1) * 100_000_000
            )
            .unwrap();
            for i in 0..1000u64 {
                let sep = if i == 0 { "" } else { "," };
                write!(
                    z,
                    r#"{sep}{{"start":{},"end":{},"nr_accesses":1,"age":0}}"#,
                    i * 4096,
                    (i + 1) * 4096
                )
                .unwrap();
            }
            z.write_all(b"]}").unwrap();
        }
        z.write_all(b"]}]").unwrap();
        z.finish().unwrap();
    }
    let path = dir.path().join("seg");
    // Stopped once it publishes (it parsed the whole record), not after a
    // fixed time: a busy machine can make the parse take several seconds.
    // Its peak memory is then its VmHWM (the exec'd daemon's alone).
    let record = rec.display().to_string();
    let args = ["--replay", &record, "--replay-speed", "1000"];
    let child = spawn_until(&path, &args, || {
        Segment::open(&path)
            .ok()
            .and_then(|mut s| s.counter("exportd.damon_aggregations").ok())
            .is_some_and(|c| c.total >= 1)
    });
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    let max_rss_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or_else(|| panic!("no VmHWM in {status}"));
    let out = stop(child);
    let log = stderr(&out);
    println!(
        "a 52 MiB damo record: peak {} MiB ({:?}): {log}",
        max_rss_kib >> 10,
        out.status,
    );
    assert!(out.status.success(), "{log}");
    assert!(log.contains("replaying 900 aggregations"), "{log}");
    assert!(!log.contains("skipped"), "{log}");
    assert!(max_rss_kib > 0, "not measured: {status}");
    assert!(
        max_rss_kib < 256 << 10,
        "{} MiB for a 52 MiB record",
        max_rss_kib >> 10
    );
}
