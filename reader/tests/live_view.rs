//! `perfabi-cat --watch` on a terminal, as a person sees it: run in a shell
//! inside a tmux pane (a private tmux server) against a live writer, the
//! screen is redrawn in place (same rows, new values), a 60-character
//! instance name leaves the value column aligned, and `q` (or SIGTERM)
//! gives the shell back its terminal: the main screen, the cursor shown,
//! canonical mode and echo on. Signals (two in a row, Ctrl-Z and `fg`)
//! give it back too, with the shell's exit statuses; a writer that goes
//! and comes back, or a segment busy for good, do not end the view; where
//! no screen can be drawn (`TERM=dumb`, no controlling terminal, `--count`)
//! `--watch` prints lines.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::tmux::{have_tmux, shell_child, shell_is_cooked, wait_for, Tmux};

mod support;

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

/// A live writer's segment in a temporary directory, a tmux pane and
/// perfabi-cat: what a test of the live view starts from (the pane's server
/// and the writer stop before the directory goes).
struct Bench {
    tmux: Tmux,
    writer: Option<LiveWriter>,
    seg: PathBuf,
    cat: PathBuf,
    dir: tempfile::TempDir,
}

impl Bench {
    /// A writer of `seg` (see [`LiveWriter`]) and a pane at its prompt.
    fn start() -> Bench {
        let dir = tempfile::tempdir().unwrap();
        let seg = dir.path().join("seg");
        Bench {
            writer: Some(LiveWriter::start(&seg)),
            tmux: Tmux::start(&dir.path().join("tmux.sock")),
            cat: perfabi_test_harness::workspace::perfabi_cat(),
            seg,
            dir,
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
    start_view_line(
        tmux,
        &format!(
            "{launcher}'{}' --watch {period} '{}'",
            cat.display(),
            seg.display()
        ),
    )
}

/// [`start_view`] by the shell command line `line`.
fn start_view_line(tmux: &Tmux, line: &str) -> Vec<String> {
    tmux.type_line(line);
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
    let Bench { tmux, seg, cat, .. } = &Bench::start();

    // Redrawn in place: the same rows at the same places, new values.
    let first = start_view(tmux, cat, seg);
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
    screen_with("s does not sort by value", &|s| {
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
        s.iter().any(|l| l.contains("sort (value within family)"))
            && pct.len() == 2
            && pct[0] >= pct[1]
    });

    // `q`: the shell gets its terminal back. Its prompt comes after the
    // main screen, once perfabi-cat has exited: waited for, as a busy
    // machine may show the screen without it for a while.
    tmux.run(&["send-keys", "-t", "live", "q"]);
    wait_for(Duration::from_secs(10), || {
        (tmux.var("alternate_on") == "0").then_some(())
    })
    .expect("q left the alternate screen");
    let clean = |s: &[String]| {
        s.iter()
            .rev()
            .find(|l| !l.trim().is_empty())
            .map(|l| l.trim_end())
            == Some("live$")
            && !s.iter().any(|l| l.contains("q quit"))
    };
    wait_for(Duration::from_secs(30), || {
        clean(&tmux.capture()).then_some(())
    })
    .unwrap_or_else(|| panic!("not a clean shell after q:\n{}", tmux.capture().join("\n")));
    assert_eq!(tmux.var("cursor_flag"), "1", "cursor left hidden");
    shell_is_cooked(tmux, "AFTER-Q");

    // SIGTERM: the same.
    start_view(tmux, cat, seg);
    let pid = wait_for(Duration::from_secs(5), || shell_child(tmux)).expect("perfabi-cat's pid");
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
    shell_is_cooked(tmux, "AFTER-TERM");
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

/// The `N` of the pane's last `rc=N/tag`, once the shell printed one (a
/// command line that ends with `; echo rc=$?/tag`). It is looked for at the
/// end of any line, not only as a line of its own: the screen the view
/// restores may put the shell's output after a prompt (`live$ rc=143/two`,
/// seen once in three runs under two busy loops), and the typed command's
/// own `rc=$?/tag` is no number.
fn exit_status(tmux: &Tmux, tag: &str) -> String {
    let end = format!("/{tag}");
    wait_for(Duration::from_secs(10), || {
        tmux.capture().iter().rev().find_map(|l| {
            let l = l.trim_end().strip_suffix(&end)?;
            let n = &l[l.rfind("rc=")? + 3..];
            (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())).then(|| n.to_string())
        })
    })
    .unwrap_or_else(|| panic!("no exit status:\n{}", tmux.capture().join("\n")))
}

/// Waits for the main screen back in the pane.
fn main_screen(tmux: &Tmux, after: &str) {
    wait_for(Duration::from_secs(10), || {
        (tmux.var("alternate_on") == "0").then_some(())
    })
    .unwrap_or_else(|| panic!("{after}: still the alternate screen"));
}

/// Sends `signals` (names for kill(1)) to `pid`, one right after the other.
fn kill(pid: i32, signals: &[&str]) {
    let script: Vec<String> = signals.iter().map(|s| format!("kill -{s} {pid}")).collect();
    let st = Command::new("sh")
        .args(["-c", &script.join("; ")])
        .status()
        .unwrap();
    assert!(st.success());
}

/// SIGINT ends the view with 130, as in line mode; two signals in a row
/// (the second before the first is heeded) restore the terminal before
/// the process exits with 128 + a signal; Ctrl-Z and SIGTSTP give the
/// shell its terminal, and `fg` the view back, drawn whole.
#[test]
fn signals_and_stops_give_the_terminal_back() {
    if !have_tmux(TEST) {
        return;
    }
    let Bench { tmux, seg, cat, .. } = &Bench::start();
    let line = format!(
        "'{}' --watch 0.5 '{}'; echo rc=$?/",
        cat.display(),
        seg.display()
    );

    start_view_line(tmux, &format!("{line}int"));
    let pid = wait_for(Duration::from_secs(5), || shell_child(tmux)).expect("perfabi-cat's pid");
    kill(pid, &["INT"]);
    main_screen(tmux, "SIGINT");
    assert_eq!(exit_status(tmux, "int"), "130");
    tmux.type_line("clear");

    start_view_line(tmux, &format!("{line}two"));
    let pid = wait_for(Duration::from_secs(5), || shell_child(tmux)).expect("perfabi-cat's pid");
    kill(pid, &["TERM", "INT"]);
    main_screen(tmux, "two signals");
    let rc = exit_status(tmux, "two");
    assert!(rc == "130" || rc == "143", "exit status {rc}");
    assert_eq!(tmux.var("cursor_flag"), "1", "cursor left hidden");
    shell_is_cooked(tmux, "AFTER-TWO");
    tmux.type_line("clear");

    for (how, stop) in [("Ctrl-Z", None), ("SIGTSTP", Some("TSTP"))] {
        start_view_line(tmux, &format!("{line}{how}"));
        let pid =
            wait_for(Duration::from_secs(5), || shell_child(tmux)).expect("perfabi-cat's pid");
        match stop {
            None => {
                tmux.run(&["send-keys", "-t", "live", "C-z"]);
            }
            Some(sig) => kill(pid, &[sig]),
        }
        main_screen(tmux, how);
        wait_for(Duration::from_secs(10), || {
            (state(pid) == Some('T')).then_some(())
        })
        .unwrap_or_else(|| panic!("{how}: not stopped ({:?})", state(pid)));
        assert_eq!(tmux.var("cursor_flag"), "1", "{how}: cursor left hidden");
        shell_is_cooked(tmux, &format!("AFTER-{how}"));
        tmux.type_line("clear; fg");
        wait_for(Duration::from_secs(10), || {
            let s = tmux.capture();
            (tmux.var("alternate_on") == "1"
                && task_rows(&s).len() == 2
                && s.iter().any(|l| l.contains("q quit")))
            .then_some(())
        })
        .unwrap_or_else(|| panic!("{how}, fg: no view:\n{}", tmux.capture().join("\n")));
        tmux.run(&["send-keys", "-t", "live", "q"]);
        main_screen(tmux, "q");
        // The rest of the stopped command line was dropped: `fg`'s status.
        tmux.type_line(&format!("echo rc=$?/fg-{how}"));
        assert_eq!(exit_status(tmux, &format!("fg-{how}")), "0");
        tmux.type_line("clear");
    }
}

/// A writer that goes leaves its last values on screen, marked stale at
/// the left of the status line, and one that comes back (a new epoch) is
/// followed: the view goes on, as `top` would.
#[test]
fn the_view_outlives_its_writer() {
    if !have_tmux(TEST) {
        return;
    }
    let mut bench = Bench::start();
    let writer = bench.writer.take();
    let Bench { tmux, seg, cat, .. } = &bench;
    start_view_by(tmux, "", "0.2", cat, seg);
    let pid = wait_for(Duration::from_secs(5), || shell_child(tmux)).expect("perfabi-cat's pid");
    let epoch = |s: &[String]| {
        s[0].split_whitespace()
            .skip_while(|w| *w != "epoch")
            .nth(1)
            .map(str::to_string)
    };
    let before = epoch(&tmux.capture()).expect("an epoch");
    drop(writer);
    wait_for(Duration::from_secs(10), || {
        let s = tmux.capture();
        (s[0].trim_start().starts_with("writer closed")
            || s[0].trim_start().starts_with("writer stale"))
        .then_some(())
    })
    .unwrap_or_else(|| panic!("no stale writer:\n{}", tmux.capture().join("\n")));
    assert!(matches!(state(pid), Some('S' | 'R')), "the view ended");
    let _again = LiveWriter::start(seg);
    wait_for(Duration::from_secs(15), || {
        let s = tmux.capture();
        (s[0].contains("writer alive") && epoch(&s).is_some_and(|e| e != before)).then_some(())
    })
    .unwrap_or_else(|| {
        panic!(
            "the new writer not followed:\n{}",
            tmux.capture().join("\n")
        )
    });
    tmux.run(&["send-keys", "-t", "live", "q"]);
    main_screen(tmux, "q");
}

/// A directory of two live writers' segments, watched as one: each
/// instance's row once, its rate the two writers' together; no epoch or
/// generation (a merged read has none) but the segments merged; a hostile
/// file in the directory shown at the left of the status line while the
/// rows stay.
#[test]
fn the_live_view_reads_a_directory_as_one() {
    if !have_tmux(TEST) {
        return;
    }
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir).unwrap();
    let _a = LiveWriter::start(&dir.join("live.1.00000000000000a1.perfabi"));
    let _b = LiveWriter::start(&dir.join("live.2.00000000000000a2.perfabi"));
    let tmux = Tmux::start(&top.path().join("tmux.sock"));
    let cat = perfabi_test_harness::workspace::perfabi_cat();
    let screen = start_view_by(&tmux, "", "0.3", &cat, &dir);
    assert!(
        screen[0].contains("2 segments merged") && !screen[0].contains("epoch"),
        "{}",
        screen[0]
    );
    assert_eq!(
        screen.iter().filter(|l| l.starts_with("net.rx ")).count(),
        1,
        "{}",
        screen.join("\n")
    );
    std::fs::write(dir.join("evil.3.00000000000000a3.perfabi"), [0u8; 4096]).unwrap();
    let screen = wait_for(Duration::from_secs(15), || {
        let s = tmux.capture();
        (s[0]
            .trim_start()
            .starts_with("2 segments merged, 1 left out")
            && task_rows(&s).len() == 2)
            .then_some(s)
    })
    .unwrap_or_else(|| panic!("the problem not shown:\n{}", tmux.capture().join("\n")));
    assert!(screen[0].contains("evil.3"), "{}", screen[0]);
    println!("{}", screen.join("\n"));
    tmux.run(&["send-keys", "-t", "live", "q"]);
    main_screen(&tmux, "q");
}

/// A segment busy for good (a writer dead mid-change): the view says so,
/// costs little CPU (no tight retry) and still quits at once on `q`.
#[test]
fn a_segment_busy_for_good_costs_little() {
    if !have_tmux(TEST) {
        return;
    }
    let mut bench = Bench::start();
    let busy = bench.dir.path().join("busy");
    support::busy_copy(&bench.seg, &busy);
    drop(bench.writer.take());
    let Bench { tmux, cat, .. } = &bench;
    tmux.type_line(&format!(
        "'{}' --watch 0.1 '{}'",
        cat.display(),
        busy.display()
    ));
    wait_for(Duration::from_secs(10), || {
        tmux.capture()[0].contains("sample skipped").then_some(())
    })
    .unwrap_or_else(|| panic!("no skipped sample:\n{}", tmux.capture().join("\n")));
    let pid = wait_for(Duration::from_secs(5), || shell_child(tmux)).expect("perfabi-cat's pid");
    let ticks = || -> u64 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        let f: Vec<&str> = stat
            .rsplit_once(") ")
            .unwrap()
            .1
            .split_whitespace()
            .collect();
        f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
    };
    let t0 = ticks();
    std::thread::sleep(Duration::from_secs(4));
    // Clock ticks of 10 ms: 4 s of a whole CPU is 400.
    let used = ticks() - t0;
    assert!(used < 100, "{used} ticks of CPU in 4 s on a busy segment");
    let asked = Instant::now();
    tmux.run(&["send-keys", "-t", "live", "q"]);
    main_screen(tmux, "q");
    assert!(
        asked.elapsed() < Duration::from_secs(2),
        "q took {:?}",
        asked.elapsed()
    );
}

