//! perfabi-cat's DAMON views over time (`--heatmap`, `--wss`) as a user
//! runs them: on the shipped record of a 4 MiB hot range in 64 MiB (trace
//! text and damo's record of it) and on a live segment whose writer
//! publishes a hot band, checked from what a person sees (the text grid's
//! rows parsed back into address ranges, the images' pixels and
//! rectangles), from `--json`, and the working set's percentiles against
//! the test's own computation from the trace; and every bad value or
//! hostile record refused in one line.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use perfabi::damon::{Aggregation, Intervals, Region};
use perfabi_shm::writer::{Config, Writer};
use perfabi_test_harness::deadline::{Deadline, WITNESS_LIMIT};
use perfabi_test_harness::image::{self, Area, Image, Rgb};
use perfabi_test_harness::tmux::{have_tmux, shell_is_cooked, wait_for, Tmux};
use perfabi_test_harness::{run_limited, Finished};

/// Where the hot band of the live tests lies: 2 MiB hot of 16 MiB.
const BASE: u64 = 0x7f00_0000_0000;
const HOT_END: u64 = BASE + (2 << 20);
const END: u64 = BASE + (16 << 20);

/// perfabi-cat `args`, killed if it runs a minute (a hang fails the test).
fn cat(args: &[&str]) -> Finished {
    let bin = perfabi_test_harness::workspace::perfabi_cat();
    run_limited(Command::new(bin).args(args), Duration::from_secs(60))
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
/// accessed in every sample; `published` counts the publications.
fn publish_hot_band(path: &Path, stop: &AtomicBool, published: &AtomicU64, ready: impl FnOnce()) {
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
    published.fetch_add(1, Ordering::Relaxed);
    ready();
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(Duration::from_millis(100));
        w.publish_damon(&a).unwrap();
        published.fetch_add(1, Ordering::Relaxed);
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
    let published = AtomicU64::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        s.spawn(|| publish_hot_band(&path, &stop, &published, move || tx.send(()).unwrap()));
        rx.recv().unwrap();
        f(path.to_str().unwrap());
    });
}

#[test]
fn a_live_segment_shows_its_hot_band_over_the_whole_collection() {
    with_live_segment(|p| {
        let args = [p, "--heatmap", "--duration", "1.5", "--color", "never"];
        let out = cat(&[&args[..], &["--rows", "16", "--cols", "30"]].concat());
        let (so, se) = (&out.stdout, &out.stderr);
        assert_eq!(out.code(), Some(0), "{se}");
        assert!(
            se.contains("collecting DAMON aggregations") && se.lines().count() == 1,
            "{se}"
        );
        assert!(so.starts_with("monitor 42 target 3: "), "{so}");
        let rows = heatmap_rows(so);
        assert_eq!(rows.len(), 16);
        assert!(rows.iter().all(|r| r.cells.len() == 30), "{so}");
        // The whole 16 MiB is the busiest run: a row per MiB.
        assert_eq!((rows[0].lo, rows[15].hi), (BASE, END));
        assert_eq!(
            assert_band(&rows, (BASE, HOT_END), (HOT_END, END), so),
            (2, 14)
        );

        // --json: the same band in the numbers, over about 1.5 s.
        let out = cat(&[&args[..], &["--json", "--rows", "8", "--cols", "10"]].concat());
        let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
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
        let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        let w = &doc["sections"][0]["wss"];
        let want = serde_json::json!([
            { "p": 0, "bytes": 2 << 20 }, { "p": 50, "bytes": 2 << 20 }, { "p": 100, "bytes": 2 << 20 }
        ]);
        assert_eq!(w["percentiles"], want, "{doc}");
        let out = cat(&[p, "--wss", "--duration", "1", "--cols", "40"]).stdout;
        assert!(
            out.contains("       100      2.0 MiB\n      mean      2.0 MiB\n"),
            "{out}"
        );
        // The chart: full bars at the top line from the first aggregation.
        let top = out.lines().find(|l| l.starts_with("2.0 MiB ┤")).unwrap();
        assert_eq!(top.split_once('┤').unwrap().1, "█".repeat(40), "{out}");
    });
}

