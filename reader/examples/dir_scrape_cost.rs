//! What one read of a segment directory costs: `N` segments (default
//! 1,000) of 20 counter families each, in a fresh directory under
//! `/dev/shm`, read by one `Directory` (the first read opens and maps every
//! file; later ones reuse them). Prints the median of 20 later reads and
//! the first read's time.
//!
//! `cargo run --release -p perfabi-reader --example dir_scrape_cost [N]`

use std::time::Instant;

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_shm::directory::SegmentName;
use perfabi_shm::writer::{Config, Writer};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args().nth(1).map_or(Ok(1000), |a| a.parse())?;
    let top = tempfile::Builder::new()
        .prefix("perfabi-dir-cost.")
        .tempdir_in("/dev/shm")?;
    let dir = top.path().join("segs");
    std::fs::create_dir(&dir)?;
    let config = Config {
        nr_cpus: Some(2),
        max_instances: 64,
        max_families: 32,
        max_members: 64,
        damon_capacity: 0,
        heartbeat_interval: std::time::Duration::ZERO,
        auto_heartbeat: false,
        ..Config::default()
    };
    let mut writers = Vec::with_capacity(n);
    for _ in 0..n {
        let w = Writer::create(dir.join(SegmentName::new("bench")?.to_string()), &config)?;
        for k in 0..20 {
            let f = w.add_family(&FamilySpec::new(
                &format!("app.metric_{k}"),
                "A counter",
                "",
                Kind::Counter,
                Unit::COUNT,
            ))?;
            w.member_add(&w.add_member(f, "", &[])?, k + 1)?;
        }
        writers.push(w);
    }
    let mut d = Directory::open(&dir, DirectoryOptions::default())?;
    let t = Instant::now();
    let s = d.read()?;
    let first = t.elapsed();
    assert_eq!((s.segments, s.families.len()), (n, 20));
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    let mut times: Vec<f64> = (0..20)
        .map(|_| {
            let t = Instant::now();
            let s = d.read().expect("read");
            assert_eq!(s.segments, n);
            t.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    println!(
        "{n} segments x 20 families: first read {:.1} ms, later reads median {:.2} ms (min {:.2}, max {:.2})",
        first.as_secs_f64() * 1e3,
        times[times.len() / 2],
        times[0],
        times[times.len() - 1]
    );
    Ok(())
}
