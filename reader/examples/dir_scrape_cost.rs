//! What one read of a segment directory costs: `N` segments (default
//! 1,000) of 20 counter families each, in a fresh directory under
//! `/dev/shm`, read by one `Directory` (the first read opens and maps every
//! file; later ones reuse them). Prints the median of 20 later reads and
//! the first read's time.
//!
//! `cargo run --release -p perfabi-reader --example dir_scrape_cost [N]`

use std::time::Instant;

use perfabi::{Buckets, FamilySpec, GaugeMode, Kind, Unit};
use perfabi_reader::directory::{Directory, DirectoryOptions};
use perfabi_shm::directory::SegmentName;
use perfabi_shm::writer::{Config, Writer};

/// The histograms' bucket bounds: prometheus_client's default buckets
/// (5 ms to 10 s), in ms.
const BOUNDS: [u64; 14] = [
    5, 10, 25, 50, 75, 100, 250, 500, 750, 1000, 2500, 5000, 7500, 10000,
];

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
        for k in 0..20u32 {
            let name = format!("app_metric_{k}");
            // The mix of the prometheus_client side of
            // reader/benches/dir_scrape.py: 14 counters, 4 gauges (live
            // writers summed: its `livesum`), 2 histograms of 15 buckets.
            let spec = match k % 10 {
                7 | 8 => FamilySpec::gauge(&name, "A gauge", "", Unit::COUNT, GaugeMode::Sum),
                9 => FamilySpec::histogram(
                    &name,
                    "A histogram",
                    "",
                    Unit::COUNT,
                    Buckets::Explicit(BOUNDS.to_vec()),
                ),
                _ => FamilySpec::new(&name, "A counter", "", Kind::Counter, Unit::COUNT),
            };
            let kind = spec.kind;
            let f = w.add_family(&spec)?;
            let m = w.add_member(f, "", &[])?;
            match kind {
                Kind::Histogram => w.observe(&m, u64::from(k) * 100)?,
                Kind::Gauge => w.member_set(&m, i64::from(k))?,
                _ => w.member_add(&m, i64::from(k) + 1)?,
            }
        }
        writers.push(w);
    }
    let mut d = Directory::open(&dir, DirectoryOptions::default())?;
    let t = Instant::now();
    let s = d.read()?;
    let first = t.elapsed();
    assert_eq!((s.segments, s.families.len()), (n, 20));
    assert!(s.problems.is_empty(), "{:?}", s.problems);
    // The merge is measured only if it is right: every writer's counter 0
    // added 1, every gauge 7 is live and set to 7.
    let total = |name: &str| {
        let f = s.families.iter().find(|f| f.family.name == name);
        f.map(|f| f.readings.clone())
    };
    let want = |v: u64| Some(vec![perfabi::Reading::Unsigned(v)]);
    assert_eq!(total("app_metric_0"), want(n as u64));
    assert_eq!(total("app_metric_7"), want(7 * n as u64));
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
