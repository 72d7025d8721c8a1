//! `perfabi-cat --watch` on a terminal, as a person sees it: run in a shell
//! inside a tmux pane (a private tmux server) against a live writer, the
//! screen is redrawn in place (same rows, new values), a 60-character
//! instance name leaves the value column aligned, and `q` (or SIGTERM)
//! gives the shell back its terminal: the main screen, the cursor shown,
//! canonical mode and echo on.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::tmux::{have_tmux, shell_child, shell_is_cooked, wait_for, Tmux};

const TEST: &str = "live_view";

/// The 60-character instance name.
const LONG: &str = "worker-pool-with-a-rather-long-instance-name-for-alignment-0";

/// A writer of `task.cpu_time` (instances `main` and [`LONG`]) and `net.rx`,
/// fed every 10 ms by a thread until dropped.
struct LiveWriter {
    stop: Arc<AtomicBool>,
    feeder: Option<std::thread::JoinHandle<()>>,
}

impl LiveWriter {
    fn start(seg: &Path) -> LiveWriter {
        let w = Arc::new(
            Writer::create(
                seg,
                &Config {
                    max_instances: 64,
                    max_families: 8,
                    max_members: 16,
                    damon_capacity: 0,
                    ..Config::default()
                },
            )
            .unwrap(),
        );
        let cpu = w
            .add_family(&FamilySpec::new(
                "task.cpu_time",
                "CPU time",
                "task",
                Kind::Counter,
                Unit::NS,
            ))
            .unwrap();
        let main = w.add_member(cpu, "main", &[]).unwrap();
        let long = w.add_member(cpu, LONG, &[]).unwrap();
        let bytes = w
            .add_family(&FamilySpec::new(
                "net.rx",
                "Bytes received",
                "",
                Kind::Counter,
                Unit::BYTES,
            ))
            .unwrap();
        let rx = w.add_member(bytes, "", &[]).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let feeder = {
            let stop = stop.clone();
            std::thread::spawn(move || {
                // Every 10 ms: 1 to 5 ms of CPU time for `main` (varying, so
                // that its share of a CPU changes from one sample to the
                // next), 2 ms for the long one, and a growing number of bytes.
                let mut i = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    w.member_add(&main, 1_000_000 + (i % 97) as i64 * 40_000)
                        .unwrap();
                    w.member_add(&long, 2_000_000).unwrap();
                    w.member_add(&rx, (i * 1000) as i64).unwrap();
                    i += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
            })
        };
        LiveWriter {
            stop,
            feeder: Some(feeder),
        }
    }
}

impl Drop for LiveWriter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(f) = self.feeder.take() {
            let _ = f.join();
        }
    }
}

/// The rows of the table that show instances of `task.cpu_time`, with
/// their row numbers.
fn task_rows(screen: &[String]) -> Vec<(usize, String)> {
    screen
        .iter()
        .enumerate()
        .filter(|(_, l)| l.starts_with("task.cpu_time{"))
        .map(|(k, l)| (k, l.clone()))
        .collect()
}

/// Where a row's text ends (its last column is right-aligned).
fn right_edge(row: &str) -> usize {
    row.trim_end().chars().count()
}

/// Starts perfabi-cat in the pane and waits until its live view shows
/// rates (not only new rows); returns the screen.
fn start_view(tmux: &Tmux, cat: &Path, seg: &Path) -> Vec<String> {
    start_view_by(tmux, "", "0.5", cat, seg)
}

/// [`start_view`], the command line starting with `launcher`, a sample
/// every `period` seconds.
fn start_view_by(tmux: &Tmux, launcher: &str, period: &str, cat: &Path, seg: &Path) -> Vec<String> {
    tmux.type_line(&format!(
        "{launcher}'{}' --watch {period} '{}'",
        cat.display(),
        seg.display()
    ));
    wait_for(Duration::from_secs(15), || {
        let s = tmux.capture();
        let rows = task_rows(&s);
        (tmux.var("alternate_on") == "1"
            && rows.len() == 2
            && rows.iter().all(|(_, r)| r.contains("% CPU")))
        .then_some(s)
    })
    .unwrap_or_else(|| panic!("no live view with rates:\n{}", tmux.capture().join("\n")))
}

