//! An adversarial review of segment directories and the fold
//! (`spec/PERFABI.md` §15), issue 32's attack slice. Each `finding N` test
//! shows a way the directory code breaks a promise of the issue or the
//! quality bar; it fails on the code as it is and is marked
//! `#[ignore = "finding N: ..."]` until fixed. The other tests pin down
//! attacks that were tried and hold.

use std::path::{Path, PathBuf};
use std::time::Duration;

use perfabi::{FamilySpec, GaugeMode, Kind, Reading, Unit};
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_reader::{Options, Segment};
use perfabi_shm::directory::{KEPT_NAME, LOCK_NAME, MAX_ENTRIES};
use perfabi_shm::writer::fold::{dead_for_sure, fold};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::Deadline;

mod support;
use support::directory::{config, count_requests, read, total};

/// A writer `name` in `dir` whose counter `app.requests` (help `help`)
/// counted `n`.
fn counting(dir: &Path, name: &str, help: &str, n: i64) -> Writer {
    counting_with(dir, name, help, n, &config(0))
}

/// [`counting`] with `config`.
fn counting_with(dir: &Path, name: &str, help: &str, n: i64, config: &Config) -> Writer {
    let w = Writer::create_in(dir, name, config).unwrap();
    count_requests(&w, help, n);
    w
}

/// A folder `dir` others may add entries to, as `/dev/shm` itself or a
/// shared `$PERFABI_DIR` (mode 1777, root's): §15.1 lets writers use it.
fn sticky(top: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let dir = top.join("shared");
    std::fs::create_dir(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777)).unwrap();
    dir
}

/// Finding 1: the kept file freezes a family's metadata for good. Once a
/// dead writer of version 1 is folded, a family whose help (or buckets,
/// unit, ...) version 2 changed is refused in every read for ever, though
/// no writer of version 1 is left; and version 2's dead writers are never
/// folded ("differs from the kept one"), so their files pile up: a
/// rolling upgrade that rewords one help text breaks that family until
/// someone deletes the kept file (and its counts).
#[test]
fn finding_1_an_upgrade_changing_help_is_not_refused_for_ever() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    counting(&dir, "app", "Requests", 3).close();
    // Version 2 starts (its creation folds version 1's dead file).
    let v2 = counting(&dir, "app", "Requests served", 4);
    assert!(dir.join(KEPT_NAME).exists(), "version 1 was folded");
    let s = read(&dir);
    for p in &s.problems {
        println!("{} {p}", p.code);
    }
    assert!(
        s.problems.is_empty(),
        "only version 2 is alive, yet its family is refused: {:?}",
        s.problems
    );
    assert_eq!(total(&s, "app.requests"), Some(Reading::Unsigned(7)));
    v2.close();
    let r = fold(&dir).unwrap();
    assert!(r.left.is_empty(), "version 2's dead file is folded: {r:?}");
}

/// Finding 2: a reader takes the directory's lock without checking who
/// owns it. In a directory others may add files to (sticky, as §15.1
/// allows), another user creates `fold.lock` before the first writer and
/// holds it: every read of the directory then fails after the busy
/// timeout, although the segment in it is the reader's own and valid. A
/// hostile file must spoil only itself (issue 32, item 4). (The fold
/// itself refuses the squatted lock, and `Writer::create_in` drops that
/// error, so the directory is also never folded again: see the report.)
#[test]
fn finding_2_another_users_lock_does_not_stop_every_read() {
    use std::os::unix::fs::PermissionsExt;
    if !perfabi_test_harness::need_root("finding_2_another_users_lock_does_not_stop_every_read") {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let dir = sticky(top.path());
    let lock = dir.join(LOCK_NAME);
    std::fs::write(&lock, b"").unwrap();
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o644)).unwrap();
    perfabi_test_harness::give_to_other_user(&lock);
    // The squatter holds it (a lock of its own open file description).
    let held = std::fs::File::open(&lock).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let _w = counting(&dir, "app", "Requests", 5);
    let got = Directory::open(&dir, DirectoryOptions::default())
        .unwrap()
        .read();
    let s = got.unwrap_or_else(|e| panic!("the whole directory refused: {e}"));
    assert_eq!(s.segments, 1);
    assert_eq!(total(&s, "app.requests"), Some(Reading::Unsigned(5)));
}

