//! The table: each writer program's ns per run beside its floor's on the
//! same tracepoint, per window, their ratio and its spread, the issue's
//! target for it; the daemon's CPU share per window.

use std::collections::HashMap;
use std::time::Duration;

use crate::floor::FloorProgram;
use crate::stats::{Program, Totals};
use crate::workload::Work;

/// One measured window.
pub struct Run {
    /// Its length.
    pub wall: Duration,
    /// What each program did in it.
    pub delta: HashMap<u32, Totals>,
    /// The daemon's utime + stime in it, in clock ticks.
    pub daemon_ticks: u64,
    /// The daemon's time on a CPU in it (schedstat), in ns.
    pub daemon_ns: u64,
}

/// Everything the table shows.
pub struct Report<'a> {
    /// The daemon's tracepoint programs.
    pub writer: &'a [Program],
    /// The floors attached.
    pub floors: &'a [FloorProgram],
    /// The windows.
    pub runs: &'a [Run],
    /// Clock ticks per second (`/proc/PID/stat`'s unit).
    pub ticks_per_s: u64,
    /// What the workload did over the whole run.
    pub work: Work,
    /// `kernel.bpf_stats_enabled` before and after.
    pub sysctl: (String, String),
    /// Whether the floors were attached first (and run first).
    pub floors_first: bool,
}

/// What a writer program does per event, and the target for its
/// ratio (item 6: counter updates <= 1.5x the floor, histogram updates
/// <= 2.5x).
fn described(name: &str) -> (&'static str, Option<(f64, &'static str)>) {
    match name {
        "tp_migrate" | "raw_migrate" => ("one counter add", Some((1.5, "counter"))),
        "tp_wakeup" | "raw_wakeup" | "tp_wakeup_new" | "raw_wakeup_new" => (
            "a counter add and the woken task's stamp stored (LRU hash update)",
            None,
        ),
        "tp_switch" | "raw_switch" => (
            "a counter add, the heartbeat's jiffy checked (a clock read once a jiffy), stamps looked up and \
             deleted (LRU hash), a clock read and a histogram update when a stamp is found",
            Some((2.5, "histogram")),
        ),
        "tp_rq_issue" | "raw_rq_issue" => (
            "the request's op and disk read (CO-RE), a clock read, its issue time stored \
             (LRU hash update)",
            None,
        ),
        "tp_rq_complete" | "raw_rq_complete" => (
            "the request's op, disk and length read (CO-RE), the disk looked up (hash), its \
             bytes and count added, its issue time looked up and deleted (LRU hash), a clock \
             read, a histogram update",
            Some((2.5, "histogram")),
        ),
        "tp_damon" | "raw_damon" | "tp_damon_pre_6_7" | "raw_damon_pre_6_7" => (
            "a DAMON region's record: its stream looked up (hash), four fields read (CO-RE), \
             eight words written into the CPU's ring under its seq",
            None,
        ),
        "tp_net_rx" | "raw_net_rx" => (
            "the device looked up (hash, by namespace and ifindex), the packet's length and \
             headers read, two counter adds (packets, bytes)",
            Some((1.5, "counter")),
        ),
        "tp_net_tx" | "raw_net_tx" => (
            "the device looked up (hash), its flags read, two counter adds (packets, bytes)",
            Some((1.5, "counter")),
        ),
        "tp_irq_entry" | "raw_irq_entry" => (
            "the CPU's stamp written (PERCPU_ARRAY) with a clock read, the IRQ looked up \
             (hash), one counter add",
            Some((1.5, "counter")),
        ),
        "tp_irq_exit" | "raw_irq_exit" => (
            "a clock read, the CPU's stamp checked, action->next read, the IRQ looked up \
             (hash), a histogram update (the handler's time)",
            Some((2.5, "histogram")),
        ),
        "hist_sched_switch" | "raw_hist_sched_switch" => (
            "the histogram update alone: the writer's hist_observe() (seg.bpf.h) of a \
             clock read, into a scratch segment (src/bpf/floor.bpf.c)",
            Some((2.5, "histogram")),
        ),
        "clock_sched_switch" | "raw_clock_sched_switch" => (
            "the floor and one clock read (bpf_ktime_get_ns), as hist_sched_switch reads the \
             clock: its ns above the floor are the clock's share of that row",
            None,
        ),
        "core_sched_switch" | "raw_core_sched_switch" => (
            "the floor and one field read with BPF_CORE_READ (a bpf_probe_read_kernel() \
             call), as the writer reads every kernel field",
            None,
        ),
        "direct_sched_switch" => (
            "the floor and the same field loaded directly (tp_btf/ only: a CO-RE-relocated \
             load, no call)",
            None,
        ),
        _ => ("(not described by the bench)", None),
    }
}

