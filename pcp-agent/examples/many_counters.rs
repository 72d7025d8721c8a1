//! The writer side of `pcp-agent/bench/start-65536`: a segment with COUNT
//! live counters, `bench.c00000` … (counter `i` holds the value `i`), kept
//! alive (heartbeat) until SECONDS pass or the process is killed. Prints
//! `ready` on standard output once every counter is registered.
//!
//! Usage: many_counters PATH COUNT SECONDS

use std::io::Write;
use std::time::{Duration, Instant};

use perfabi::Semantics;
use perfabi_shm::writer::{Config, Writer};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(count), Some(secs)) = (
        args.next(),
        args.next().and_then(|s| s.parse::<u32>().ok()),
        args.next().and_then(|s| s.parse::<f64>().ok()),
    ) else {
        eprintln!("usage: many_counters PATH COUNT SECONDS");
        std::process::exit(2);
    };
    if count == 0 || count > perfabi::layout::MAX_INSTANCES {
        eprintln!(
            "many_counters: COUNT must be 1 to {}",
            perfabi::layout::MAX_INSTANCES
        );
        std::process::exit(2);
    }
    let config = Config {
        max_instances: count,
        heartbeat_interval: Duration::from_secs(1),
        ..Config::default()
    };
    let w = Writer::create(&path, &config).unwrap_or_else(|e| {
        eprintln!("many_counters: {path}: {e}");
        std::process::exit(1)
    });
    let t0 = Instant::now();
    for i in 0..count {
        let id = w
            .add(&format!("bench.c{i:05}"), "count", Semantics::Counter)
            .unwrap_or_else(|e| {
                eprintln!("many_counters: counter {i}: {e}");
                std::process::exit(1)
            });
        w.adjust(id, i64::from(i)).unwrap_or_else(|e| {
            eprintln!("many_counters: counter {i}: {e}");
            std::process::exit(1)
        });
    }
    eprintln!(
        "many_counters: {count} counters registered in {:.3} s",
        t0.elapsed().as_secs_f64()
    );
    println!("ready");
    let _ = std::io::stdout().flush();
    std::thread::sleep(Duration::from_secs_f64(secs.max(0.0)));
    w.close();
}