/// Finding 3: in a directory others may add entries to, another user
/// hides every segment by adding 65,536 entries of any name after them:
/// the listing stops at `MAX_ENTRIES` (tmpfs lists newest first), the
/// writers' counts are not read, and the merged totals go backwards. The
/// limit is reported (code `limit`), but the hostile entries spoil files
/// that are not theirs. Fixed (§15.2): names that are not segment names
/// count toward no limit, only toward `MAX_SCANNED` (16 times as many).
#[test]
fn finding_3_a_flood_of_other_entries_does_not_hide_segments() {
    let top = tempfile::Builder::new()
        .prefix("perfabi-attack.")
        .tempdir_in("/dev/shm")
        .unwrap();
    let dir = sticky(top.path());
    let _w = counting(&dir, "app", "Requests", 5);
    assert_eq!(
        total(&read(&dir), "app.requests"),
        Some(Reading::Unsigned(5))
    );
    for k in 0..=MAX_ENTRIES {
        std::fs::File::create(dir.join(format!("junk{k}"))).unwrap();
    }
    let s = read(&dir);
    for p in &s.problems {
        println!("{} {p}", p.code);
    }
    assert_eq!(
        total(&s, "app.requests"),
        Some(Reading::Unsigned(5)),
        "the writer's count went missing"
    );
}