/// Where no screen can be drawn, or for scripts, `--watch` prints lines:
/// `TERM=dumb`, no `TERM`, no controlling terminal (`setsid`), `--count`
/// (its lines stay on screen).
#[test]
fn watch_prints_lines_where_no_screen_fits() {
    if !have_tmux(TEST) {
        return;
    }
    let Bench { tmux, seg, cat, .. } = &Bench::start();
    let cmd = format!(
        "'{}' --watch 0.2 --count 2 '{}'",
        cat.display(),
        seg.display()
    );
    for (k, launcher) in ["", "TERM=dumb ", "env -u TERM ", "setsid -w "]
        .into_iter()
        .enumerate()
    {
        tmux.type_line(&format!(
            "clear; {launcher}{cmd} </dev/null; echo rc=$?/{k}"
        ));
        let rc = exit_status(tmux, &k.to_string());
        let s = tmux.capture();
        assert_eq!(rc, "0", "{launcher}:\n{}", s.join("\n"));
        assert_eq!(
            s.iter().filter(|l| l.starts_with("--- ")).count(),
            2,
            "{launcher}: not two blocks of lines:\n{}",
            s.join("\n")
        );
    }
    // Without --count, where no screen can be drawn: lines until stopped.
    let cmd = format!("'{}' --watch 0.2 '{}'", cat.display(), seg.display());
    for (k, launcher) in ["TERM=dumb ", "setsid -w "].into_iter().enumerate() {
        tmux.type_line(&format!(
            "clear; {launcher}timeout -s INT 1 {cmd} </dev/null; echo rc=$?/t{k}"
        ));
        let rc = exit_status(tmux, &format!("t{k}"));
        let s = tmux.capture();
        assert!(
            s.iter().any(|l| l.starts_with("--- ")) && !s.iter().any(|l| l.contains("q quit")),
            "{launcher} (rc {rc}): no lines:\n{}",
            s.join("\n")
        );
        assert!(
            !s.iter().any(|l| l.contains("No such device")),
            "{}",
            s.join("\n")
        );
    }
}