/// "1 window", "3 windows".
fn windows(n: usize) -> String {
    if n == 1 {
        "1 window".into()
    } else {
        format!("{n} windows")
    }
}

fn ns_per_run(t: Option<&Totals>) -> Option<f64> {
    t.filter(|t| t.runs > 0)
        .map(|t| t.ns as f64 / t.runs as f64)
}

fn joined(v: &[Option<f64>], digits: usize) -> String {
    v.iter()
        .map(|x| x.map_or("-".to_string(), |x| format!("{x:.digits$}")))
        .collect::<Vec<_>>()
        .join("/")
}

fn spread(v: &[Option<f64>]) -> Option<(f64, f64)> {
    let got: Vec<f64> = v.iter().flatten().copied().collect();
    if got.len() != v.len() || got.is_empty() {
        return None;
    }
    let lo = got.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = got.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    Some((lo, hi))
}

/// ns per run of the program named `name` (or its `raw_` twin) in each
/// window, if it ran.
fn per_window(r: &Report<'_>, name: &str) -> Option<Vec<Option<f64>>> {
    let raw = format!("raw_{name}");
    let p = r.floors.iter().find(|f| f.name == name || f.name == raw)?;
    Some(
        r.runs
            .iter()
            .map(|x| ns_per_run(x.delta.get(&p.id)))
            .collect(),
    )
}

/// The histogram update without its clock read: hist_sched_switch's ns
/// less clock_sched_switch's above the floor, over the floor.
fn without_clock(r: &Report<'_>) {
    let (Some(hist), Some(clock), Some(floor)) = (
        per_window(r, "hist_sched_switch"),
        per_window(r, "clock_sched_switch"),
        per_window(r, "floor_sched_switch"),
    ) else {
        return;
    };
    let ratio: Vec<Option<f64>> = (0..hist.len())
        .map(|i| Some((hist[i]? - (clock[i]? - floor[i]?)) / floor[i]?))
        .collect();
    println!(
        "sched_switch: the histogram update without its clock read, (hist - (clock - floor)) / floor: \
         {} (spread {}; target <= 2.5x)",
        joined(&ratio, 2),
        spread(&ratio).map_or("-".into(), |(lo, hi)| format!("{lo:.2}-{hi:.2}")),
    );
}