#[test]
fn watch_without_a_terminal_prints_a_report_per_period_of_a_rolling_window() {
    with_live_segment(|p| {
        let args = [
            p,
            "--heatmap",
            "--watch",
            "0.5",
            "--count",
            "2",
            "--color",
            "never",
        ];
        let out = cat(&[&args[..], &["--rows", "8", "--cols", "20", "--window", "3"]].concat());
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        let reports: Vec<&str> = out.stdout.split("--- ").skip(1).collect();
        assert_eq!(reports.len(), 2, "{}", out.stdout);
        for r in &reports {
            assert!(r.contains("monitor 42 target 3: "), "{r}");
            let rows = heatmap_rows(r);
            assert_band(&rows, (BASE, HOT_END), (HOT_END, END), r);
        }
        // The second report: a rolling window of the latest 3.
        assert!(reports[1].contains(": 3 aggregations"), "{}", reports[1]);

        let args = [p, "--wss", "--json", "--watch", "0.4", "--count", "3"];
        let out = cat(&args);
        let lines: Vec<serde_json::Value> = out
            .stdout
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 3, "{}", out.stdout);
        let elapsed: Vec<f64> = lines
            .iter()
            .map(|l| l["elapsed_s"].as_f64().unwrap())
            .collect();
        assert!(elapsed.windows(2).all(|w| w[1] > w[0]), "{elapsed:?}");
        for l in &lines {
            let p = &l["sections"][0]["wss"]["percentiles"];
            assert_eq!(
                p[4],
                serde_json::json!({ "p": 100, "bytes": 2 << 20 }),
                "{l}"
            );
        }
    });
}

#[test]
fn watch_on_a_terminal_redraws_the_views_in_place_and_q_gives_the_terminal_back() {
    if !have_tmux("damon_views") {
        return;
    }
    with_live_segment(|p| {
        let dir = tempfile::tempdir().unwrap();
        let tmux = Tmux::start(&dir.path().join("tmux.sock"));
        let cat = perfabi_test_harness::workspace::perfabi_cat();
        tmux.type_line(&format!(
            "'{}' '{p}' --heatmap --wss --watch 0.5 --color never",
            cat.display()
        ));
        let status = |s: &[String]| s.iter().find(|l| l.starts_with("q quit")).cloned();
        let first = wait_for(Duration::from_secs(15), || {
            let s = tmux.capture();
            let drawn = s.iter().any(|l| l.starts_with("heatmap of addresses"));
            (tmux.var("alternate_on") == "1" && drawn && status(&s).is_some()).then_some(s)
        })
        .unwrap_or_else(|| panic!("no view:\n{}", tmux.capture().join("\n")));
        // Redrawn in place: the status line says more was collected.
        let screen = wait_for(Duration::from_secs(10), || {
            let s = tmux.capture();
            (status(&s).is_some() && status(&s) != status(&first)).then_some(s)
        })
        .unwrap_or_else(|| panic!("never redrawn:\n{}", first.join("\n")));
        let text = screen.join("\n");
        assert!(text.starts_with("monitor 42 target 3: "), "{text}");
        assert_band(&heatmap_rows(&text), (BASE, HOT_END), (HOT_END, END), &text);
        assert!(text.contains("       100      2.0 MiB"), "{text}");
        assert!(!screen.iter().any(|l| l.starts_with("live$")), "{text}");
        tmux.run(&["send-keys", "-t", "live", "q"]);
        wait_for(Duration::from_secs(10), || {
            (tmux.var("alternate_on") == "0").then_some(())
        })
        .expect("q left the alternate screen");
        assert_eq!(tmux.var("cursor_flag"), "1", "cursor left hidden");
        shell_is_cooked(&tmux, "AFTER-Q");
    });
}