/// Holds (finding 3 with names that are segment names): another user's
/// files named as segments, more than `max_segments` and sorting before
/// the writer's, take no trusted segment's place: refused by their owner
/// before anything is opened, the first 16 named one by one, the rest
/// counted in one problem.
#[test]
fn another_users_files_named_as_segments_take_no_segments_place() {
    if !perfabi_test_harness::need_root(
        "another_users_files_named_as_segments_take_no_segments_place",
    ) {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let dir = sticky(top.path());
    let _w = counting(&dir, "zz", "Requests", 5);
    for k in 1..=40 {
        let f = dir.join(format!("aa.{k}.00000000000000ff.perfabi"));
        std::fs::write(&f, b"").unwrap();
        perfabi_test_harness::give_to_other_user(&f);
    }
    let s = Directory::open(
        &dir,
        DirectoryOptions {
            max_segments: 1,
            ..DirectoryOptions::default()
        },
    )
    .unwrap()
    .read()
    .unwrap();
    for p in &s.problems {
        println!("{} {p}", p.code);
    }
    assert_eq!(total(&s, "app.requests"), Some(Reading::Unsigned(5)));
    assert_eq!(s.problems.len(), 17, "{:?}", s.problems);
    assert!(s.problems.iter().all(|p| p.code == "untrusted-owner"));
    assert!(
        s.problems[16].message.contains("24 more files"),
        "{}",
        s.problems[16]
    );
}

const ENV_NS_DIR: &str = "PERFABI_ATTACK_NS_DIR";

/// A writer in a namespace of its own, for finding 4: counts 5 and
/// sets a gauge to 9, says so, and lives until `stop` appears (at most a
/// minute).
#[test]
#[ignore = "a process of finding_4_a_live_writer_in_another_namespace_is_not_folded"]
fn ns_writer() {
    let dir = PathBuf::from(std::env::var_os(ENV_NS_DIR).expect("run by finding 4 only"));
    let w = counting(&dir, "ns", "Requests", 5);
    let g = w
        .add_family(&FamilySpec::gauge(
            "app.level",
            "Level",
            "",
            Unit::COUNT,
            GaugeMode::Sum,
        ))
        .unwrap();
    w.member_set(&w.add_member(g, "", &[]).unwrap(), 9).unwrap();
    std::fs::write(dir.join("ready"), std::process::id().to_string()).unwrap();
    let until = Deadline::after(Duration::from_secs(60));
    while !dir.join("stop").exists() && !until.passed() {
        std::thread::sleep(Duration::from_millis(10));
    }
    drop(w);
}

/// Finding 4: liveness is judged by `writer_pid` and `writer_start_ns`,
/// a pid of the writer's own pid namespace and a start time on the
/// `CLOCK_BOOTTIME` of its own time namespace. A writer in a container
/// (its own pid namespace, or a time namespace with a boottime offset, as
/// a CRIU-restored one has) sharing the directory (a shared `/dev/shm`, a
/// mounted folder) is seen from the host as another process or one
/// started at another time: a fold there finds it "dead for sure", folds
/// it and removes its file while it still counts (every later count is
/// lost), and a reader there drops its gauges. The other way round, a
/// fold in such a container folds the host's live writers. A lock the
/// writer holds on its own segment (released by the kernel when it dies)
/// would tell in every namespace. Fixed (§10): the writer holds an
/// open-file-description write lock on its segment's first 8 bytes for its
/// whole life (`FLAG_LIVE_LOCK`), and folds and readers judge it by that.
#[test]
fn finding_4_a_live_writer_in_another_namespace_is_not_folded() {
    if !perfabi_test_harness::need_root(
        "finding_4_a_live_writer_in_another_namespace_is_not_folded",
    ) {
        return;
    }
    let mut seen = Vec::new();
    for (ns, args) in [
        (
            "a pid namespace (its own /proc)",
            &["--pid", "--fork", "--mount-proc"][..],
        ),
        // Its own fold, at its creation, reads the host's /proc/1 and
        // folds its own new file: every count it makes is lost.
        (
            "a pid namespace (the host's /proc)",
            &["--pid", "--fork"][..],
        ),
        (
            "a time namespace (boottime +100000 s)",
            &["--time", "--boottime", "100000", "--fork"][..],
        ),
    ] {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("segs");
        perfabi_shm::directory::prepare(&dir).unwrap();
        let child = std::process::Command::new("unshare")
            .args(args)
            .arg(std::env::current_exe().unwrap())
            .args(["--ignored", "--exact", "ns_writer", "--quiet"])
            .env(ENV_NS_DIR, &dir)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let child = perfabi_test_harness::KillOnDrop(child);
        let until = Deadline::after(Duration::from_secs(30));
        while !dir.join("ready").exists() && !until.passed() {
            std::thread::sleep(Duration::from_millis(10));
        }
        until.assert(dir.join("ready").exists(), "the namespaced writer started");
        let before = total(&read(&dir), "app.level");
        let r = fold(&dir).unwrap();
        let after = read(&dir);
        std::fs::write(dir.join("stop"), b"").unwrap();
        drop(child);
        let got = (
            before,
            r.folded,
            after.segments,
            total(&after, "app.requests"),
        );
        println!("{ns}: (gauge before the fold, folded, files after, requests after) = {got:?}");
        seen.push((ns, got));
    }
    for (ns, got) in seen {
        assert_eq!(
            got,
            (Some(Reading::Unsigned(9)), 0, 1, Some(Reading::Unsigned(5))),
            "{ns}: the live writer's gauge counts, its file is not folded"
        );
    }
}

/// Finding 5: the writer label is added to a series' labels without
/// checking that the family does not use that key already (as a label
/// key, or as its dimension): a gauge of mode `ALL` with a label `writer`,
/// or any family when the reader's writer label is `writer`, comes out
/// with the key twice, which Prometheus refuses (the whole scrape fails:
/// "duplicate label names").
#[test]
fn finding_5_the_writer_label_never_repeats_a_key() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let w = Writer::create_in(&dir, "app", &config(0)).unwrap();
    let g = w
        .add_family(&FamilySpec::gauge(
            "app.threads",
            "Threads",
            "pool",
            Unit::COUNT,
            GaugeMode::All,
        ))
        .unwrap();
    w.member_set(&w.add_member(g, "io", &[("writer", "tokio")]).unwrap(), 4)
        .unwrap();
    let c = w
        .add_family(&FamilySpec::new(
            "app.jobs",
            "Jobs",
            "writer",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    w.member_add(&w.add_member(c, "db", &[]).unwrap(), 2)
        .unwrap();
    for label in [None, Some("writer".to_string())] {
        let s = Directory::open(
            &dir,
            DirectoryOptions {
                writer_label: label.clone(),
                ..DirectoryOptions::default()
            },
        )
        .unwrap()
        .read()
        .unwrap();
        for f in &s.families {
            for m in &f.family.members {
                let mut keys: Vec<&str> = m.labels.iter().map(|(k, _)| k.as_str()).collect();
                if !f.family.dimension.is_empty() {
                    keys.push(&f.family.dimension);
                }
                let n = keys.len();
                keys.sort();
                keys.dedup();
                assert_eq!(
                    keys.len(),
                    n,
                    "writer label {label:?}: {} has a key twice: dimension {:?}, labels {:?}",
                    f.family.name,
                    f.family.dimension,
                    m.labels
                );
            }
        }
    }
}

/// Holds: pid reuse. A segment whose `writer_pid` is a live process that
/// started more than a second away from `writer_start_ns` is dead for
/// sure (a dead worker's pid given to a new process does not keep its
/// file alive); its real start keeps it alive, and a reader agrees.
#[test]
fn a_reused_pid_does_not_keep_a_dead_writer_alive() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let w = counting(&dir, "app", "Requests", 1);
    let mut seg = Segment::open_with(
        w.path().unwrap(),
        Options {
            require_live: false,
            ..Options::default()
        },
    )
    .unwrap();
    let info = seg.info().unwrap().header;
    assert!(!dead_for_sure(&info), "the writer is alive");
    for shift in [-5_000_000_000i64, 5_000_000_000] {
        let reused = perfabi::Info {
            writer_start_ns: info.writer_start_ns.saturating_add_signed(shift),
            ..info
        };
        assert!(dead_for_sure(&reused), "start moved by {shift} ns");
    }
    // A pid that names no process at all.
    let gone = perfabi::Info {
        writer_pid: u64::from(u32::MAX >> 1),
        ..info
    };
    assert!(dead_for_sure(&gone));
}

/// Holds: a segment file's name and its header disagree (the name claims
/// a dead pid, the header a live writer): the fold judges by the header,
/// so a live writer's file is never folded whatever its name says; and a
/// closed segment named after a live pid is folded.
#[test]
fn the_header_not_the_name_decides_who_is_dead() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    // No heartbeat: its check of its path would see the rename below.
    let quiet = Config {
        auto_heartbeat: false,
        ..config(0)
    };
    let live = counting_with(&dir, "app", "Requests", 2, &quiet);
    let live_path = live.path().unwrap().to_path_buf();
    // Renamed to claim pid 1 (another process, started at boot).
    let claimed = dir.join("app.1.00000000000000ff.perfabi");
    std::fs::rename(&live_path, &claimed).unwrap();
    let r = fold(&dir).unwrap();
    assert_eq!(r.folded, 0, "{r:?}");
    assert!(claimed.exists());
    let s = read(&dir);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(total(&s, "app.requests"), Some(Reading::Unsigned(2)));
    std::fs::rename(&claimed, &live_path).unwrap();
    // A closed one under this (live) process's pid is folded, counts kept.
    counting(&dir, "app", "Requests", 3).close();
    let r = fold(&dir).unwrap();
    assert_eq!(r.folded, 1, "{r:?}");
    let s = read(&dir);
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    assert_eq!(total(&s, "app.requests"), Some(Reading::Unsigned(5)));
    drop(live);
}

