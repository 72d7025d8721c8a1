//! The Rust side of `bench/read-cost`: writes a segment of 16 per-CPU
//! blocks (a simulated geometry: the writer's lock method) with one
//! counter, then, in alternating rounds, times `Segment::read` of a handle
//! on it here and `perfabi_read` of a handle in the C program given
//! (`bench/read_cost.c`, built against the installed libperfabi), N calls
//! each in batches; prints the fastest batch of each:
//! `CAPI-READ c=X ns rust=Y ns diff=Z ns`.
//!
//! `read_cost C_PROGRAM [N]` (N defaults to 10^7); run by
//! `reader/capi/bench/read-cost`.

use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

use perfabi::Semantics;
use perfabi_reader::Segment;
use perfabi_shm::writer::{Config, Writer};

const CPUS: u32 = 16;
const ROUNDS: usize = 5;
/// Each round's calls are timed in this many batches, the fastest kept:
/// the cost of a call without the interruptions and preemptions of a
/// shared machine (the C program does the same).
const BATCHES: u64 = 100;

fn main() {
    let mut args = std::env::args().skip(1);
    let c_program = args.next().expect("usage: read_cost C_PROGRAM [N]");
    let n: u64 = args.next().map_or(10_000_000, |a| a.parse().expect("N"));
    let dir = tempfile::tempdir().expect("a temporary folder");
    let path = dir.path().join("bench.seg");
    let w = Writer::create(
        &path,
        &Config {
            nr_cpus: Some(CPUS),
            damon_capacity: 0,
            ..Config::default()
        },
    )
    .expect("the segment");
    let id = w.add("bench.counter", "count", Semantics::Counter).unwrap();
    w.adjust(id, 1).unwrap();

    let mut seg = Segment::open(&path).expect("open");
    let h = seg.handle("bench.counter").expect("handle");
    let mut out = vec![0u64; seg.nr_cpus()];
    let (mut best_c, mut best_rust) = (f64::MAX, f64::MAX);
    for _ in 0..ROUNDS {
        let mut sum = 0u64;
        for _ in 0..BATCHES {
            let start = Instant::now();
            for _ in 0..n / BATCHES {
                seg.read(black_box(&h), black_box(&mut out)).unwrap();
                sum = sum.wrapping_add(out[0]);
            }
            let ns = start.elapsed().as_nanos() as f64 / (n / BATCHES) as f64;
            best_rust = best_rust.min(ns);
        }
        black_box(sum);

        let o = Command::new(&c_program)
            .arg(&path)
            .arg("bench.counter")
            .arg(n.to_string())
            .output()
            .expect("the C program runs");
        let text = String::from_utf8_lossy(&o.stdout);
        assert!(
            o.status.success(),
            "{c_program}: {text}{}",
            String::from_utf8_lossy(&o.stderr)
        );
        let ns: f64 = text
            .split_whitespace()
            .find_map(|w| w.strip_prefix("ns="))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{c_program} printed no ns=: {text}"));
        best_c = best_c.min(ns);
    }
    drop(w);
    println!(
        "CAPI-READ c={best_c:.2} ns rust={best_rust:.2} ns diff={:.2} ns (one counter, {CPUS} CPUs, {n} reads, fastest of {ROUNDS} x {BATCHES} batches)",
        best_c - best_rust
    );
}
