//! perfabi-cat's DAMON views over time (`--heatmap`, `--wss`) as a user
//! runs them: on a live segment whose writer publishes a hot band, checked
//! from the text grid a person sees (rows parsed back into address ranges)
//! and from `--json`; and every bad value refused in one line.

use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use perfabi::damon::{Aggregation, Intervals, Region};
use perfabi_shm::writer::{Config, Writer};

/// Where the hot band of the live tests lies: 2 MiB hot of 16 MiB.
const BASE: u64 = 0x7f00_0000_0000;
const HOT_END: u64 = BASE + (2 << 20);
const END: u64 = BASE + (16 << 20);

fn cat(args: &[&str]) -> Output {
    Command::new(perfabi_test_harness::workspace::perfabi_cat())
        .args(args)
        .output()
        .expect("run perfabi-cat")
}

fn text(b: &[u8]) -> String {
    String::from_utf8(b.to_vec()).unwrap()
}

/// One row of a text heatmap: its address range and its cells.
#[derive(Debug)]
struct Row {
    lo: u64,
    hi: u64,
    cells: Vec<char>,
}

/// The rows of the first heatmap in `out`, lowest addresses first, each
/// with the addresses the header's range and the number of rows give it
/// (row k of n over lo..hi covers lo + span·k/n to lo + span·(k+1)/n);
/// the tick labels on the left axis must agree.
fn heatmap_rows(out: &str) -> Vec<Row> {
    let head = out
        .lines()
        .find(|l| l.starts_with("heatmap of addresses "))
        .unwrap_or_else(|| panic!("no heatmap header in {out}"));
    let words: Vec<&str> = head.split_whitespace().collect();
    let hex = |w: &str| u64::from_str_radix(w.trim_start_matches("0x"), 16).unwrap();
    let (lo, hi) = (hex(words[3]), hex(words[5]));
    let lines: Vec<&str> = out
        .lines()
        .skip_while(|l| !l.starts_with("heatmap of addresses "))
        .skip(1)
        .take_while(|l| l.contains('┤') || l.contains('│'))
        .collect();
    let n = lines.len() as u128;
    let span = u128::from(hi - lo);
    let edge = |k: u128| lo + (span * k / n) as u64;
    lines
        .iter()
        .rev()
        .enumerate()
        .map(|(k, l)| {
            let (label, cells) = l.split_once(['┤', '│']).unwrap();
            let (a, b) = (edge(k as u128), edge(k as u128 + 1));
            if l.contains('┤') {
                assert_eq!(hex(label.trim()), a, "tick label of row {k}: {l}");
            }
            Row {
                lo: a,
                hi: b,
                cells: cells.chars().collect(),
            }
        })
        .collect()
}

/// Checks that every row inside `hot` is hottest ('@') in every column and
/// every row inside `cold` is coldest (' '), and that there are some of
/// each; returns how many of each.
fn assert_band(rows: &[Row], hot: (u64, u64), cold: (u64, u64), out: &str) -> (usize, usize) {
    let inside = |r: &Row, (a, b): (u64, u64)| a <= r.lo && r.hi <= b;
    let (mut h, mut c) = (0, 0);
    for r in rows {
        if inside(r, hot) {
            assert!(r.cells.iter().all(|&x| x == '@'), "hot row {r:?}\n{out}");
            h += 1;
        }
        if inside(r, cold) {
            assert!(r.cells.iter().all(|&x| x == ' '), "cold row {r:?}\n{out}");
            c += 1;
        }
    }
    assert!(h > 0 && c > 0, "{h} hot and {c} cold rows\n{out}");
    (h, c)
}

/// A writer at `path` publishing, every 100 ms until `stop`, an
/// aggregation of 16 regions of 1 MiB from [`BASE`], the first two
/// accessed in every sample.
fn publish_hot_band(path: &Path, stop: &AtomicBool, ready: impl FnOnce()) {
    let w = Writer::create(
        path,
        &Config {
            max_instances: 8,
            damon_capacity: 64,
            ..Config::default()
        },
    )
    .unwrap();
    let iv = Intervals {
        sample_us: 5_000,
        aggr_us: 100_000,
    };
    let regions: Vec<Region> = (0..16u64)
        .map(|i| Region {
            start: BASE + (i << 20),
            end: BASE + ((i + 1) << 20),
            nr_accesses: if i < 2 { 20 } else { 0 },
            age: 1,
        })
        .collect();
    let a = Aggregation::new(42, 3, iv, regions);
    w.publish_damon(&a).unwrap();
    ready();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        w.publish_damon(&a).unwrap();
    }
}

/// Sets its flag when dropped, a failed assertion's unwinding included.
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Runs `f` with a live segment whose writer publishes the hot band (and
/// stops it however `f` ends).
fn with_live_segment(f: impl FnOnce(&str)) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let stop = AtomicBool::new(false);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        s.spawn(|| publish_hot_band(&path, &stop, move || tx.send(()).unwrap()));
        rx.recv().unwrap();
        f(path.to_str().unwrap());
    });
}