#[test]
fn watch_on_a_terminal_redraws_in_place_and_restores_it() {
    if !have_tmux(TEST) {
        return;
    }
    assert_eq!(LONG.chars().count(), 60);
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let _writer = LiveWriter::start(&seg);
    let tmux = Tmux::start(&dir.path().join("tmux.sock"));
    let cat = perfabi_test_harness::workspace::perfabi_cat();

    // Redrawn in place: the same rows at the same places, new values.
    let first = start_view(&tmux, &cat, &seg);
    let second = wait_for(Duration::from_secs(10), || {
        let s = tmux.capture();
        let changed = task_rows(&s) != task_rows(&first);
        (changed && task_rows(&s).len() == 2).then_some(s)
    })
    .unwrap_or_else(|| panic!("the values never changed:\n{}", first.join("\n")));
    let (a, b) = (task_rows(&first), task_rows(&second));
    println!(
        "first:\n{}\nsecond:\n{}",
        first.join("\n"),
        second.join("\n")
    );
    let names = |rows: &[(usize, String)]| -> Vec<(usize, String)> {
        rows.iter()
            .map(|(k, r)| (*k, r.split_whitespace().next().unwrap().to_string()))
            .collect()
    };
    assert_eq!(names(&a), names(&b), "rows moved between two redraws");
    assert_eq!(first.len(), second.len());
    assert!(
        second[0].contains("writer alive") && second[0].contains("epoch 0x"),
        "status line: {}",
        second[0]
    );
    assert!(
        second.iter().any(|l| l.contains("q quit")),
        "no footer of keys"
    );
    assert!(
        !second.iter().any(|l| l.starts_with("live$")),
        "a scrolling log, not a screen of its own:\n{}",
        second.join("\n")
    );

    // Aligned: the 60-character instance shown whole, and every value
    // (right-aligned, the last column) ends in the same column.
    let long_row = &b
        .iter()
        .find(|(_, r)| r.contains(LONG))
        .unwrap_or_else(|| panic!("no whole {LONG} row:\n{}", second.join("\n")))
        .1;
    let rx_row = second
        .iter()
        .find(|l| l.starts_with("net.rx "))
        .unwrap_or_else(|| panic!("no net.rx row:\n{}", second.join("\n")));
    assert!(rx_row.contains("B/s"), "{rx_row}");
    let edges: Vec<usize> = b
        .iter()
        .map(|(_, r)| right_edge(r))
        .chain([right_edge(rx_row)])
        .collect();
    assert!(
        edges.iter().all(|&e| e == edges[0]),
        "values not aligned ({edges:?}):\n{}",
        second.join("\n")
    );
    let value_at = long_row.find("% CPU").unwrap();
    assert!(value_at > LONG.len(), "{long_row}");

    // Keys: per-CPU columns, a filter by name, sorting by rate.
    let screen_with = |what: &str, ok: &dyn Fn(&[String]) -> bool| {
        wait_for(Duration::from_secs(10), || {
            let s = tmux.capture();
            ok(&s).then_some(s)
        })
        .unwrap_or_else(|| panic!("{what}:\n{}", tmux.capture().join("\n")))
    };
    tmux.run(&["send-keys", "-t", "live", "c"]);
    screen_with("c shows no cpu0 column", &|s| {
        s.iter()
            .any(|l| l.starts_with("NAME") && l.contains("cpu0"))
    });
    tmux.run(&["send-keys", "-t", "live", "c"]);
    screen_with("c again keeps the cpu0 column", &|s| {
        s.iter()
            .any(|l| l.starts_with("NAME") && !l.contains("cpu0"))
    });
    tmux.run(&["send-keys", "-t", "live", "/"]);
    tmux.run(&["send-keys", "-t", "live", "-l", "MAIN"]);
    tmux.run(&["send-keys", "-t", "live", "Enter"]);
    screen_with("the filter MAIN shows other rows", &|s| {
        let rows = task_rows(s);
        rows.len() == 1
            && rows[0].1.starts_with("task.cpu_time{task=main}")
            && !s.iter().any(|l| l.starts_with("net.rx"))
            && s.iter().any(|l| l.contains("filter (MAIN)"))
    });
    tmux.run(&["send-keys", "-t", "live", "Escape"]);
    screen_with("Esc leaves the filter on", &|s| task_rows(s).len() == 2);
    tmux.run(&["send-keys", "-t", "live", "s"]);
    screen_with("s does not sort by rate", &|s| {
        let pct: Vec<f64> = task_rows(s)
            .iter()
            .filter_map(|(_, r)| {
                r.split_whitespace()
                    .rev()
                    .nth(1)?
                    .trim_end_matches('%')
                    .parse()
                    .ok()
            })
            .collect();
        s.iter().any(|l| l.contains("sort (rate)")) && pct.len() == 2 && pct[0] >= pct[1]
    });

    // `q`: the shell gets its terminal back.
    tmux.run(&["send-keys", "-t", "live", "q"]);
    wait_for(Duration::from_secs(10), || {
        (tmux.var("alternate_on") == "0").then_some(())
    })
    .expect("q left the alternate screen");
    let after = tmux.capture();
    assert!(
        after
            .iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim_end())
            == Some("live$")
            && !after.iter().any(|l| l.contains("q quit")),
        "not a clean shell after q:\n{}",
        after.join("\n")
    );
    assert_eq!(tmux.var("cursor_flag"), "1", "cursor left hidden");
    shell_is_cooked(&tmux, "AFTER-Q");

    // SIGTERM: the same.
    start_view(&tmux, &cat, &seg);
    let pid = wait_for(Duration::from_secs(5), || shell_child(&tmux)).expect("perfabi-cat's pid");
    let st = Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    wait_for(Duration::from_secs(10), || {
        (tmux.var("alternate_on") == "0").then_some(())
    })
    .expect("SIGTERM left the alternate screen");
    assert_eq!(tmux.var("cursor_flag"), "1", "cursor left hidden");
    shell_is_cooked(&tmux, "AFTER-TERM");
}

