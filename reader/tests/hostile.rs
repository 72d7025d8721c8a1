//! The reader and perfabi-cat against a hostile local user and hostile
//! files (`spec/PERFABI.md` §11): special files and links at the path,
//! another user's segments and forged writer claims, a sparse file with the
//! largest legal geometry, a thousand truncated segments, a segment zeroed
//! and grown again, and absurd command-line numbers.
//!
//! The two-user cases play the other user with a throw-away uid
//! (`perfabi_test_harness::OTHER_UID`) on a tmpfs the test mounts.

#[path = "support/giant.rs"]
mod giant;
mod support;

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::Duration;

use perfabi::layout::{FLAG_KERNEL, HEADER_FLAGS_WORD};
use perfabi::Semantics;
use perfabi_reader::{Error, Liveness, Options, Segment, Trust};
use perfabi_shm::writer::{Config, Health, Writer};
use perfabi_test_harness::{self as harness, Tmpfs, OTHER_UID};
use support::*;

fn cat_bin() -> std::path::PathBuf {
    harness::workspace::perfabi_cat()
}

/// Run by other tests as a child writer process (see `support`).
#[test]
#[ignore = "helper: the writer process that other tests start and kill"]
fn child_writer() {
    run_child_writer();
}

fn small() -> Config {
    Config {
        max_instances: 16,
        damon_capacity: 16,
        ..Config::default()
    }
}

/// Every mode of perfabi-cat, as arguments after the path.
fn modes(record_to: &Path) -> Vec<Vec<String>> {
    let r = record_to.display().to_string();
    [
        vec![],
        vec!["--cpu"],
        vec!["--json"],
        vec!["--openmetrics"],
        vec!["--openmetrics", "--cpu"],
        vec!["--damon"],
        vec!["--damon", "--json"],
        vec!["--info"],
        vec!["--info", "--json"],
        vec!["--watch", "0.1", "--count", "2"],
        vec!["--watch", "0.1", "--count", "2", "--json"],
        vec!["--record", &r, "--watch", "0.1", "--count", "2"],
    ]
    .into_iter()
    .map(|m| m.into_iter().map(String::from).collect())
    .collect()
}

fn strs(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}

fn cat(path: &Path, args: &[String]) -> harness::Finished {
    let mut all = vec![path.display().to_string()];
    all.extend_from_slice(args);
    harness::run_measured(&cat_bin(), &all, Duration::from_secs(20))
}

#[test]
fn a_fifo_at_the_path_is_refused_at_once_in_every_mode() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("seg");
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from(0o644)).unwrap();
    for m in modes(&dir.path().join("rec")) {
        let f = cat(&fifo, &m);
        assert!(f.status.is_some(), "perfabi-cat {m:?} hung on a FIFO");
        assert_eq!(f.code(), Some(4), "{m:?}: {}", f.stderr);
        assert!(
            f.stderr.contains("is a FIFO, not a perfabi segment"),
            "{}",
            f.stderr
        );
        assert_eq!(f.stderr.lines().count(), 1, "{}", f.stderr);
    }
    assert!(matches!(
        Segment::open(&fifo),
        Err(Error::NotASegmentFile(_, "a FIFO"))
    ));
    // Other things that are not segments: each a one-line refusal, exit 4
    // (not "No such device", not "truncated ... retry" with exit 5).
    let empty = dir.path().join("empty");
    let short = dir.path().join("short");
    std::fs::write(&empty, b"").unwrap();
    std::fs::write(&short, [7u8; 100]).unwrap();
    for p in [&empty, &short] {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    }
    for (p, what) in [
        (Path::new("/dev/null"), "is a character device"),
        (Path::new("/dev/zero"), "is a character device"),
        (
            empty.as_path(),
            "too short to hold a segment header, not a perfabi segment",
        ),
        (
            short.as_path(),
            "too short to hold a segment header, not a perfabi segment",
        ),
    ] {
        let f = cat(p, &[]);
        assert_eq!(f.code(), Some(4), "{}: {}", p.display(), f.stderr);
        assert!(f.stderr.contains(what), "{}", f.stderr);
        assert_eq!(f.stderr.lines().count(), 1, "{}", f.stderr);
    }
    // A directory is read as a directory of segments (spec §15): none of
    // this one's files is named as a segment (§15.2), so none is opened
    // (the FIFO never blocks) and the read succeeds with nothing merged.
    let f = cat(dir.path(), &[]);
    assert_eq!(f.code(), Some(0), "{}", f.stderr);
}

