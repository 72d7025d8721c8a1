//! The main job for now: create a segment, adjust counters from several
//! threads, publish DAMON aggregations, and print what a reader sees.
//!
//! ```text
//! cargo run --release -p perfabi --example demo -- [--path PATH] [--seconds N]
//! ```
//!
//! PATH defaults to `$XDG_RUNTIME_DIR/perfabi-demo.seg`, or
//! `/dev/shm/perfabi-demo.seg`, or `$TMPDIR`. No root, no special kernel.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use perfabi::damon::{Aggregation, Intervals, Region};
use perfabi::{Semantics, ValueType};
use perfabi_shm::writer::{Config, Writer};

fn default_path() -> PathBuf {
    let dir = std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|d| d.is_dir()))
        .unwrap_or_else(std::env::temp_dir);
    dir.join("perfabi-demo.seg")
}

fn usage() -> ! {
    eprintln!("usage: demo [--path PATH] [--seconds N]");
    std::process::exit(2)
}

fn main() {
    let mut path = default_path();
    let mut seconds = 3u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--path" => path = args.next().map(PathBuf::from).unwrap_or_else(|| usage()),
            "--seconds" => {
                seconds = args
                    .next()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or_else(|| usage())
            }
            _ => usage(),
        }
    }
    if let Err(e) = run(&path, seconds) {
        eprintln!("demo: {e}");
        std::process::exit(1);
    }
}

fn run(path: &std::path::Path, seconds: u64) -> Result<(), Box<dyn std::error::Error>> {
    let w = Arc::new(Writer::create(path, &Config::default())?);
    println!(
        "segment {} (epoch {:#x}, {} CPUs, update method {:?})",
        path.display(),
        w.epoch(),
        w.layout().nr_cpus,
        w.method()
    );
    let ops = w.add("demo.ops", "count", Semantics::Counter)?;
    let bytes = w.add("demo.bytes", "bytes", Semantics::Counter)?;
    let inflight = w.add_typed("demo.inflight", "count", Semantics::Instant, ValueType::I64)?;
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..3)
        .map(|t| {
            let (w, stop) = (w.clone(), stop.clone());
            thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    w.adjust(inflight, 1).expect("live id");
                    w.adjust_group(&[(ops, 1), (bytes, 64 * (t + 1))])
                        .expect("live ids");
                    w.adjust(inflight, -1).expect("live id");
                    n += 1;
                    if n.is_multiple_of(1024) {
                        thread::sleep(Duration::from_micros(50));
                    }
                }
            })
        })
        .collect();

    let iv = Intervals {
        sample_us: 5_000,
        aggr_us: 100_000,
    };
    let start = Instant::now();
    let mut prev: Option<(Instant, u64)> = None;
    let mut round = 0u64;
    while start.elapsed() < Duration::from_secs(seconds) {
        // A synthetic access pattern: a hot 4 KiB-aligned band that moves.
        let regions: Vec<Region> = (0..16u64)
            .map(|i| Region {
                start: 0x7f00_0000_0000 + i * 0x10_0000,
                end: 0x7f00_0000_0000 + (i + 1) * 0x10_0000,
                nr_accesses: if i % 16 == round % 16 {
                    20
                } else {
                    (i % 3) as u32
                },
                age: round as u32,
            })
            .collect();
        let agg = w.publish_damon(&Aggregation::new(1, 1, iv, regions.to_vec()))?;
        w.heartbeat();
        thread::sleep(Duration::from_secs(1));
        round += 1;

        let s = w.snapshot()?;
        let total_ops = s.total(s.find("demo.ops").expect("registered"));
        let rate = prev.map(|(t, v)| (total_ops - v) as f64 / t.elapsed().as_secs_f64());
        prev = Some((Instant::now(), total_ops));
        println!("--- generation {} ---", s.generation);
        println!(
            "{:<16} {:>8} {:>16} {:>24}",
            "name", "unit", "total", "per CPU"
        );
        for i in &s.instances {
            let total = match i.value_type {
                ValueType::U64 => s.total(i).to_string(),
                ValueType::I64 => (s.total(i) as i64).to_string(),
            };
            let per: Vec<String> = s.per_cpu(i).map(|v| (v as i64).to_string()).collect();
            println!(
                "{:<16} {:>8} {:>16} {:>24}",
                i.name,
                i.unit,
                total,
                per.join(" ")
            );
        }
        if let Some(r) = rate {
            println!("demo.ops rate: {r:.0}/s");
        }
        for a in w.view().damon(64).aggregations {
            let hot: Vec<String> = a
                .regions
                .iter()
                .map(|r| {
                    let f = a.frequency(r);
                    [" ", ".", ":", "*", "#"][((f * 4.0).round() as usize).min(4)].to_string()
                })
                .collect();
            println!(
                "damon monitor {} target {} aggregation {} (published {agg}): {} regions |{}|",
                a.monitor_id,
                a.target_id,
                a.aggregation,
                a.regions.len(),
                hot.concat()
            );
        }
    }
    stop.store(true, Ordering::Relaxed);
    for h in workers {
        h.join().map_err(|_| "worker thread panicked")?;
    }
    let s = w.snapshot()?;
    let ops_total = s.total(s.find("demo.ops").expect("registered"));
    let stats = w.update_stats();
    println!(
        "done: {ops_total} grouped updates; rseq aborts {}, undo passes {}; segment closed and left at {}",
        stats.aborts,
        stats.undos,
        path.display()
    );
    Arc::try_unwrap(w)
        .map_err(|_| "writer still shared")?
        .close();
    Ok(())
}