/// perfabi-cat `args`: exit status `code`, and on stderr one line (after
/// the note that it collects) containing `want`.
fn refused(args: &[&str], code: i32, want: &str) {
    let out = cat(args);
    let err = &out.stderr;
    assert_eq!(out.code(), Some(code), "{args:?}: {err}");
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
        let d = [p, "--heatmap", "--duration", "0.3"];
        let cases: [(&[&str], &str); 9] = [
            (
                &["--address-range", "0x2000", "0x1000"],
                "the end must be above the start",
            ),
            (&["--address-range", "0x1000", "lots"], "is not an address"),
            (
                &["--address-range", "0x1000", "+4K"],
                "holds no region of monitor 42 target 3",
            ),
            (
                &["--time-range", "100", "end"],
                "after the end of the window",
            ),
            (
                &["--time-range", "2", "1"],
                "the end must be after the start",
            ),
            (
                &["--target", "9"],
                "no aggregation of target 9 (there are: monitor 42 target 3)",
            ),
            (
                &["--monitor", "1", "--target", "3"],
                "no aggregation of monitor 1 target 3",
            ),
            (&["--percentiles", "50,101"], "101"),
            (&["--count", "2"], "--count counts --watch reports"),
        ];
        for (more, want) in cases {
            refused(&[&d[..], more].concat(), 2, want);
        }
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

/// A file of the shipped record (`exportd/records/README.md`):
/// `guest-6.12-vaddr-hot4of64.EXT`.
fn record(ext: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../exportd/records")
        .join(format!("guest-6.12-vaddr-hot4of64.{ext}"))
}

/// The record's workload, from the trace's first line
/// (`PERFABI-TRACE-BEGIN … workload=START END HOT_END PID`): it mapped
/// `start..end` and kept rewriting `start..hot_end`.
struct Workload {
    start: u64,
    end: u64,
    hot_end: u64,
}

fn workload() -> Workload {
    let text = std::fs::read_to_string(record("trace")).unwrap();
    let first = text.lines().next().unwrap();
    let w: Vec<u64> = first
        .split("workload=")
        .nth(1)
        .unwrap()
        .split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect();
    Workload {
        start: w[0],
        end: w[1],
        hot_end: w[2],
    }
}

/// `n` as perfabi-cat's options take an address.
fn hex(n: u64) -> String {
    format!("{n:#x}")
}

/// The cell character of a frequency, as the legend documents the scale:
/// ' .:-=+*#%@' in even steps from 0 % to 100 %, '░' where nothing was
/// monitored.
fn documented_char(v: &serde_json::Value) -> char {
    match v.as_f64() {
        None => '░',
        Some(f) => " .:-=+*#%@".as_bytes()[(f * 9.0).round() as usize] as char,
    }
}

#[test]
fn the_shipped_record_draws_its_hot_range_at_its_addresses_over_the_whole_time() {
    let w = workload();
    for ext in ["trace", "damo.json.zlib"] {
        let from = record(ext);
        let args = [
            "--heatmap",
            "--from",
            from.to_str().unwrap(),
            "--rows",
            "32",
            "--cols",
            "60",
        ];
        let out = cat(&[&args[..], &["--color", "never"]].concat());
        assert_eq!(out.code(), Some(0), "{ext}: {}", out.stderr);
        let so = &out.stdout;
        assert!(
            so.contains(": 17 aggregations (sampling 5.0 ms, aggregation 100.0 ms)"),
            "{so}"
        );
        let rows = heatmap_rows(so);
        assert_eq!(rows.len(), 32);
        assert!(rows.iter().all(|r| r.cells.len() == 60), "{so}");
        // The busiest run of regions starts at the mapping.
        assert_eq!(rows[0].lo, w.start, "{so}");
        let (hot, cold) = assert_band(&rows, (w.start, w.hot_end), (w.hot_end, w.end), so);
        assert!(hot >= 1 && cold >= 25, "{hot} {cold}");
        // The time axis runs over the whole record (1.98 s).
        let axis = so
            .lines()
            .find(|l| l.trim_start().starts_with("0.0 s"))
            .unwrap();
        assert!(axis.ends_with("2.0 s"), "{so}");
        if ext == "trace" {
            assert!(
                so.starts_with("the record's workload: pid 156 mapped "),
                "{so}"
            );
        }

        // --json: the same grid in numbers.
        let out = cat(&[&args[..], &["--json"]].concat());
        let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
        let s = &doc["sections"][0];
        assert_eq!(s["aggregations"], 17);
        let window = s["window_ns"].as_u64().unwrap();
        assert!((1_900_000_000..2_100_000_000).contains(&window), "{window}");
        let h = &s["heatmap"];
        assert_eq!(h["address_range"]["chosen"], "busiest");
        let times = h["times_ns"].as_array().unwrap();
        assert_eq!(
            (times[0].as_u64(), times[60].as_u64()),
            (Some(0), Some(window))
        );
        let addrs: Vec<u64> = h["addrs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_u64().unwrap())
            .collect();
        let cells = h["cells"].as_array().unwrap();
        for (k, r) in rows.iter().enumerate() {
            assert_eq!((addrs[k], addrs[k + 1]), (r.lo, r.hi));
            let json_row: String = cells[k]
                .as_array()
                .unwrap()
                .iter()
                .map(documented_char)
                .collect();
            assert_eq!(json_row, r.cells.iter().collect::<String>(), "row {k}");
        }

        // In colour: the same lines, as wide.
        let plain = cat(&[&args[..], &["--color", "never"]].concat()).stdout;
        let coloured = cat(&[&args[..], &["--color", "always"]].concat()).stdout;
        assert!(coloured.contains("\x1b[48;"), "no background colour");
        let widths = |t: &str| -> Vec<usize> {
            t.lines()
                .map(|l| strip_escapes(l).chars().count())
                .collect()
        };
        assert_eq!(widths(&plain), widths(&coloured));
    }
}

/// `line` without its escape sequences.
fn strip_escapes(line: &str) -> String {
    let mut out = String::new();
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            chars.by_ref().find(|e| e.is_ascii_alphabetic());
        } else {
            out.push(c);
        }
    }
    out
}