/// The state letter of process `pid` in /proc (`None` once reaped).
fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

/// A view whose terminal goes away (its tmux server killed) ends within
/// a second or two, instead of spinning on a hung-up terminal: once with
/// SIGHUP delivered, once with SIGHUP blocked and a sample every 4 s (so
/// that neither the signal nor a failed redraw, only its own check of the
/// terminal, can notice in time).
#[test]
fn a_view_whose_terminal_goes_away_exits() {
    if !have_tmux(TEST) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg");
    let _writer = LiveWriter::start(&seg);
    let cat = perfabi_test_harness::workspace::perfabi_cat();
    let block_hup = "python3 -c 'import os, signal, sys; \
        signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGHUP]); \
        os.execv(sys.argv[1], sys.argv[1:])' ";
    for (n, launcher, period) in [("delivered", "", "0.5"), ("blocked", block_hup, "4")] {
        let tmux = Tmux::start(&dir.path().join(format!("tmux-{n}.sock")));
        start_view_by(&tmux, launcher, period, &cat, &seg);
        let pid =
            wait_for(Duration::from_secs(5), || shell_child(&tmux)).expect("perfabi-cat's pid");
        if n == "blocked" {
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
            let blocked = status
                .lines()
                .find_map(|l| l.strip_prefix("SigBlk:"))
                .map(|m| u64::from_str_radix(m.trim(), 16).unwrap())
                .unwrap();
            assert_ne!(blocked & 1, 0, "SIGHUP is not blocked in perfabi-cat");
        }
        drop(tmux);
        let gone = wait_for(Duration::from_secs(3), || {
            matches!(state(pid), None | Some('Z') | Some('X')).then_some(())
        });
        if gone.is_none() {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            panic!(
                "SIGHUP {n}: perfabi-cat outlived its terminal by 3 s (state {:?})",
                state(pid)
            );
        }
    }
}
