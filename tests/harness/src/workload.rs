//! The workload of the tests that hold what Prometheus makes of perfabi's
//! metrics to known values (perfabi-prometheus's endpoint, and pmproxy's
//! page in the PCP fleet test): requests counted at [`RATE`] a second, and
//! as many latencies observed, 10% in the first bucket of [`BOUNDS`], 80%
//! in the second, 10% in the third. Each test's writer adds the families
//! and calls [`latency_ns`] for the n-th event (with [`crate::Paced`]).

use perfabi::{Buckets, FamilySpec, Kind, Unit};

/// Events a second.
pub const RATE: u64 = 1000;

/// The latency histogram's bucket bounds (ns): buckets 0-100, 101-1000,
/// 1001-10000 and above.
pub const BOUNDS: [u64; 3] = [100, 1000, 10_000];

/// `app.requests`: a counter of requests, one instance per `handler`.
pub fn requests() -> FamilySpec {
    FamilySpec::new(
        "app.requests",
        "Requests served",
        "handler",
        Kind::Counter,
        Unit::COUNT,
    )
}

/// `rpc.latency`: a histogram of latencies in ns with [`BOUNDS`], one
/// instance per `dimension` (none if empty).
pub fn latency(dimension: &str) -> FamilySpec {
    FamilySpec::histogram(
        "rpc.latency",
        "RPC latency",
        dimension,
        Unit::NS,
        Buckets::Explicit(BOUNDS.to_vec()),
    )
}

/// The latency of event `n` (from 0): 50 ns for every tenth from the
/// first, 5000 ns for every tenth from the tenth, 500 ns for the rest.
pub fn latency_ns(n: u64) -> u64 {
    match n % 10 {
        0 => 50,
        9 => 5000,
        _ => 500,
    }
}

/// The histogram after the first `n` events: each bucket's count, and the
/// sum of the latencies.
pub fn histogram_after(n: u64) -> ([u64; 4], u64) {
    let (low, high) = (n.div_ceil(10), n / 10);
    let buckets = [low, n - low - high, high, 0];
    (buckets, 50 * low + 500 * buckets[1] + 5000 * high)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_histogram_after_n_events_is_the_sum_of_their_latencies() {
        for n in 0..50 {
            let (mut buckets, mut sum) = ([0u64; 4], 0);
            for i in 0..n {
                let v = latency_ns(i);
                buckets[BOUNDS.iter().take_while(|&&b| v > b).count()] += 1;
                sum += v;
            }
            assert_eq!(histogram_after(n), (buckets, sum), "after {n}");
        }
    }
}