#[test]
fn address_and_time_ranges_narrow_the_heatmap() {
    let w = workload();
    let from = record("trace");
    let from = from.to_str().unwrap();
    let (lo, hi) = (hex(w.start), hex(w.hot_end));
    let out = cat(&[
        "--heatmap",
        "--from",
        from,
        "--color",
        "never",
        "--rows",
        "16",
        "--cols",
        "40",
        "--address-range",
        &lo,
        &hi,
    ]);
    let rows = heatmap_rows(&out.stdout);
    assert_eq!((rows[0].lo, rows[15].hi), (w.start, w.hot_end));
    for r in &rows {
        assert!(r.cells.iter().all(|&c| c == '@'), "{r:?}\n{}", out.stdout);
    }
    assert!(
        out.stdout.contains("(4.0 MiB, --address-range)"),
        "{}",
        out.stdout
    );

    let args = [
        "--heatmap",
        "--from",
        from,
        "--rows",
        "8",
        "--cols",
        "20",
        "--time-range",
        "0.5",
        "1.5",
    ];
    let out = cat(&[&args[..], &["--json"]].concat());
    let s: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let s = &s["sections"][0];
    let times = s["heatmap"]["times_ns"].as_array().unwrap();
    assert_eq!(
        (times[0].as_u64(), times[20].as_u64()),
        (Some(500_000_000), Some(1_500_000_000))
    );
    assert_eq!(s["time_range_ns"]["chosen"], "given");
    // 116 ms apart: 8 or 9 aggregations start in a second.
    let n = s["aggregations"].as_u64().unwrap();
    assert!((8..=9).contains(&n), "{n}");
    let text = cat(&[&args[..], &["--color", "never"]].concat()).stdout;
    let axis = text
        .lines()
        .find(|l| l.trim_end().ends_with("1.5 s"))
        .unwrap();
    let first: f64 = axis.split_whitespace().next().unwrap().parse().unwrap();
    assert!((0.5..1.5).contains(&first), "{axis}");
}

/// The working set size of every complete aggregation of the shipped
/// trace, computed here from its `damon_aggregated` lines and nothing
/// else: an aggregation is a run of `nr_regions` lines of ascending
/// addresses (a run cut short, at the trace's start or end, is not one),
/// its working set the bytes of its regions accessed in at least
/// `min_accesses` samples.
fn trace_wss(min_accesses: u32) -> Vec<u64> {
    let text = std::fs::read_to_string(record("trace")).unwrap();
    let mut sizes = Vec::new();
    let mut run: Vec<(u64, u64, u32)> = Vec::new();
    for line in text.lines() {
        let Some(event) = line.split("damon_aggregated:").nth(1) else {
            continue;
        };
        // target_id=0 nr_regions=13 START-END: NR_ACCESSES AGE
        let f: Vec<&str> = event.split_whitespace().collect();
        let nr: usize = f[1].strip_prefix("nr_regions=").unwrap().parse().unwrap();
        let (a, b) = f[2].trim_end_matches(':').split_once('-').unwrap();
        let (a, b): (u64, u64) = (a.parse().unwrap(), b.parse().unwrap());
        if run.last().is_some_and(|&(last, _, _)| a <= last) {
            run.clear();
        }
        run.push((a, b, f[3].parse().unwrap()));
        if run.len() == nr {
            sizes.push(
                run.iter()
                    .filter(|r| r.2 >= min_accesses)
                    .map(|r| r.1 - r.0)
                    .sum(),
            );
            run.clear();
        }
    }
    sizes
}