/// Holds: a socket, a FIFO and a directory named as segments, and a
/// `fold.lock` and a kept file that are FIFOs, neither block nor fail a
/// read: each is a problem of its own (or, the lock, read without).
#[test]
fn special_files_named_as_the_lock_kept_file_and_segments_spoil_only_themselves() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let _w = counting(&dir, "app", "Requests", 5);
    // create_in made the real lock: replace it by a FIFO.
    std::fs::remove_file(dir.join(LOCK_NAME)).unwrap();
    for name in [LOCK_NAME, KEPT_NAME, "fifo.1.00000000000000ff.perfabi"] {
        rustix::fs::mknodat(
            rustix::fs::CWD,
            dir.join(name),
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
    }
    let _sock = std::os::unix::net::UnixListener::bind(dir.join("sock.1.00000000000000ff.perfabi"))
        .unwrap();
    std::fs::create_dir(dir.join("dir.1.00000000000000ff.perfabi")).unwrap();
    let s = read(&dir);
    let mut codes: Vec<(String, &str)> = s
        .problems
        .iter()
        .map(|p| {
            println!("{} {p}", p.code);
            (
                p.file.file_name().unwrap().to_string_lossy().into_owned(),
                p.code,
            )
        })
        .collect();
    codes.sort();
    assert_eq!(
        codes,
        [
            (
                "dir.1.00000000000000ff.perfabi".to_string(),
                "not-a-segment-file"
            ),
            (
                "fifo.1.00000000000000ff.perfabi".to_string(),
                "not-a-segment-file"
            ),
            (KEPT_NAME.to_string(), "not-a-segment-file"),
            (
                "sock.1.00000000000000ff.perfabi".to_string(),
                "not-a-segment-file"
            ),
        ]
    );
    assert_eq!(total(&s, "app.requests"), Some(Reading::Unsigned(5)));
}