#[test]
fn a_symbolic_link_at_the_path_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let real = dir.path().join("real");
    let w = Writer::create(&real, &small()).unwrap();
    w.add("x", "", Semantics::Counter).unwrap();
    let link = dir.path().join("seg");
    std::os::unix::fs::symlink(&real, &link).unwrap();
    assert!(matches!(Segment::open(&link), Err(Error::Symlink(_))));
    let f = cat(&link, &[]);
    assert_eq!(f.code(), Some(4), "{}", f.stderr);
    assert!(f.stderr.contains("symbolic link"), "{}", f.stderr);
    // --record never follows a planted link either: the target is untouched.
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"keep").unwrap();
    let rec = dir.path().join("rec");
    std::os::unix::fs::symlink(&victim, &rec).unwrap();
    let f = cat(
        &real,
        &strs(&["--record", rec.to_str().unwrap(), "--count", "1"]),
    );
    assert_eq!(f.code(), Some(2), "{}", f.stderr);
    assert!(f.stderr.contains("symbolic link"), "{}", f.stderr);
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
}

#[test]
fn another_users_segment_is_refused_unless_trusted_and_its_writer_must_be_that_user() {
    if !harness::need_root("another_users_segment_is_refused_unless_trusted") {
        return;
    }
    let fs = Tmpfs::mount("64m");
    let exe = harness::executable_copy(&std::env::current_exe().unwrap(), fs.path());
    let path = fs.join("seg");
    let _child = harness::KillOnDrop(spawn_writer_with(&path, 100, &exe, |c| {
        harness::as_other_user(c);
    }));
    // Refused by default: the reader trusts its own uid and root only.
    let e = Segment::open(&path).err().expect("refused");
    assert!(matches!(e, Error::Untrusted { uid: OTHER_UID, .. }), "{e}");
    let f = cat(&path, &[]);
    assert_eq!(f.code(), Some(4), "{}", f.stderr);
    assert!(
        f.stderr.contains(&format!("uid {OTHER_UID}")),
        "{}",
        f.stderr
    );
    // Trusted explicitly: read, and its writer (running as the owner) alive.
    let mut seg = Segment::open_with(
        &path,
        Options {
            trust: Trust::Also(vec![OTHER_UID]),
            ..Options::default()
        },
    )
    .unwrap();
    let info = seg.info().unwrap();
    assert_eq!(info.owner, OTHER_UID);
    assert_eq!(info.liveness, Liveness::Alive);
    let uid = OTHER_UID.to_string();
    let f = cat(&path, &strs(&["--info", "--trust-uid", &uid]));
    assert_eq!(f.code(), Some(0), "{}", f.stderr);
    assert!(
        f.stdout
            .contains(&format!("owner:              uid {OTHER_UID}")),
        "{}",
        f.stdout
    );
}

/// A segment file owned by the other user whose header claims `claim`:
/// (flags, writer pid, writer start).
fn forged(fs: &Tmpfs, name: &str, flags: u64, pid: u64, start_ns: u64) -> std::path::PathBuf {
    let p = fs.join(name);
    write_claimed_segment(&p, flags, pid, start_ns);
    harness::give_to_other_user(&p);
    p
}

#[test]
fn a_forged_kernel_flag_or_another_users_pid_is_not_believed() {
    if !harness::need_root("a_forged_kernel_flag_or_another_users_pid_is_not_believed") {
        return;
    }
    let fs = Tmpfs::mount("16m");
    let init_start = perfabi_shm::host::process_start_ns(Some(1)).unwrap();
    let trusting = Options {
        trust: Trust::Also(vec![OTHER_UID]),
        require_live: false,
        ..Options::default()
    };
    for (name, flags, pid, start) in [
        ("kernel-flag", FLAG_KERNEL, 0, 0),
        ("pid-of-init", 0, 1, init_start),
        ("pid-of-init-kernel-flag", FLAG_KERNEL, 1, init_start),
    ] {
        let p = forged(&fs, name, flags, pid, start);
        // Never shown as the kernel or as alive, even when its owner is trusted.
        let mut seg = Segment::open_with(&p, trusting.clone()).unwrap();
        let l = seg.info().unwrap().liveness;
        assert!(matches!(l, Liveness::Dead { .. }), "{name}: {l:?}");
        let uid = OTHER_UID.to_string();
        let f = cat(&p, &strs(&["--info", "--trust-uid", &uid]));
        assert!(f.stdout.contains("Dead"), "{name}: {}", f.stdout);
        let f = cat(
            &p,
            &strs(&["--watch", "0.1", "--count", "1", "--trust-uid", &uid]),
        );
        assert_eq!(
            f.code(),
            Some(5),
            "{name}: --watch accepted a forged writer: {}",
            f.stdout
        );
        // And by default it is not read at all.
        assert!(matches!(Segment::open(&p), Err(Error::Untrusted { .. })));
    }
}

