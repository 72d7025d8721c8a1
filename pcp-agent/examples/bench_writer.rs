//! The perfabi side of the MMV comparison (`pcp-agent/bench/mmv-vs-perfabi`):
//! 1,000 counters in 125 groups of 8, each group raised by one together
//! (`adjust_group`), ROUNDS times a second, so that every consistent read
//! sees the 8 members of a group equal.
//!
//! Usage: bench_writer PATH SECONDS ROUNDS

use std::time::{Duration, Instant};

use perfabi::Semantics;
use perfabi_shm::writer::{Config, Writer};

fn main() {
    let mut args = std::env::args().skip(1);
    let num = |s: Option<String>| s.and_then(|s| s.parse::<f64>().ok());
    let (Some(path), Some(secs), Some(rate)) = (args.next(), num(args.next()), num(args.next()))
    else {
        eprintln!("usage: bench_writer PATH SECONDS ROUNDS");
        std::process::exit(2);
    };
    let config = Config {
        heartbeat_interval: Duration::from_secs(1),
        ..Config::default()
    };
    let w = Writer::create(&path, &config).unwrap_or_else(|e| {
        eprintln!("bench_writer: {path}: {e}");
        std::process::exit(1)
    });
    let groups: Vec<Vec<(perfabi_shm::writer::InstanceId, i64)>> = (0..125)
        .map(|g| {
            (0..8)
                .map(|c| {
                    (
                        w.add(&format!("bench.g{g:03}.c{c}"), "count", Semantics::Counter)
                            .unwrap(),
                        1,
                    )
                })
                .collect()
        })
        .collect();
    let t0 = Instant::now();
    let end = t0 + Duration::from_secs_f64(secs);
    let mut rounds = 0u64;
    let mut beat = Instant::now();
    while Instant::now() < end {
        for g in &groups {
            w.adjust_group(g).unwrap();
        }
        rounds += 1;
        let due = t0 + Duration::from_secs_f64(rounds as f64 / rate);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if beat.elapsed() > Duration::from_millis(200) {
            w.heartbeat();
            beat = Instant::now();
        }
    }
    eprintln!("bench_writer: {rounds} rounds of 125 group updates");
    w.close();
}
