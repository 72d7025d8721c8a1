//! A monitoring agent's loop on the reader: every family of a segment in
//! one consistent snapshot, then one family read again and again through a
//! handle (no system call, no allocation) and its rate printed.
//!
//! cargo run --release -p perfabi-reader --example read_counters -- [SEGMENT [FAMILY]]
use std::time::{Duration, Instant};

use perfabi_reader::{FamilyValues, Reading, Segment};

fn main() -> Result<(), perfabi_reader::Error> {
    let mut args = std::env::args().skip(1);
    let path = args
        .next()
        .map_or_else(perfabi_reader::default_path, Into::into);
    let family = args.next().unwrap_or_else(|| "kernel.all.pswitch".into());
    let mut seg = Segment::open(&path)?;

    // Every family, instance and value from one generation.
    let snap = seg.snapshot()?;
    for f in &snap.families {
        let total: Vec<String> = f
            .members
            .iter()
            .map(|m| match snap.reading(f, m) {
                Reading::Unsigned(v) => v.to_string(),
                Reading::Signed(v) => v.to_string(),
                Reading::Histogram(h) => format!("{} observations", h.count),
            })
            .collect();
        println!(
            "{} ({}, {}): {}",
            f.name,
            f.kind.as_str(),
            f.unit_text,
            total.join(" ")
        );
    }

    // The hot path: one family looked up once, read three times.
    let mut handle = seg.family_handle(&family)?;
    let mut values = FamilyValues::default();
    let mut last: Option<(Instant, u64)> = None;
    for _ in 0..3 {
        seg.read_family(&mut handle, &mut values)?;
        let now = Instant::now();
        if let Reading::Unsigned(v) = values.reading(handle.family(), 0) {
            if let Some((then, before)) = last {
                let rate = v.wrapping_sub(before) as f64 / (now - then).as_secs_f64();
                println!("{family}: {rate:.1}/s");
            }
            last = Some((now, v));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    Ok(())
}
