//! Many worker processes write one directory while workers are killed with
//! SIGKILL or exit, and new ones start (`spec/PERFABI.md` §15.5): the
//! merged totals equal the increments made, exactly, and a reader scraping
//! all the while never sees a total go backwards.
//!
//! The workers are this test binary again, running the ignored test
//! `worker` (never counted as a pass on its own).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

use perfabi::{Buckets, FamilySpec, Kind, Reading, Unit};
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::Deadline;

const ENV_DIR: &str = "PERFABI_TEST_WORKER_DIR";
const ENV_COUNT: &str = "PERFABI_TEST_WORKER_COUNT";

/// A worker: `COUNT` requests counted from two threads and `COUNT`
/// observations, then `done` on stdout; it exits cleanly when stdin closes,
/// unless it is killed first.
#[test]
#[ignore = "a worker process of workers_die_and_restart_and_no_count_is_lost"]
fn worker() {
    let (Some(dir), Some(n)) = (std::env::var_os(ENV_DIR), std::env::var_os(ENV_COUNT)) else {
        panic!("run by workers_die_and_restart_and_no_count_is_lost only");
    };
    let n: u64 = n.to_str().unwrap().parse().unwrap();
    let w = Writer::create_in(dir, "worker", &Config::default()).unwrap();
    let req = w
        .add_family(&FamilySpec::new(
            "app.requests",
            "Requests served",
            "",
            Kind::Counter,
            Unit::COUNT,
        ))
        .unwrap();
    let m = w.add_member(req, "", &[]).unwrap();
    let lat = w
        .add_family(&FamilySpec::histogram(
            "app.latency",
            "Request latency",
            "",
            Unit::NS,
            Buckets::Log2 { first: 4, n: 8 },
        ))
        .unwrap();
    let l = w.add_member(lat, "", &[]).unwrap();
    std::thread::scope(|s| {
        for half in [n / 2, n - n / 2] {
            let (w, m, l) = (&w, &m, &l);
            s.spawn(move || {
                for i in 0..half {
                    w.member_add(m, 1).unwrap();
                    w.observe(l, i % 1000).unwrap();
                }
            });
        }
    });
    println!("done");
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    w.close();
}

struct Worker {
    child: Child,
    done: mpsc::Receiver<()>,
    count: u64,
}

fn start(dir: &Path, count: u64) -> Worker {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--ignored", "--exact", "worker", "--nocapture", "--quiet"])
        .env(ENV_DIR, dir)
        .env(ENV_COUNT, count.to_string())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let (tx, done) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if line.map(|l| l.trim() == "done").unwrap_or(false) {
                let _ = tx.send(());
            }
        }
    });
    Worker { child, done, count }
}

fn totals(d: &mut Directory) -> (u64, u64) {
    let s = d.read().unwrap();
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    let mut req = 0;
    let mut obs = 0;
    for f in &s.families {
        match (f.family.name.as_str(), f.readings.first()) {
            ("app.requests", Some(Reading::Unsigned(n))) => req = *n,
            ("app.latency", Some(Reading::Histogram(h))) => {
                assert_eq!(h.count, h.buckets.iter().sum::<u64>());
                obs = h.count;
            }
            _ => {}
        }
    }
    (req, obs)
}

#[test]
fn workers_die_and_restart_and_no_count_is_lost() {
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    // A reader scraping all the while: totals never go backwards.
    let scraper = {
        let (dir, stop) = (dir.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut d = Directory::open(&dir, DirectoryOptions::default()).unwrap();
            let (mut last, mut scrapes) = ((0, 0), 0u64);
            while !stop.load(Ordering::Relaxed) {
                let now = totals(&mut d);
                assert!(
                    now.0 >= last.0 && now.1 >= last.1,
                    "a total went backwards: {last:?} then {now:?}"
                );
                last = now;
                scrapes += 1;
            }
            scrapes
        })
    };
    let deadline = Deadline::witness();
    let (workers, rounds) = (8u64, 3u64);
    let mut made = 0u64;
    let mut started = 0u64;
    let mut killed = 0u64;
    for round in 0..rounds {
        let mut ws: Vec<Worker> = (0..workers)
            .map(|i| start(&dir, 1_000 * (i + 1) + round))
            .collect();
        started += workers;
        for (i, w) in ws.iter_mut().enumerate() {
            let left = Duration::from_secs(60).saturating_sub(deadline.elapsed());
            deadline.assert(w.done.recv_timeout(left).is_ok(), "a worker finished");
            made += w.count;
            if i % 2 == 0 {
                // Killed as it stands, without closing its segment.
                w.child.kill().unwrap();
                killed += 1;
            } else {
                drop(w.child.stdin.take()); // exits cleanly
            }
        }
        for mut w in ws {
            let status = w.child.wait().unwrap();
            assert!(status.success() || status.code().is_none(), "{status}");
        }
    }
    stop.store(true, Ordering::Relaxed);
    let scrapes = scraper.join().unwrap();
    let mut d = Directory::open(&dir, DirectoryOptions::default()).unwrap();
    let s = d.read().unwrap();
    assert_eq!(s.segments as u64, started, "every worker its own file");
    assert_eq!(totals(&mut d), (made, made));
    println!(
        "{started} workers ({killed} killed with SIGKILL) made {made} increments and as many \
         observations; merged totals equal; {scrapes} scrapes during the run, none went backwards"
    );
}