#[test]
fn a_sparse_file_of_the_largest_geometry_allocates_nothing_in_any_mode() {
    if !harness::need_root("a_sparse_file_of_the_largest_geometry_allocates_nothing") {
        return;
    }
    let fs = Tmpfs::mount("64m");
    let path = fs.join("giant");
    let size = giant::sparse_giant(&path);
    let used = fs.used_bytes();
    assert!(used <= 16 << 10, "the file holds {used} bytes");
    let rec = fs.join("rec");
    for max in ["4G", "1T"] {
        for m in modes(&rec) {
            let mut args = strs(&["--max-size", max]);
            args.extend(m.iter().cloned());
            let f = cat(&path, &args);
            assert!(f.status.is_some(), "perfabi-cat {args:?} hung");
            assert_eq!(f.code(), Some(4), "{args:?}: {}", f.stderr);
            let why = if max == "4G" {
                "more than the limit"
            } else {
                "has a hole"
            };
            assert!(f.stderr.contains(why), "{args:?}: {}", f.stderr);
            assert_eq!(
                fs.used_bytes(),
                used,
                "perfabi-cat {args:?} made tmpfs allocate memory"
            );
            println!(
                "sparse {size}-byte segment, perfabi-cat {args:?}: exit 4 in {:?}, peak {} KiB",
                f.elapsed, f.max_rss_kib
            );
        }
    }
    let e = Segment::open_with(
        &path,
        Options {
            max_segment_bytes: u64::MAX,
            ..Options::default()
        },
    )
    .err()
    .unwrap();
    // Its data ends after the header page and the first table page.
    assert!(matches!(e, Error::Sparse { at: 8192, .. }), "{e}");
    assert!(matches!(Segment::open(&path), Err(Error::TooLarge { .. })));
    assert_eq!(fs.used_bytes(), used);
}

#[test]
fn a_thousand_mapped_segments_each_truncated_kill_no_process() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let cfg = Config {
        nr_cpus: Some(1),
        max_instances: 1,
        damon_capacity: 0,
        method: perfabi_shm::writer::MethodChoice::Lock,
        ..Config::default()
    };
    let lenient = Options {
        require_live: false,
        ..Options::default()
    };
    let mut readers = Vec::new();
    for i in 0..1000i64 {
        let p = dir.path().join(format!("seg{i}"));
        let w = Writer::create(&p, &cfg).unwrap();
        let id = w.add("x", "", Semantics::Counter).unwrap();
        w.adjust(id, i).unwrap();
        drop(w);
        let mut seg = Segment::open_with(&p, lenient.clone()).unwrap();
        assert_eq!(seg.counter("x").unwrap().total, i as u64);
        readers.push((p, seg));
    }
    for (p, _) in &readers {
        std::fs::OpenOptions::new()
            .write(true)
            .open(p)
            .unwrap()
            .set_len(0)
            .unwrap();
    }
    // Every read touches truncated pages (a SIGBUS each, caught by the
    // guard): each must be an error, and the process must live.
    let mut kinds = std::collections::BTreeMap::new();
    for (p, seg) in &mut readers {
        let e = seg
            .snapshot()
            .err()
            .unwrap_or_else(|| panic!("{}", p.display()));
        assert!(
            matches!(e, Error::Truncated(_) | Error::NotASegmentFile(..)),
            "{e}"
        );
        *kinds.entry(e.code()).or_insert(0) += 1;
    }
    println!("1000 mapped segments truncated: every read refused ({kinds:?}), the process lives");
}

