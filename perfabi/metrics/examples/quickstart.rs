//! The README's example: a program instrumented with the `metrics` macros
//! writes perfabi after one line of setup.
use metrics::{counter, describe_histogram, gauge, histogram, Unit};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let writer = perfabi_metrics::install()?; // the one line of setup
    describe_histogram!("app.latency", Unit::Seconds, "Request latency");
    let requests = counter!("app.requests", "method" => "GET");
    for _ in 0..3 {
        requests.increment(1); // one perfabi adjust: no lookup, no lock
    }
    gauge!("app.queue_depth").set(7.0);
    histogram!("app.latency").record(0.0042); // stored as 4,200,000 ns
    println!("{}", writer.path().unwrap().display());
    std::io::stdin().read_line(&mut String::new())?; // runs until Enter
    Ok(())
}
