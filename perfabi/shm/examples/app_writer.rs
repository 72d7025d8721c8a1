//! An application that writes its own metrics, as the soak (`tests/soak`)
//! restarts one every ten seconds: a segment at PATH with a counter
//! (`soak.ops`), a counter family with an instance per handler
//! (`soak.requests`, handlers coming and going), and a latency histogram
//! (`soak.latency`), all raised about 200 times a second until SIGTERM or
//! SIGINT, which close the segment (readers see the writer gone, values
//! intact) and exit 0. SIGKILL leaves it as a crash would: the segment
//! with a dead writer's pid.
//!
//! ```text
//! cargo run --release -p perfabi-shm --example app_writer -- PATH
//! ```
//!
//! Prints `ready PID EPOCH` (the epoch in hex) once the segment is in
//! place. Exit status: 0 after SIGTERM/SIGINT, 1 if the segment cannot be
//! created or written, 2 on a bad command line.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use perfabi::{Buckets, FamilySpec, Kind, Semantics, Unit};
use perfabi_shm::writer::{Config, Writer};

/// Handlers live at once: a new one every [`HANDLER_EVERY`] events, the
/// oldest deleted past this many.
const HANDLERS: usize = 3;
const HANDLER_EVERY: u64 = 400;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), None) = (args.next(), args.next()) else {
        eprintln!("usage: app_writer PATH");
        std::process::exit(2);
    };
    if let Err(e) = run(PathBuf::from(path)) {
        eprintln!("app_writer: {e}");
        std::process::exit(1);
    }
}

fn run(path: PathBuf) -> Result<(), Box<dyn std::error::Error>> {
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGTERM, signal_hook::consts::SIGINT] {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    let w = Writer::create(
        &path,
        &Config {
            heartbeat_interval: Duration::from_secs(1),
            ..Config::default()
        },
    )?;
    let ops = w.add("soak.ops", "count", Semantics::Counter)?;
    let requests = w.add_family(&FamilySpec::new(
        "soak.requests",
        "Requests served",
        "handler",
        Kind::Counter,
        Unit::COUNT,
    ))?;
    let latency = w.add_family(&FamilySpec::histogram(
        "soak.latency",
        "Request latency",
        "",
        Unit::NS,
        Buckets::Explicit(vec![100, 1_000, 10_000]),
    ))?;
    let all = w.add_member(latency, "", &[])?;
    let mut handlers = std::collections::VecDeque::new();
    println!("ready {} {:x}", std::process::id(), w.epoch());

    let start = Instant::now();
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        if n.is_multiple_of(HANDLER_EVERY) {
            let name = format!("h{}", n / HANDLER_EVERY);
            handlers.push_back(w.add_member(requests, &name, &[])?);
            if handlers.len() > HANDLERS {
                let old = handlers.pop_front().expect("more than HANDLERS");
                w.del_member(&old)?;
            }
        }
        w.adjust(ops, 1)?;
        let h = &handlers[(n % handlers.len() as u64) as usize];
        w.member_add(h, 1)?;
        w.observe(&all, 50 + (n % 7) * 900)?;
        n += 1;
        // About 200 events a second, paced on the clock.
        let due = start + Duration::from_millis(n * 5);
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    w.close();
    Ok(())
}