#[test]
fn a_segment_zeroed_and_grown_again_is_never_read_as_valid() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &small()).unwrap();
    let id = w.add("x", "", Semantics::Counter).unwrap();
    w.adjust(id, 5).unwrap();
    let mut seg = Segment::open(&path).unwrap();
    assert_eq!(seg.counter("x").unwrap().total, 5);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(0).unwrap();
    f.set_len(len).unwrap();
    // The running reader: an error, never "generation 0, no counters".
    let e = seg.snapshot().expect_err("a zeroed header read as valid");
    assert!(
        matches!(
            e,
            Error::HeaderChanged(_) | Error::Sparse { .. } | Error::Abi(perfabi::Error::BadMagic)
        ),
        "{e}"
    );
    // A fresh reader: its header is zeros (and the file has holes now).
    assert!(matches!(
        Segment::open(&path),
        Err(Error::Abi(perfabi::Error::BadMagic) | Error::Sparse { .. })
    ));
    // The writer notices and creates its segment again; readers follow.
    let old = w.epoch();
    assert!(matches!(w.heartbeat(), Health::Recreated { .. }));
    assert_ne!(w.epoch(), old);
    w.adjust(id, 2).unwrap();
    assert_eq!(seg.counter("x").unwrap().total, 2);
    assert_eq!(Segment::open(&path).unwrap().counter("x").unwrap().total, 2);
}

/// The hot paths (`read`, `read_many`, `read_family`, `read_ranges`)
/// check no header before they read, only after: a segment zeroed and
/// grown again under a reader that has read it (its entries then taken as
/// verified) reads as zeros, generation 0, and each path must refuse that
/// (`HeaderChanged`); a segment truncated under it faults, and each must
/// refuse that too (`Truncated`), never serving what it copied.
#[test]
fn a_hot_read_of_a_zeroed_or_truncated_segment_is_refused_on_every_path() {
    let dir = tempfile::tempdir().unwrap();
    for damage in ["zeroed", "truncated"] {
        for path_name in ["read", "read_many", "read_family", "read_ranges"] {
            let path = dir.path().join(format!("{damage}-{path_name}"));
            let w = Writer::create(&path, &small()).unwrap();
            let id = w.add("x", "", Semantics::Counter).unwrap();
            w.adjust(id, 5).unwrap();
            let mut seg = Segment::open(&path).unwrap();
            let n = seg.nr_cpus();
            let h = seg.handle("x").unwrap();
            let runs = [(h.instance().slot as usize, 1)];
            let mut fam = seg.family_handle("x").unwrap();
            let mut values = perfabi_reader::FamilyValues::default();
            let mut out = vec![0u64; n];
            let mut read = |seg: &mut Segment| match path_name {
                "read" => seg.read(&h, &mut out),
                "read_many" => seg.read_many(std::slice::from_ref(&h), &mut out),
                "read_family" => seg.read_family(&mut fam, &mut values),
                _ => seg.read_ranges(&runs, &mut out),
            };
            // Twice: the second takes the entries as verified.
            for _ in 0..2 {
                read(&mut seg).unwrap_or_else(|e| panic!("{path_name}: {e}"));
            }
            let len = std::fs::metadata(&path).unwrap().len();
            let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
            if damage == "zeroed" {
                f.set_len(0).unwrap();
                f.set_len(len).unwrap();
            } else {
                f.set_len(4096).unwrap();
            }
            let e = read(&mut seg).expect_err(&format!("{path_name} served a {damage} segment"));
            let want = if damage == "zeroed" {
                matches!(e, Error::HeaderChanged(_))
            } else {
                matches!(e, Error::Truncated(_))
            };
            assert!(want, "{path_name} of a {damage} segment: {e}");
            drop(w);
        }
    }
}

#[test]
fn segments_written_under_common_umasks_are_accepted_by_readers() {
    let dir = tempfile::tempdir().unwrap();
    for mask in ["002", "000", "022", "077"] {
        let path = dir.path().join(format!("seg{mask}"));
        let child = harness::KillOnDrop(spawn_writer_with(
            &path,
            10,
            &std::env::current_exe().unwrap(),
            |c| {
                c.env(UMASK_ENV, mask);
            },
        ));
        let mode = std::fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        // The writer registers its counter just after it creates the file:
        // an open refused is final, a counter not there yet is waited for.
        let r = wait_for(Duration::from_secs(10), || match Segment::open(&path) {
            Ok(mut s) => s.counter("ticks").ok().map(|_| Ok(())),
            Err(e) => Some(Err(e)),
        });
        drop(child);
        assert!(
            matches!(r, Some(Ok(()))),
            "umask {mask}: mode {mode:o} refused: {r:?}"
        );
        assert_eq!(mode & 0o022, 0, "umask {mask} gave mode {mode:o}");
    }
}

