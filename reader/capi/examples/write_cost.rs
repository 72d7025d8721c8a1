//! The Rust side of `bench/write-cost`: in alternating rounds, times
//! `Counter::adjust` of a counter family's member here (the Rust writer's
//! cheapest add) and `perfabi_member_add` of the same in the C program
//! given (`bench/write_cost.c`, built against the installed libperfabi),
//! each writing its own segment with the default configuration (one block
//! per possible CPU, the rseq method where there is one), N calls each in
//! batches; prints the fastest batch of each and their ratio:
//! `CAPI-WRITE c=X ns rust=Y ns ratio=R`.
//!
//! `write_cost C_PROGRAM [N]` (N defaults to 10^7); run by
//! `reader/capi/bench/write-cost`.

use std::hint::black_box;
use std::process::Command;
use std::time::Instant;

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{Config, Writer};

const ROUNDS: usize = 5;
/// Each round's calls are timed in this many batches, the fastest kept:
/// the cost of a call without the interruptions and preemptions of a
/// shared machine (the C program does the same).
const BATCHES: u64 = 100;

fn main() {
    let mut args = std::env::args().skip(1);
    let c_program = args.next().expect("usage: write_cost C_PROGRAM [N]");
    let n: u64 = args.next().map_or(10_000_000, |a| a.parse().expect("N"));
    let dir = tempfile::tempdir().expect("a temporary folder");
    let w = Writer::create(dir.path().join("rust.seg"), &Config::default()).expect("the segment");
    let f = w
        .add_family(&FamilySpec::new(
            "bench.adds",
            "",
            "",
            Kind::Counter,
            Unit::NONE,
        ))
        .unwrap();
    let m = w.add_member(f, "", &[]).unwrap();
    let c = w.counter(m.instance()).unwrap();
    for _ in 0..n / BATCHES {
        c.adjust(black_box(1)).unwrap();
    }
    let (mut best_c, mut best_rust) = (f64::MAX, f64::MAX);
    for round in 0..ROUNDS {
        for _ in 0..BATCHES {
            let start = Instant::now();
            for _ in 0..n / BATCHES {
                black_box(&c).adjust(black_box(1)).unwrap();
            }
            let ns = start.elapsed().as_nanos() as f64 / (n / BATCHES) as f64;
            best_rust = best_rust.min(ns);
        }
        let path = dir.path().join(format!("c{round}.seg"));
        let o = Command::new(&c_program)
            .arg(&path)
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
    println!(
        "CAPI-WRITE c={best_c:.2} ns rust={best_rust:.2} ns ratio={:.2} (perfabi_member_add against Counter::adjust, {:?} method, {n} adds, fastest of {ROUNDS} x {BATCHES} batches)",
        best_c / best_rust,
        w.method()
    );
}
