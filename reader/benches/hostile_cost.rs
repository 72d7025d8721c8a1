//! What a hostile file costs perfabi-cat: a 12 KiB sparse file with the
//! largest legal geometry (`spec/PERFABI.md` §11.4), read in every mode, on a
//! tmpfs mounted for the run. Prints, per mode, the exit code, wall time,
//! peak memory (GNU time) and the memory the tmpfs allocated, and fails if
//! any mode takes 1 s, 100 MiB, or a single tmpfs page.
//!
//! `cargo bench -p perfabi-reader --bench hostile_cost` (as root: it mounts
//! a tmpfs).

#[path = "../tests/support/giant.rs"]
mod giant;

use std::time::Duration;

use perfabi_test_harness::{self as harness, Tmpfs};

fn main() {
    // cargo bench passes --bench; nothing else is an option here.
    if !harness::need_root("hostile_cost") {
        return;
    }
    let cat = harness::workspace::perfabi_cat();
    let fs = Tmpfs::mount("64m");
    let path = fs.join("giant");
    let size = giant::sparse_giant(&path);
    let before = fs.used_bytes();
    let rec = fs.join("rec").display().to_string();
    let modes: [&[&str]; 12] = [
        &[],
        &["--cpu"],
        &["--json"],
        &["--openmetrics"],
        &["--openmetrics", "--cpu"],
        &["--damon"],
        &["--damon", "--json"],
        &["--info"],
        &["--info", "--json"],
        &["--watch", "0.1", "--count", "2"],
        &["--watch", "0.1", "--count", "2", "--json"],
        &["--record", &rec, "--count", "2"],
    ];
    println!(
        "HOSTILE-COST a {} KiB file declaring a {size}-byte segment (8192 CPUs x 65536 instances x 1M DAMON slots), {} KiB allocated on its tmpfs",
        std::fs::metadata(&path).map(|m| std::os::unix::fs::MetadataExt::blocks(&m) / 2).unwrap_or(0),
        before >> 10
    );
    println!(
        "{:<8} {:<40} {:>4} {:>10} {:>10} {:>12}",
        "LIMIT", "MODE", "EXIT", "TIME_MS", "PEAK_MIB", "TMPFS_KIB+"
    );
    let mut worst = (Duration::ZERO, 0u64, 0u64);
    let mut failed = false;
    for limit in ["4G", "1T"] {
        for m in modes {
            let mut args = vec![
                path.display().to_string(),
                "--max-size".into(),
                limit.into(),
            ];
            args.extend(m.iter().map(|s| s.to_string()));
            let f = harness::run_measured(&cat, &args, Duration::from_secs(30));
            let grown = fs.used_bytes().saturating_sub(before);
            println!(
                "{:<8} {:<40} {:>4} {:>10.2} {:>10.1} {:>12}",
                limit,
                m.join(" ").replace(&rec, "FILE"),
                f.code().map_or("hung".into(), |c| c.to_string()),
                f.elapsed.as_secs_f64() * 1e3,
                f.max_rss_kib as f64 / 1024.0,
                grown >> 10
            );
            failed |= f.code() != Some(4)
                || f.elapsed >= Duration::from_secs(1)
                || f.max_rss_kib >= 100 << 10
                || grown > 0;
            worst = (
                worst.0.max(f.elapsed),
                worst.1.max(f.max_rss_kib),
                worst.2.max(grown),
            );
        }
    }
    println!(
        "HOSTILE-COST {} worst: {:.1} ms, {:.1} MiB peak, {} bytes of tmpfs allocated (bounds: < 1000 ms, < 100 MiB, 0)",
        if failed { "FAIL" } else { "PASS" },
        worst.0.as_secs_f64() * 1e3,
        worst.1 as f64 / 1024.0,
        worst.2
    );
    if failed {
        std::process::exit(1);
    }
}