/// Prints the table, then `BPF-COST PRINTED` if every writer program ran
/// beside a floor in every window, else `BPF-COST INCOMPLETE` and why.
pub fn print(r: &Report<'_>) {
    let secs = r.runs.first().map_or(0.0, |x| x.wall.as_secs_f64());
    let cmd: Vec<String> = std::env::args().collect();
    println!();
    println!(
        "BPF-COST eBPF writer (perfabi-bpfd) beside floor programs on the same tracepoints, \
         {} of {secs:.1} s, one run",
        windows(r.runs.len())
    );
    println!("command: {}", cmd.join(" "));
    println!(
        "ns/run = run_time_ns / run_cnt over the window (BPF_ENABLE_STATS); per window, \
         separated by /; floor = one atomic add into a PERCPU_ARRAY (src/bpf/floor.bpf.c)"
    );
    let names: Vec<&str> = r
        .floors
        .iter()
        .filter(|f| !f.alone)
        .map(|f| f.name.as_str())
        .collect();
    println!(
        "floor programs ({} on each tracepoint): {}",
        if r.floors_first {
            "attached before the writer's, run first"
        } else {
            "attached after the writer's, run after"
        },
        names.join(", ")
    );
    println!();
    println!(
        "{:<20} {:<22} {:>7} {:>8} {:<18} {:<18} {:<18} {:<18} {:<11} target",
        "tracepoint",
        "program",
        "insns",
        "runs/s",
        "ns/run",
        "floor ns/run",
        "ns above floor",
        "ratio",
        "spread"
    );
    let mut incomplete = Vec::new();
    let mut idle: Vec<&str> = Vec::new();
    // The writer's programs, then the histogram update alone.
    let rows = r
        .writer
        .iter()
        .map(|p| (p.tracepoint.as_str(), p.name.as_str(), p.id, p.insns))
        .chain(
            r.floors
                .iter()
                .filter(|f| f.alone)
                .map(|f| (f.tracepoint.as_str(), f.name.as_str(), f.id, f.insns)),
        );
    for (tracepoint, name, id, insns) in rows {
        let floor = r
            .floors
            .iter()
            .find(|f| !f.alone && f.tracepoint == tracepoint);
        let mine: Vec<Option<f64>> = r
            .runs
            .iter()
            .map(|x| ns_per_run(x.delta.get(&id)))
            .collect();
        let theirs: Vec<Option<f64>> = r
            .runs
            .iter()
            .map(|x| floor.and_then(|f| ns_per_run(x.delta.get(&f.id))))
            .collect();
        let ratio: Vec<Option<f64>> = mine
            .iter()
            .zip(&theirs)
            .map(|(m, f)| Some(m.as_ref()? / f.as_ref()?))
            .collect();
        let above: Vec<Option<f64>> = mine
            .iter()
            .zip(&theirs)
            .map(|(m, f)| Some(m.as_ref()? - f.as_ref()?))
            .collect();
        let runs: u64 = r
            .runs
            .iter()
            .map(|x| x.delta.get(&id).map_or(0, |t| t.runs))
            .sum();
        let total_s: f64 = r.runs.iter().map(|x| x.wall.as_secs_f64()).sum();
        let (does, target) = described(name);
        let insns = match floor {
            Some(f) => format!("{insns}/{}", f.insns),
            None => insns.to_string(),
        };
        println!(
            "{:<20} {:<22} {:>7} {:>8.0} {:<18} {:<18} {:<18} {:<18} {:<11} {}",
            tracepoint,
            name,
            insns,
            runs as f64 / total_s.max(1e-9),
            joined(&mine, 1),
            if floor.is_some() {
                joined(&theirs, 1)
            } else {
                "no floor".into()
            },
            joined(&above, 1),
            joined(&ratio, 2),
            spread(&ratio).map_or("-".into(), |(lo, hi)| format!("{lo:.2}-{hi:.2}")),
            target.map_or("-".into(), |(t, what)| format!("<= {t}x ({what})")),
        );
        println!("{:<43} does: {does}", "");
        if floor.is_none() {
            incomplete.push(format!("{name} has no floor on {tracepoint}"));
        } else if ratio.iter().any(Option::is_none) {
            idle.push(name);
        }
    }
    println!();
    without_clock(r);
    let share: Vec<Option<f64>> = r
        .runs
        .iter()
        .map(|x| {
            let cpu_s = x.daemon_ticks as f64 / r.ticks_per_s.max(1) as f64;
            Some(100.0 * cpu_s / x.wall.as_secs_f64().max(1e-9))
        })
        .collect();
    let exact: Vec<Option<f64>> = r
        .runs
        .iter()
        .map(|x| Some(100.0 * x.daemon_ns as f64 / x.wall.as_nanos().max(1) as f64))
        .collect();
    let ticks: Vec<String> = r.runs.iter().map(|x| x.daemon_ticks.to_string()).collect();
    println!(
        "perfabi-bpfd utime+stime per window: {} ticks of 1/{} s = {} % of a core \
         (spread {}; target < 0.5 %)",
        ticks.join("/"),
        r.ticks_per_s,
        joined(&share, 3),
        spread(&share).map_or("-".into(), |(lo, hi)| format!("{lo:.3}-{hi:.3} %")),
    );
    println!(
        "perfabi-bpfd on a CPU per window (schedstat, ns): {} % of a core (spread {})",
        joined(&exact, 4),
        spread(&exact).map_or("-".into(), |(lo, hi)| format!("{lo:.4}-{hi:.4} %")),
    );
    println!(
        "workload over the run: {} token round trips, {} moves between CPUs, {} direct I/Os \
         on the loop device, {} datagrams over loopback, {} direct reads from the disk",
        r.work.round_trips, r.work.moves, r.work.ios, r.work.datagrams, r.work.disk_reads
    );
    if !idle.is_empty() {
        println!(
            "no events in some window (ratio -): {}: the workload drives none of their tracepoints",
            idle.join(", ")
        );
    }
    println!(
        "kernel.bpf_stats_enabled before {} and after {} (never written: BPF_ENABLE_STATS \
         holds the statistics on for this process only)",
        r.sysctl.0, r.sysctl.1
    );
    println!(
        "insns: BPF instructions after the verifier, program/floor. Each ratio is the \
         program's whole body per event over the floor's (entering a program, a lookup, \
         one add and the statistics' clock reads around the program are in both)."
    );
    if incomplete.is_empty() {
        println!(
            "BPF-COST PRINTED: {} writer programs beside their floors, {} of {secs:.1} s",
            r.writer.len(),
            windows(r.runs.len())
        );
    } else {
        println!("BPF-COST INCOMPLETE: {}", incomplete.join("; "));
    }
}
