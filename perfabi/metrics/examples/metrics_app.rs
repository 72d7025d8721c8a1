//! A program instrumented with the `metrics` macros, writing perfabi
//! through `perfabi-metrics` after one line of setup. The crate's tests
//! run it and read back every value it writes.
//!
//! Usage: `metrics_app [DIRECTORY]`: its segment goes into the segment
//! directory DIRECTORY, or the default one (`$PERFABI_DIR`, else
//! `/dev/shm/perfabi-<euid>`).
//! It prints the segment's path, then keeps it (a live writer, whose
//! heartbeat its own thread keeps) until its standard input ends or gives
//! a line.

use std::thread;

use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // The one line of setup (here with one histogram's own buckets).
    let mut builder = perfabi_metrics::PerfabiBuilder::new()
        .buckets_for_metric("app.request_size", &[100.0, 1000.0])?;
    if let Some(dir) = std::env::args_os().nth(1) {
        builder = builder.directory(dir);
    }
    let writer = builder.install()?;

    describe_counter!("app.requests", Unit::Count, "Requests served");
    describe_gauge!("app.queue", Unit::Kibibytes, "Data queued");
    describe_histogram!("app.latency", Unit::Seconds, "Request latency");

    // Counters, with labels in either order (the same series).
    counter!("app.requests", "method" => "GET", "status" => "200").increment(3);
    counter!("app.requests", "status" => "200", "method" => "GET").increment(2);
    counter!("app.requests", "method" => "POST", "status" => "500").increment(1);
    let jobs = counter!("app.jobs_done");
    jobs.absolute(10);
    jobs.absolute(7); // lower: no change
    jobs.absolute(12);

    // A hot handle shared by threads.
    let work = counter!("app.work", "pool" => "io");
    thread::scope(|s| {
        for _ in 0..4 {
            let work = work.clone();
            s.spawn(move || {
                for _ in 0..10_000 {
                    work.increment(1);
                }
            });
        }
    });

    // Gauges: f64 in KiB, stored in bytes; a unitless one rounded.
    let queue = gauge!("app.queue", "queue" => "a");
    queue.set(1.5);
    queue.increment(0.25);
    queue.decrement(1.0);
    gauge!("app.temperature").set(-2.5);

    // Histograms: seconds stored in nanoseconds, LOG2 buckets; explicit
    // buckets from the builder.
    let latency = histogram!("app.latency");
    latency.record(0.0031);
    latency.record(0.5);
    let size = histogram!("app.request_size");
    for v in [50.0, 150.0, 5000.0] {
        size.record(v);
    }

    // Refusals: each says so once on stderr and is counted in
    // perfabi.metrics.dropped; nothing panics.
    counter!("bad-name").increment(1); // name
    gauge!("app.requests", "method" => "GET", "status" => "200").set(1.0); // kind
    latency.record(-1.0); // value
    size.record(f64::NAN); // value
    counter!("app.wide", "a" => "1", "b" => "2", "c" => "3", "d" => "4", "e" => "5").increment(1); // labels
    describe_counter!("app.jobs_done", "Too late"); // description

    println!(
        "{}",
        writer
            .path()
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    );
    std::io::stdin().read_line(&mut String::new())?;
    Ok(())
}