#[test]
fn wss_percentiles_match_the_tests_own_computation_from_the_trace() {
    let ps = [0usize, 25, 50, 75, 90, 99, 100];
    for min in [1u32, 20] {
        let mut sizes = trace_wss(min);
        assert_eq!(sizes.len(), 17);
        let mean = sizes.iter().sum::<u64>() as f64 / sizes.len() as f64;
        sizes.sort_unstable();
        // damo's rule: the value at index ⌊len × p / 100⌋, the last for 100.
        let want: Vec<(usize, u64)> = ps
            .iter()
            .map(|&p| (p, sizes[(sizes.len() * p / 100).min(sizes.len() - 1)]))
            .collect();
        for ext in ["trace", "damo.json.zlib"] {
            let from = record(ext);
            let out = cat(&[
                "--wss",
                "--json",
                "--from",
                from.to_str().unwrap(),
                "--percentiles",
                "0,25,50,75,90,99,100",
                "--wss-min-accesses",
                &min.to_string(),
            ]);
            assert_eq!(out.code(), Some(0), "{}", out.stderr);
            let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
            let w = &doc["sections"][0]["wss"];
            let got: Vec<(usize, u64)> = w["percentiles"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| {
                    (
                        p["p"].as_u64().unwrap() as usize,
                        p["bytes"].as_u64().unwrap(),
                    )
                })
                .collect();
            assert_eq!(got, want, "{ext}, at least {min} accesses");
            assert!((w["mean"].as_f64().unwrap() - mean).abs() < 1e-6, "{w}");
            assert_eq!(w["series"].as_array().unwrap().len(), 17);
        }
    }
    // A threshold of every sample leaves out the aggregations that found
    // the hot range accessed in 19 of 20: the lowest percentile is 0.
    assert_eq!(trace_wss(20).iter().min(), Some(&0));
}

/// The address range of the heatmap perfabi-cat draws of the trace by
/// default (the busiest run of regions), from `--json`.
fn default_range(from: &str) -> (u64, u64) {
    let out = cat(&[
        "--heatmap",
        "--json",
        "--from",
        from,
        "--rows",
        "4",
        "--cols",
        "4",
    ]);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let r = &doc["sections"][0]["heatmap"]["address_range"];
    (r["start"].as_u64().unwrap(), r["end"].as_u64().unwrap())
}

/// viridis at 0 %: the colour of idle cells.
const IDLE: Rgb = (68, 1, 84);

/// Whether `c` is the hot end of viridis (85 % and above: yellow-green to
/// yellow), which neither white, grey, black nor the idle colour is.
fn is_hot(c: Rgb) -> bool {
    c.0 >= 150 && c.1 >= 200 && c.2 <= 70
}

/// Rows of the heatmap images drawn here (`--rows`).
const IMAGE_ROWS: u64 = 64;

/// The addresses of the heatmap row that holds all of a stripe `y0..y1`
/// of a plot area `area` of addresses `range` (low addresses at the
/// bottom, in [`IMAGE_ROWS`] rows of even size); `None` if the stripe
/// crosses from one row into another.
fn grid_row(area: &Area, range: (u64, u64), y0: f64, y1: f64) -> Option<(u64, u64)> {
    let row = |y: f64| ((area.y1 - y) / (area.y1 - area.y0) * IMAGE_ROWS as f64).floor() as i64;
    // The bottom edge is the row's; the top edge the start of the next.
    let k = row(y1);
    (k >= 0 && row(y0 + 1e-6) == k).then(|| {
        let span = u128::from(range.1 - range.0);
        let edge = |k: u128| range.0 + (span * k / u128::from(IMAGE_ROWS)) as u64;
        (edge(k as u128), edge(k as u128 + 1))
    })
}