const ENV_BIG_DIR: &str = "PERFABI_ATTACK_BIG_DIR";

/// A writer creating a large segment in a directory, for finding 6 (it is
/// killed while it fills the file).
#[test]
#[ignore = "a process of finding_6_a_writer_killed_while_creating_leaves_no_file_for_ever"]
fn big_writer() {
    let dir = PathBuf::from(std::env::var_os(ENV_BIG_DIR).expect("run by finding 6 only"));
    let config = Config {
        nr_cpus: Some(512),
        max_instances: 65_536,
        damon_capacity: 0,
        ..Config::default()
    };
    let _w = Writer::create_in(&dir, "big", &config).unwrap();
}

/// Finding 6: a writer killed while it creates its segment (a worker
/// killed at start-up, in a restart storm) leaves the segment under its
/// temporary name (`.<segment name>.<pid>.<nonce>.tmp`, full size) and
/// nothing ever removes it: not the fold (it removes only its own
/// `.kept.` files), not a later writer. On tmpfs each such file is memory
/// lost until reboot. A fold could remove the temporary files of writers
/// dead for sure (their pid is in the name).
#[test]
fn finding_6_a_writer_killed_while_creating_leaves_no_file_for_ever() {
    use std::os::unix::process::ExitStatusExt;
    let top = tempfile::Builder::new()
        .prefix("perfabi-attack.")
        .tempdir_in("/dev/shm")
        .unwrap();
    let dir = top.path().join("segs");
    perfabi_shm::directory::prepare(&dir).unwrap();
    let temporary = |dir: &Path| -> Vec<(String, u64)> {
        std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .map(|e| {
                let md = e.metadata().unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::os::unix::fs::MetadataExt::blocks(&md) * 512,
                )
            })
            .collect()
    };
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "big_writer", "--quiet"])
        .env(ENV_BIG_DIR, &dir)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let until = Deadline::after(Duration::from_secs(30));
    // Killed once its file holds 16 MiB (of 256).
    while !temporary(&dir).iter().any(|(_, b)| *b >= 16 << 20) && !until.passed() {
        std::hint::spin_loop();
    }
    child.kill().unwrap();
    let status = child.wait().unwrap();
    let left = temporary(&dir);
    until.assert(
        status.signal() == Some(9) && left.iter().any(|(_, b)| *b >= 16 << 20),
        format_args!("the writer was killed while filling its file ({status}, {left:?})"),
    );
    // Later writers start and fold; the dead one's file stays.
    let _w = counting(&dir, "app", "Requests", 1);
    fold(&dir).unwrap();
    let left = temporary(&dir);
    println!("left after a fold: {left:?}");
    assert!(
        left.is_empty(),
        "a dead writer's temporary file is never removed: {left:?}"
    );
}

const ENV_FOLD_DIR: &str = "PERFABI_ATTACK_FOLD_DIR";

/// A fold run as another user, for finding 7: prints what it returned.
#[test]
#[ignore = "a process of finding_7_another_users_file_never_stops_a_fold"]
fn fold_as_other_user() {
    let dir = PathBuf::from(std::env::var_os(ENV_FOLD_DIR).expect("run by finding 7 only"));
    println!("fold: {:?}", fold(&dir));
}