#[test]
fn absurd_numbers_on_the_command_line_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &small()).unwrap();
    w.add("x", "", Semantics::Counter).unwrap();
    let rec = dir.path().join("rec").display().to_string();
    for args in [
        vec!["--watch", "1e300"],
        vec!["--watch", "0"],
        vec!["--watch", "-1"],
        vec!["--watch", "nan"],
        vec!["--record", &rec, "--watch", "1e300"],
        vec!["--damon", "--width", "70000"],
        vec!["--width", "4e9"],
        vec!["--width", "18446744073709551615"],
        vec!["--width", "0"],
        vec!["--max-size", "1e300"],
        vec!["--max-size", "99999999999999999999T"],
        vec!["--watch", "0.1", "--count", "0"],
    ] {
        let f = cat(&path, &strs(&args));
        assert!(f.status.is_some(), "{args:?} hung");
        assert_eq!(f.code(), Some(2), "{args:?}: {}", f.stderr);
        assert!(f.max_rss_kib < 64 << 10, "{args:?}: {} KiB", f.max_rss_kib);
        assert!(f.stderr.starts_with("error: "), "{}", f.stderr);
    }
    assert!(
        !Path::new(&rec).exists(),
        "nothing is recorded on a bad command line"
    );
}

#[test]
fn the_flags_word_of_a_file_never_makes_a_kernel_writer() {
    // Our own file, trusted: FLAG_KERNEL written into it changes nothing but
    // makes the writer unverifiable — it is a process, and its pid says so.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &small()).unwrap();
    let mut seg = Segment::open(&path).unwrap();
    assert_eq!(seg.info().unwrap().liveness, Liveness::Alive);
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.write_all_at(&FLAG_KERNEL.to_ne_bytes(), (HEADER_FLAGS_WORD * 8) as u64)
        .unwrap();
    assert_eq!(seg.info().unwrap().liveness, Liveness::Alive);
    assert_eq!(seg.info().unwrap().origin, perfabi_reader::Origin::File);
    drop(w);
}

#[test]
fn a_link_of_another_user_on_the_way_is_not_followed_and_hard_links_are_refused() {
    if !harness::need_root("a_link_of_another_user_on_the_way_is_not_followed") {
        return;
    }
    let fs = Tmpfs::mount("16m");
    // Root's own folder, with a segment in it.
    let root_dir = tempfile::tempdir().unwrap();
    let seg = root_dir.path().join("seg");
    let w = Writer::create(&seg, &small()).unwrap();
    w.add("x", "", Semantics::Counter).unwrap();
    // The other user plants a link to that folder in the shared tmpfs.
    let app = fs.join("app");
    std::os::unix::fs::symlink(root_dir.path(), &app).unwrap();
    std::os::unix::fs::lchown(&app, Some(OTHER_UID), Some(OTHER_UID)).unwrap();
    let e = Segment::open(app.join("seg")).err().expect("refused");
    assert!(
        matches!(e, Error::ForeignLink { uid: OTHER_UID, .. }),
        "{e}"
    );
    let f = cat(&app.join("seg"), &[]);
    assert_eq!(f.code(), Some(4), "{}", f.stderr);
    assert!(f.stderr.contains("symbolic link of uid"), "{}", f.stderr);
    // Root's writer is not led there either: nothing is created.
    assert!(Writer::create(app.join("new"), &small()).is_err());
    assert!(!root_dir.path().join("new").exists());
    // Root's own link is followed.
    let mine = fs.join("mine");
    std::os::unix::fs::symlink(root_dir.path(), &mine).unwrap();
    assert!(Segment::open(mine.join("seg")).is_ok());
    // A second hard link to a segment file: not a segment a writer made.
    let linked = root_dir.path().join("linked");
    std::fs::hard_link(&seg, &linked).unwrap();
    assert!(matches!(
        Segment::open(&linked),
        Err(Error::NotASegmentFile(_, "a file with other hard links"))
    ));
    drop(w);
}

#[test]
fn a_hole_punched_in_a_mapped_segment_is_noticed_at_the_next_look() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &small()).unwrap();
    let id = w.add("x", "", Semantics::Counter).unwrap();
    w.adjust(id, 7).unwrap();
    let mut seg = open_checking_every_read(&path);
    assert_eq!(seg.counter("x").unwrap().total, 7);
    // The owner punches a hole in the per-CPU area, size unchanged: reads
    // there would return (and allocate) fresh zero pages.
    let at = seg.info().unwrap().header.segment_size as u64 - 4096;
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    rustix::fs::fallocate(
        &f,
        rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE,
        at,
        4096,
    )
    .unwrap();
    let e = seg.info().expect_err("a holed segment read on");
    assert!(matches!(e, Error::Sparse { at: a, .. } if a == at), "{e}");
    drop(w);
}