#[test]
fn the_images_put_the_hot_range_at_its_addresses_over_the_whole_time() {
    let w = workload();
    let dir = tempfile::tempdir().unwrap();
    let from = record("trace");
    let from = from.to_str().unwrap();
    let range = default_range(from);
    let inside = |(a, b): (u64, u64), (lo, hi): (u64, u64)| lo <= a && b <= hi;
    let (hot, cold) = ((w.start, w.hot_end), (w.hot_end, w.end));

    // The image of the record's heatmap in file `name`, of IMAGE_ROWS.
    let rows = IMAGE_ROWS.to_string();
    let image_of = |name: &str| -> PathBuf {
        let path = dir.path().join(name);
        let file = path.to_str().unwrap();
        let out = cat(&[
            "--heatmap",
            "--from",
            from,
            "--rows",
            &rows,
            "--output",
            file,
        ]);
        assert_eq!(out.code(), Some(0), "{}", out.stderr);
        let wrote = format!("perfabi-cat: wrote {file}");
        assert_eq!(out.stderr.trim(), wrote);
        assert!(out.stdout.is_empty());
        path
    };
    let png = image_of("heat.png");
    let img = Image::decode(&std::fs::read(&png).unwrap());
    let area = image::plot_area(&img, |c| c == IDLE || is_hot(c));
    // The heatmap rows wholly in the hot range and wholly in the idle one.
    let span = u128::from(range.1 - range.0);
    let edge = |k: u64| range.0 + (span * u128::from(k) / u128::from(IMAGE_ROWS)) as u64;
    let rows_in = |r| {
        (0..IMAGE_ROWS)
            .filter(|&k| inside((edge(k), edge(k + 1)), r))
            .count()
    };
    let (hot_want, cold_want) = (rows_in(hot), rows_in(cold));
    assert!(hot_want >= 3 && cold_want >= 50, "{hot_want} {cold_want}");
    let (mut hot_rows, mut cold_rows) = (BTreeSet::new(), BTreeSet::new());
    for y in area.y0 as usize..area.y1 as usize {
        // Row edges round to a pixel: a pixel row and its neighbours.
        let Some(stripe) = grid_row(&area, range, y as f64 - 1.0, y as f64 + 2.0) else {
            continue;
        };
        let row: Vec<Rgb> = (area.x0 as usize..area.x1 as usize)
            .map(|x| img.at(x, y))
            .collect();
        if inside(stripe, hot) {
            assert!(
                row.iter().all(|&c| is_hot(c)),
                "pixel row {y} ({stripe:x?}) not hot across"
            );
            hot_rows.insert(stripe);
        }
        if inside(stripe, cold) {
            assert!(
                row.iter().all(|&c| c == IDLE),
                "pixel row {y} ({stripe:x?}) not idle across"
            );
            cold_rows.insert(stripe);
        }
    }
    // Every one of those rows was seen (in the pixels between its edges).
    assert_eq!((hot_rows.len(), cold_rows.len()), (hot_want, cold_want));

    let svg = image_of("heat.svg");
    let svg = std::fs::read_to_string(&svg).unwrap();
    let (area, cells) = svg_cells(&svg);
    let mut hot_width: BTreeMap<String, f64> = Default::default();
    for (a, fill) in &cells {
        // Its edges are rounded to whole units: its middle says its row.
        let mid = (a.y0 + a.y1) / 2.0;
        let Some(stripe) = grid_row(&area, range, mid - 0.5, mid + 0.5) else {
            panic!("{a:?} is not one row of {area:?}");
        };
        if inside(stripe, hot) {
            assert!(is_hot(*fill), "{a:?} {fill:?} in the hot range");
            *hot_width.entry(format!("{}", a.y0)).or_default() += a.x1 - a.x0;
        }
        if inside(stripe, cold) {
            assert_eq!(*fill, IDLE, "{a:?} in the idle range");
        }
    }
    assert_eq!(
        hot_width.len(),
        hot_want,
        "hot rows {hot_width:?} in {area:?}"
    );
    for (y, width) in &hot_width {
        let all = area.x1 - area.x0;
        assert!(
            (width - all).abs() < 0.5,
            "hot row at y {y}: {width} of {all}"
        );
    }
}

