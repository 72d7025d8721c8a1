//! The cost of gzipping a page at levels 1 and 6, side by side: for each
//! level, the compressed size and the median time of one page's
//! compression over rounds taken in turns (level 1, level 6, level 1…),
//! so that a busy machine slows both alike. Run by `benches/web-cost`.
//!
//! Usage: gzip_levels PAGE [ROUNDS]

use std::time::Instant;

use perfabi_prometheus::gzip;

fn main() {
    let mut args = std::env::args().skip(1);
    let Some(path) = args.next() else {
        eprintln!("usage: gzip_levels PAGE [ROUNDS]");
        std::process::exit(2);
    };
    let rounds: usize = args.next().and_then(|r| r.parse().ok()).unwrap_or(200);
    let page = match std::fs::read(&path) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("gzip_levels: cannot read {path}: {e}");
            std::process::exit(2);
        }
    };
    let levels = [1u32, 6];
    let mut times: Vec<Vec<u128>> = vec![Vec::with_capacity(rounds); levels.len()];
    let mut sizes = [0usize; 2];
    for _ in 0..rounds {
        for (i, &level) in levels.iter().enumerate() {
            let t = Instant::now();
            let z = gzip(&page, level);
            times[i].push(t.elapsed().as_nanos());
            sizes[i] = z.len();
        }
    }
    for (i, level) in levels.iter().enumerate() {
        times[i].sort_unstable();
        let median = times[i][times[i].len() / 2];
        println!(
            "GZIP-LEVEL {level}: {} -> {} bytes (ratio {:.1}:1), median {:.0} us a page ({:.2} ns a byte), {rounds} rounds",
            page.len(),
            sizes[i],
            page.len() as f64 / sizes[i].max(1) as f64,
            median as f64 / 1e3,
            median as f64 / page.len().max(1) as f64
        );
    }
}