#[test]
fn a_live_segment_shows_its_hot_band_over_the_whole_collection() {
    with_live_segment(|p| {
        let args = [p, "--heatmap", "--duration", "1.5", "--color", "never"];
        let out = cat(&[&args[..], &["--rows", "16", "--cols", "30"]].concat());
        let (so, se) = (text(&out.stdout), text(&out.stderr));
        assert_eq!(out.status.code(), Some(0), "{se}");
        assert!(
            se.contains("collecting DAMON aggregations") && se.lines().count() == 1,
            "{se}"
        );
        assert!(so.starts_with("monitor 42 target 3: "), "{so}");
        let rows = heatmap_rows(&so);
        assert_eq!(rows.len(), 16);
        assert!(rows.iter().all(|r| r.cells.len() == 30), "{so}");
        // The whole 16 MiB is the busiest run: a row per MiB.
        assert_eq!((rows[0].lo, rows[15].hi), (BASE, END));
        assert_eq!(
            assert_band(&rows, (BASE, HOT_END), (HOT_END, END), &so),
            (2, 14)
        );

        // --json: the same band in the numbers, over about 1.5 s.
        let out = cat(&[&args[..], &["--json", "--rows", "8", "--cols", "10"]].concat());
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let s = &doc["sections"][0];
        assert_eq!(
            (s["monitor_id"].as_u64(), s["target_id"].as_u64()),
            (Some(42), Some(3))
        );
        let n = s["aggregations"].as_u64().unwrap();
        assert!((10..=17).contains(&n), "{n} aggregations in 1.5 s");
        let h = &s["heatmap"];
        assert_eq!(h["addrs"][0].as_u64(), Some(BASE));
        assert_eq!(h["addrs"][8].as_u64(), Some(END));
        let cells = h["cells"].as_array().unwrap();
        assert!(
            cells[0]
                .as_array()
                .unwrap()
                .iter()
                .all(|c| c.as_f64() == Some(1.0)),
            "{h}"
        );
        assert!(
            cells[1..]
                .iter()
                .flat_map(|r| r.as_array().unwrap())
                .all(|c| c.as_f64() == Some(0.0)),
            "{h}"
        );
    });
}

#[test]
fn wss_of_a_live_segment_is_the_hot_band() {
    with_live_segment(|p| {
        let out = cat(&[
            p,
            "--wss",
            "--json",
            "--duration",
            "1",
            "--percentiles",
            "0,50,100",
        ]);
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let w = &doc["sections"][0]["wss"];
        let want = serde_json::json!([
            { "p": 0, "bytes": 2 << 20 }, { "p": 50, "bytes": 2 << 20 }, { "p": 100, "bytes": 2 << 20 }
        ]);
        assert_eq!(w["percentiles"], want, "{doc}");
        let out = text(&cat(&[p, "--wss", "--duration", "1", "--cols", "40"]).stdout);
        assert!(
            out.contains("       100      2.0 MiB\n      mean      2.0 MiB\n"),
            "{out}"
        );
        // The chart: full bars at the top line from the first aggregation.
        let top = out.lines().find(|l| l.starts_with("2.0 MiB ┤")).unwrap();
        assert_eq!(top.split_once('┤').unwrap().1, "█".repeat(40), "{out}");
    });
}

/// perfabi-cat `args`: exit status `code`, and on stderr one line (after
/// the note that it collects) containing `want`.
fn refused(args: &[&str], code: i32, want: &str) {
    let out = cat(args);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(code), "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
    if !err.starts_with("error:") {
        // Ours, not clap's usage text.
        let lines = err
            .lines()
            .filter(|l| !l.contains("collecting DAMON aggregations"));
        assert_eq!(lines.count(), 1, "{args:?}: {err}");
    }
}

#[test]
fn bad_values_are_refused_in_one_line() {
    with_live_segment(|p| {
        let d = ["--duration", "0.3"];
        let run = |more: &[&str], code, want| {
            refused(&[&[p, "--heatmap"][..], &d, more].concat(), code, want)
        };
        run(
            &["--address-range", "0x2000", "0x1000"],
            2,
            "the end must be above the start",
        );
        run(
            &["--address-range", "0x1000", "lots"],
            2,
            "is not an address",
        );
        run(
            &["--address-range", "0x1000", "+4K"],
            2,
            "holds no region of monitor 42 target 3",
        );
        run(
            &["--time-range", "100", "end"],
            2,
            "after the end of the window",
        );
        run(
            &["--time-range", "2", "1"],
            2,
            "the end must be after the start",
        );
        run(
            &["--target", "9"],
            2,
            "no aggregation of target 9 (there are: monitor 42 target 3)",
        );
        run(
            &["--monitor", "1", "--target", "3"],
            2,
            "no aggregation of monitor 1 target 3",
        );
        run(&["--percentiles", "50,101"], 2, "101");
        run(&["--count", "2"], 2, "--count counts --watch reports");
        // Options of the views need a view.
        refused(&[p, "--rows", "8"], 2, "--heatmap");
    });
    // A segment without DAMON aggregations: nothing to draw (retry later).
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let _w = Writer::create(&path, &Config::default()).unwrap();
    refused(
        &[path.to_str().unwrap(), "--wss", "--duration", "0.2"],
        5,
        "no DAMON aggregation in ",
    );
}