/// The plot area of an SVG heatmap and its cells (rectangles with their
/// colour): the area as wide as its widest idle rectangle (a row idle all
/// along), as high as the idle and hot cells within that width; the cells
/// every rectangle within it but the background (of cells that nothing
/// monitored) drawn under them all.
fn svg_cells(svg: &str) -> (Area, Vec<(Area, Rgb)>) {
    // Fills that are colours (`#rrggbb`; not `none`).
    let rgb = |fill: &str| {
        let c = u32::from_str_radix(fill.strip_prefix('#')?, 16).ok()?;
        Some(((c >> 16) as u8, (c >> 8) as u8, c as u8))
    };
    let rects: Vec<(Area, Rgb)> = image::rects(svg)
        .into_iter()
        .filter_map(|(a, f)| Some((a, rgb(&f)?)))
        .collect();
    let widest = rects
        .iter()
        .filter(|(_, c)| *c == IDLE)
        .map(|(a, _)| *a)
        .max_by(|a, b| (a.x1 - a.x0).total_cmp(&(b.x1 - b.x0)))
        .expect("no idle row");
    let across = |a: &Area| a.x0 >= widest.x0 && a.x1 <= widest.x1;
    let coloured: Vec<Area> = rects
        .iter()
        .filter(|(a, c)| across(a) && (*c == IDLE || is_hot(*c)))
        .map(|(a, _)| *a)
        .collect();
    let area = Area {
        x0: widest.x0,
        x1: widest.x1,
        y0: coloured.iter().map(|a| a.y0).fold(f64::MAX, f64::min),
        y1: coloured.iter().map(|a| a.y1).fold(0.0, f64::max),
    };
    let cells = rects
        .into_iter()
        .filter(|(a, _)| across(a) && a.y0 >= area.y0 && a.y1 <= area.y1)
        .filter(|(a, _)| a.y1 - a.y0 < (area.y1 - area.y0) / 2.0)
        .collect();
    (area, cells)
}

/// One line of a perfabi-cat recording (`--record`'s format): one
/// aggregation of each of two targets of monitor 1, of `regions` (start,
/// end), accessed in every sample.
fn two_targets_line(regions: &[(u64, u64)]) -> serde_json::Value {
    let regions: Vec<serde_json::Value> = regions
        .iter()
        .map(|&(start, end)| serde_json::json!({ "start": start, "end": end, "nr_accesses": 20, "age": 1 }))
        .collect();
    let agg = |target: u64| {
        serde_json::json!({
            "monitor_id": 1, "target_id": target, "aggregation": 1,
            "sample_us": 5000, "aggr_us": 100000, "regions": regions,
        })
    };
    serde_json::json!({
        "t_ns": 0, "epoch": "0x1", "generation": 1, "counters": {},
        "damon": [agg(0), agg(1)],
    })
}

/// A recording of two targets, each 1 MiB (see [`two_targets_line`]).
fn two_targets(dir: &Path) -> PathBuf {
    let path = dir.join("two.jsonl");
    let line = two_targets_line(&[(1 << 20, 2 << 20)]);
    std::fs::write(&path, format!("{line}\n")).unwrap();
    path
}

