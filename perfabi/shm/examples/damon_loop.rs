//! `Writer::publish_damon` of 10,000 regions in a loop, beside the copy
//! of the same records already encoded (the floor of `damon/*` in
//! `benches/protocol.rs`), for a quick look at where the time goes and for
//! counting instructions (`valgrind --tool=callgrind`, which has no rseq:
//! under it the writer uses the lock method).
//!
//! ```text
//! cargo run --release -p perfabi-shm --example damon_loop -- [lock] [ROUNDS]
//! ```
//!
//! Each round times one publication and one copy, one after the other, so
//! both see the same machine; prints the minimum and the median of each
//! over ROUNDS rounds (default 2,000), on the thread's CPU clock (time spent
//! waiting for a CPU on a loaded machine is left out) and on the wall clock.

use std::hint::black_box;
use std::time::Instant;

use perfabi::layout::DAMON_RECORD_WORDS;
use perfabi_shm::writer::{Config, MethodChoice, Writer};

#[path = "../benches/fixtures/damon.rs"]
mod damon_fixture;

fn cpu_ns() -> u64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as u64 * 1_000_000_000 + t.tv_nsec as u64
}

/// (thread CPU ns, wall ns) of `run`.
fn time(run: impl FnOnce()) -> (u64, u64) {
    let (t, c) = (Instant::now(), cpu_ns());
    run();
    (cpu_ns() - c, t.elapsed().as_nanos() as u64)
}

/// Minimum and median, in µs.
fn summary(v: &mut [u64]) -> (f64, f64) {
    v.sort_unstable();
    (v[0] as f64 / 1e3, v[v.len() / 2] as f64 / 1e3)
}

fn main() {
    let mut method = MethodChoice::Auto;
    let mut rounds = 2_000usize;
    for a in std::env::args().skip(1) {
        match a.as_str() {
            "lock" => method = MethodChoice::Lock,
            n => rounds = n.parse().expect("usage: damon_loop [lock] [ROUNDS]"),
        }
    }
    let dir = tempfile::tempdir().expect("a temporary folder");
    let cfg = Config {
        method,
        ..damon_fixture::config()
    };
    let w = Writer::create(dir.path().join("damon-loop"), &cfg).expect("a segment");
    let a = damon_fixture::aggregation();
    let records = damon_fixture::encoded(&a);
    let mut dst = vec![[0u64; DAMON_RECORD_WORDS]; records.len()];
    let (mut publish, mut copy) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        publish.push(time(|| {
            w.publish_damon(black_box(&a)).expect("a publication");
        }));
        copy.push(time(|| dst.copy_from_slice(black_box(&records))));
    }
    let split = |v: &[(u64, u64)]| -> (Vec<u64>, Vec<u64>) { v.iter().copied().unzip() };
    let ((mut pc, mut pw), (mut cc, mut cw)) = (split(&publish), split(&copy));
    let (pc, pw, cc, cw) = (
        summary(&mut pc),
        summary(&mut pw),
        summary(&mut cc),
        summary(&mut cw),
    );
    println!(
        "publish ({:?}) min {:.1} median {:.1} µs; copy min {:.1} median {:.1} µs; \
         ratio min {:.2} median {:.2} (CPU clock)",
        w.method(),
        pc.0,
        pc.1,
        cc.0,
        cc.1,
        pc.0 / cc.0,
        pc.1 / cc.1
    );
    println!(
        "wall: publish min {:.1} median {:.1} µs; copy min {:.1} median {:.1} µs; \
         ratio min {:.2} median {:.2}; {:?}",
        pw.0,
        pw.1,
        cw.0,
        cw.1,
        pw.0 / cw.0,
        pw.1 / cw.1,
        w.update_stats()
    );
    assert_eq!(w.view().damon(64).aggregations[0].regions.len(), 10_000);
}