/// Finding 7: the fold removes every listed file whose identity
/// (`<pid>.<nonce>`) the kept file lists, whoever owns it. In a sticky
/// directory another user reads the folded identities (the kept file and
/// the names are readable) and makes a file of its own under one of them,
/// named to sort first (`aaa.<pid>.<nonce>.perfabi`): the writers' fold
/// cannot remove it (`EPERM`, the sticky bit) and stops there with an
/// error at step 6, every time, so no dead writer's file is ever removed
/// again (each fold rewrites the kept file for nothing), and
/// `Writer::create_in` drops the error. (Counts stay exact: readers skip
/// what the kept file lists.)
#[test]
fn finding_7_another_users_file_never_stops_a_fold() {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    if !perfabi_test_harness::need_root("finding_7_another_users_file_never_stops_a_fold") {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    std::fs::set_permissions(top.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = perfabi_test_harness::executable_copy(&std::env::current_exe().unwrap(), top.path());
    let dir = sticky(top.path());
    let other = perfabi_test_harness::OTHER_UID;
    // The writers are the other user's (made here, given to it: closed,
    // so dead for sure); their folds run as that user.
    let dead = |n: i64| {
        let w = counting(&dir, "app", "Requests", n);
        let p = w.path().unwrap().to_path_buf();
        w.close();
        std::os::unix::fs::chown(&p, Some(other), Some(other)).unwrap();
        p
    };
    let fold_as_other = || {
        let out = std::process::Command::new(&exe)
            .args([
                "--ignored",
                "--exact",
                "fold_as_other_user",
                "--nocapture",
                "--quiet",
            ])
            .env(ENV_FOLD_DIR, &dir)
            .uid(other)
            .gid(other)
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
        let said = String::from_utf8_lossy(&out.stdout).into_owned();
        said.lines()
            .find(|l| l.starts_with("fold: "))
            .unwrap()
            .to_string()
    };
    // The lock and kept file made by any root writer's create_in above
    // would be root's: start the directory with the other user's.
    for f in std::fs::read_dir(&dir).unwrap() {
        let f = f.unwrap().path();
        if !f.to_string_lossy().ends_with(".perfabi") {
            std::fs::remove_file(f).unwrap();
        }
    }
    let a = dead(3);
    // The locks and kept file root's create_in just made, whatever their
    // names (§15.5), are root's: remove them all.
    for f in std::fs::read_dir(&dir).unwrap() {
        let f = f.unwrap().path();
        if !f.to_string_lossy().ends_with(".perfabi") {
            std::fs::remove_file(f).unwrap();
        }
    }
    println!("{}", fold_as_other());
    assert!(!a.exists(), "the first dead file was folded");
    // The squatter: root's file (the writers' user cannot remove it)
    // under the folded identity.
    let name = perfabi_shm::directory::SegmentName::parse(a.file_name().unwrap()).unwrap();
    let squat = dir.join(format!("aaa.{}.{:016x}.perfabi", name.pid, name.nonce));
    std::fs::write(&squat, b"not a segment").unwrap();
    let (b, c) = (dead(4), dead(5));
    let said = fold_as_other();
    println!("{said}");
    let said_again = fold_as_other();
    println!("{said_again}");
    // Read as the writers' user reads it (root trusting it).
    let s = Directory::open(
        &dir,
        DirectoryOptions {
            segment: Options {
                trust: perfabi_reader::Trust::Also(vec![other]),
                ..Options::default()
            },
            ..DirectoryOptions::default()
        },
    )
    .unwrap()
    .read()
    .unwrap();
    for p in &s.problems {
        println!("{} {p}", p.code);
    }
    assert_eq!(total(&s, "app.requests"), Some(Reading::Unsigned(12)));
    assert!(
        !b.exists() && !c.exists(),
        "dead writers' files are never removed again ({said}; {said_again})"
    );
}

/// Holds: 100,000 entries that are not segments cost a read their
/// directory records only (no entry is looked up or opened), none is a
/// problem, and the segment listed after them is read. Prints the read's
/// time beside a read of the same segment in a directory of nothing else.
#[test]
fn a_hundred_thousand_other_entries_cost_a_bounded_listing() {
    let top = tempfile::Builder::new()
        .prefix("perfabi-attack.")
        .tempdir_in("/dev/shm")
        .unwrap();
    let (dir, alone) = (top.path().join("segs"), top.path().join("alone"));
    perfabi_shm::directory::prepare(&dir).unwrap();
    // tmpfs lists the newest entries first: the segment comes last.
    for k in 0..100_000 {
        std::fs::File::create(dir.join(format!("junk{k}"))).unwrap();
    }
    let _w = counting(&dir, "app", "Requests", 5);
    let _a = counting(&alone, "app", "Requests", 5);
    let mut d = Directory::open(&dir, DirectoryOptions::default()).unwrap();
    let mut a = Directory::open(&alone, DirectoryOptions::default()).unwrap();
    let (s, _) = (d.read().unwrap(), a.read().unwrap()); // the files opened
    let (mut crowded, mut single) = (Duration::MAX, Duration::MAX);
    for _ in 0..5 {
        let t = std::time::Instant::now();
        d.read().unwrap();
        crowded = crowded.min(t.elapsed());
        let t = std::time::Instant::now();
        a.read().unwrap();
        single = single.min(t.elapsed());
    }
    println!(
        "a read among 100,000 other entries: {crowded:?}, alone: {single:?} ({:.0}x; best of 5 each)",
        crowded.as_secs_f64() / single.as_secs_f64()
    );
    assert_eq!(total(&s, "app.requests"), Some(Reading::Unsigned(5)));
    assert!(s.problems.is_empty(), "{:?}", s.problems);
}

/// Finding 8: `perfabi.folded`, the kept file's list of folded segments,
/// is not a reserved name. A writer may register a counter family of that
/// name; readers serve it while its writer's file is listed, and the fold
/// drops it (it takes it for a kept file's list), so its count vanishes
/// and the total goes backwards. Either writers refuse the name or the
/// fold keeps its counts.
#[test]
fn finding_8_a_family_named_as_the_kept_list_is_refused_or_kept() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let w = Writer::create_in(&dir, "app", &config(0)).unwrap();
    let Ok(f) = w.add_family(&FamilySpec::new(
        perfabi_shm::directory::FOLDED_FAMILY,
        "Folded sheets",
        "",
        Kind::Counter,
        Unit::COUNT,
    )) else {
        return; // refused: nothing to lose
    };
    w.member_add(&w.add_member(f, "", &[]).unwrap(), 5).unwrap();
    w.close();
    let before = total(&read(&dir), perfabi_shm::directory::FOLDED_FAMILY);
    assert_eq!(before, Some(Reading::Unsigned(5)), "served while listed");
    assert_eq!(fold(&dir).unwrap().folded, 1);
    let after = total(&read(&dir), perfabi_shm::directory::FOLDED_FAMILY);
    assert_eq!(after, before, "the count went backwards when folded");
}

/// Finding 10: a live writer caught inside an update for longer than the
/// reader's busy timeout (stopped by `SIGSTOP`, a debugger or a cgroup
/// freeze, or descheduled that long on an overloaded machine) makes its
/// file a problem (`busy`) for that read, and its counters drop out of the
/// merged totals: a counter's total goes backwards, which Prometheus takes
/// for a reset (`increase()` then counts the whole total again). The
/// directory reader could serve that file's last consistent snapshot
/// (it keeps the file open between reads) and say it is old. (Close to
/// the fold helper's gap of a writer killed mid-update; this one is alive
/// and comes back.)
#[test]
fn finding_10_a_writer_stopped_mid_update_never_makes_a_total_go_backwards() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let config = Config {
        auto_heartbeat: false, // a stopped process runs nothing
        ..config(0)
    };
    let w = Writer::create_in(&dir, "app", &config).unwrap();
    count_requests(&w, "Requests", 5);
    let _other = counting(&dir, "app", "Requests", 2);
    let mut d = Directory::open(&dir, DirectoryOptions::default()).unwrap();
    assert_eq!(
        total(&d.read().unwrap(), "app.requests"),
        Some(Reading::Unsigned(7))
    );
    // Stopped between the two stores of its sequence word.
    perfabi_test_harness::forge::set_cpu_sequence(w.path().unwrap(), 0, None);
    let s = d.read().unwrap();
    for p in &s.problems {
        println!("{} {p}", p.code);
    }
    assert_eq!(
        total(&s, "app.requests"),
        Some(Reading::Unsigned(7)),
        "the total went backwards"
    );
}

/// Finding 8, the reader's side: a segment not made by `create_in` (any
/// other writer) with a family named as the kept file's list has that
/// family refused as `reserved-name`, the rest served, before and after a
/// fold: it never vanishes unannounced.
#[test]
fn a_segments_family_named_as_the_kept_list_is_a_problem_of_its_own() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    let _other = counting(&dir, "app", "Requests", 2);
    let name = perfabi_shm::directory::SegmentName::new("forged").unwrap();
    let w = Writer::create(dir.join(name.to_string()), &config(0)).unwrap();
    let f = w
        .add_family(&FamilySpec::new(
            perfabi_shm::directory::FOLDED_FAMILY,
            "Folded sheets",
            "",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    w.member_add(&w.add_member(f, "", &[]).unwrap(), 5).unwrap();
    let s = read(&dir);
    assert_eq!(total(&s, "app.requests"), Some(Reading::Unsigned(2)));
    assert_eq!(total(&s, perfabi_shm::directory::FOLDED_FAMILY), None);
    assert!(
        s.problems.iter().any(|p| p.code == "reserved-name"
            && p.family.as_deref() == Some(perfabi_shm::directory::FOLDED_FAMILY)),
        "{:?}",
        s.problems
    );
}