#[test]
fn hostile_or_unfit_records_are_refused_in_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let trace = record("trace");
    let run = |from: &Path, more: &[&str], code, want| {
        refused(
            &[&["--heatmap", "--from", from.to_str().unwrap()][..], more].concat(),
            code,
            want,
        )
    };
    // Not a regular file: refused at once, not read forever.
    let fifo = d.join("fifo");
    rustix::fs::mkfifoat(rustix::fs::CWD, &fifo, rustix::fs::Mode::from(0o644)).unwrap();
    run(&fifo, &[], 4, "fifo");
    let link = d.join("link.trace");
    std::os::unix::fs::symlink(&trace, &link).unwrap();
    run(&link, &[], 4, "link");
    let empty = d.join("empty.trace");
    std::fs::write(&empty, "").unwrap();
    run(&empty, &[], 4, "no complete damon_aggregated aggregation");
    let junk = d.join("junk");
    std::fs::write(&junk, [0xffu8, 0xfe, 0, 1, 2]).unwrap();
    run(&junk, &[], 4, "junk");
    run(&d.join("missing"), &[], 3, "missing");
    // A recording of regions DAMON never makes (ending before they start).
    let backwards = d.join("backwards.jsonl");
    let line = two_targets_line(&[(8 << 20, 4 << 20)]);
    std::fs::write(&backwards, format!("{line}\n")).unwrap();
    run(&backwards, &[], 4, "has regions that are not DAMON's");
    run(&trace, &["--max-record-size", "4K"], 4, "--max-record-size");
    // Values that do not fit the record.
    run(
        &trace,
        &["--time-range", "5", "end"],
        2,
        "after the end of the window",
    );
    run(
        &trace,
        &["--target", "7"],
        2,
        "no aggregation of target 7 (there are: monitor 160 target 0)",
    );
    run(
        &trace,
        &["--address-range", "0", "4K"],
        2,
        "holds no region",
    );
    run(
        &trace,
        &["--output", d.join("heat.jpg").to_str().unwrap()],
        2,
        ".svg or .png",
    );
    // --output draws one (monitor, target).
    let two = two_targets(d);
    let png = d.join("two.png");
    run(&two, &["--output", png.to_str().unwrap()], 2, "--output draws one monitor and target, and there are 2: choose one (--monitor 1 --target 0, --monitor 1 --target 1)");
    assert!(!png.exists());
    let out = cat(&[
        "--heatmap",
        "--from",
        two.to_str().unwrap(),
        "--target",
        "1",
        "--output",
        png.to_str().unwrap(),
    ]);
    assert_eq!(out.code(), Some(0), "{}", out.stderr);
    assert!(png.exists());
    // Without --output, a section each.
    let out = cat(&[
        "--heatmap",
        "--from",
        two.to_str().unwrap(),
        "--color",
        "never",
    ]);
    assert!(
        out.stdout.contains("monitor 1 target 0:") && out.stdout.contains("monitor 1 target 1:"),
        "{}",
        out.stdout
    );
}

/// A writer that closes its segment in the middle of `--duration` leaves
/// what was collected drawn, with a note, instead of an error that throws
/// it away.
#[test]
fn a_writer_that_closes_mid_collection_leaves_what_was_collected() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("seg");
    let stop = AtomicBool::new(false);
    let published = AtomicU64::new(0);
    let (tx, rx) = std::sync::mpsc::channel();
    let out = std::thread::scope(|s| {
        let _stop = StopOnDrop(&stop);
        s.spawn(|| publish_hot_band(&path, &stop, &published, move || tx.send(()).unwrap()));
        rx.recv().unwrap();
        // The writer closes once perfabi-cat is collecting (it says so
        // just before its first read) and two more aggregations are out,
        // not after a fixed time: a busy machine can take longer than
        // that to start perfabi-cat.
        let mut view = Command::new(perfabi_test_harness::workspace::perfabi_cat())
            .arg(&path)
            .args(["--heatmap", "--duration", "4", "--color", "never"])
            .args(["--rows", "16", "--cols", "20"])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (said, heard) = std::sync::mpsc::channel();
        let stderr = view.stderr.take().unwrap();
        let errors = s.spawn(move || {
            let mut text = String::new();
            for line in std::io::BufRead::lines(std::io::BufReader::new(stderr)) {
                let line = line.unwrap();
                if line.contains("collecting DAMON aggregations") {
                    let _ = said.send(());
                }
                text += &line;
                text.push('\n');
            }
            text
        });
        let until = Deadline::witness();
        let collecting = heard.recv_timeout(WITNESS_LIMIT).is_ok();
        until.assert(collecting, "perfabi-cat collecting");
        let from = published.load(Ordering::Relaxed);
        while published.load(Ordering::Relaxed) < from + 2 && !until.passed() {
            std::thread::sleep(Duration::from_millis(10));
        }
        stop.store(true, Ordering::Relaxed);
        let out = view.wait_with_output().unwrap();
        (
            out.status,
            String::from_utf8(out.stdout).unwrap(),
            errors.join().unwrap(),
        )
    });
    let (status, so, se) = (out.0, &out.1, &out.2);
    assert_eq!(status.code(), Some(0), "{se}");
    assert!(
        se.contains("stopped collecting after")
            && se.contains("closed")
            && se.contains("drawing what was collected"),
        "{se}"
    );
    let rows = heatmap_rows(so);
    assert_eq!(
        assert_band(&rows, (BASE, HOT_END), (HOT_END, END), so),
        (2, 14)
    );
}