#[test]
fn a_sigbus_sent_by_someone_is_not_taken_for_a_truncation() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(&path, &small()).unwrap();
    w.add("x", "", Semantics::Counter).unwrap();
    let mut watch = harness::KillOnDrop(
        std::process::Command::new(cat_bin())
            .arg(&path)
            .args(["--watch", "0.2"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap(),
    );
    // Sent once perfabi-cat printed a sample: it has mapped the segment, so
    // its guard's handler is installed (a mapping is registered only after
    // it). Not once /proc's SigCgt shows SIGBUS caught, nor after a fixed
    // pause: Rust's runtime catches SIGBUS from the start (its stack
    // overflow handler, which swallows one sent SIGBUS by restoring the
    // default action and returning), so that witness came before the guard
    // and, on busy CPUs, a kill sent then was swallowed.
    let out = watch.0.stdout.take().unwrap();
    let (tx, samples) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out).lines() {
            if line.is_err() || tx.send(()).is_err() {
                break;
            }
        }
    });
    let until = harness::deadline::Deadline::witness();
    let sampled = samples
        .recv_timeout(harness::deadline::WITNESS_LIMIT)
        .is_ok();
    until.assert(
        sampled,
        "perfabi-cat's first sample (its SIGBUS guard installed)",
    );
    rustix::process::kill_process(
        rustix::process::Pid::from_child(&watch.0),
        rustix::process::Signal::BUS,
    )
    .unwrap();
    let end = std::time::Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = watch.0.try_wait().unwrap() {
            break st;
        }
        assert!(std::time::Instant::now() < end, "kill -BUS was swallowed");
        std::thread::sleep(Duration::from_millis(20));
    };
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(status.signal(), Some(libc::SIGBUS), "{status:?}");
    drop(w);
}

#[test]
fn a_watch_of_65536_counters_takes_linear_time() {
    let dir = tempfile::tempdir_in("/dev/shm").unwrap();
    let path = dir.path().join("seg");
    let w = Writer::create(
        &path,
        &Config {
            max_instances: 65536,
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .unwrap();
    for i in 0..65536 {
        w.add(&format!("c{i}"), "", Semantics::Counter).unwrap();
    }
    let f = harness::run_limited(
        std::process::Command::new(cat_bin())
            .arg(&path)
            .args(["--watch", "0.1", "--count", "2", "--json"]),
        Duration::from_secs(60),
    );
    assert!(
        f.status.is_some(),
        "--watch of 65536 counters took over 60 s"
    );
    assert_eq!(f.code(), Some(0), "{}", f.stderr);
    assert_eq!(f.stdout.lines().count(), 2);
    println!("--watch 0.1 --count 2 of 65536 counters: {:?}", f.elapsed);
    drop(w);
}

#[test]
fn a_forged_pid_is_not_believed_where_proc_hides_other_users_processes() {
    if !harness::need_root("a_forged_pid_is_not_believed_where_proc_hides_other_users") {
        return;
    }
    let fs = Tmpfs::mount("64m");
    let init_start = perfabi_shm::host::process_start_ns(Some(1)).unwrap();
    let p = forged(&fs, "pid-of-init", 0, 1, init_start);
    let cat_copy = harness::executable_copy(&cat_bin(), fs.path());
    // A third user reads it, trusting the file's owner, with /proc mounted
    // hidepid=invisible: it cannot see pid 1's start time or uids.
    let script = format!(
        "mount -t proc -o hidepid=invisible proc /proc && exec setpriv --reuid 64125 --regid 64125 \
         --clear-groups {} {} --info --trust-uid {OTHER_UID}",
        cat_copy.display(),
        p.display()
    );
    let f = harness::run_limited(
        std::process::Command::new("unshare").args([
            "-m",
            "--propagation",
            "private",
            "sh",
            "-c",
            &script,
        ]),
        Duration::from_secs(20),
    );
    assert_eq!(f.code(), Some(0), "{}", f.stderr);
    assert!(f.stdout.contains("Dead"), "{}", f.stdout);
}
