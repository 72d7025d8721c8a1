//! A perfabi log2 histogram as a Prometheus native histogram of schema 0
//! (`spec/PERFABI.md` §16): bucket `k ≥ 1` of a `LOG2` histogram holds
//! `(2^(first+k-1), 2^(first+k)]`, which is exactly the schema-0 bucket of
//! index `first + k` (Prometheus' buckets are upper-inclusive too); bucket
//! 0 holds `[0, 2^first]`, exactly the zero bucket of threshold
//! `2^first`. A unit that a page converts by a power of two `2^shift`
//! (bytes to KiB: `shift` 10) moves every index by `shift`; a unit
//! converted by anything else (nanoseconds to seconds) has no schema-0
//! buckets, and its histogram is served with classic buckets only.
//!
//! The last bucket (`+Inf`), `(2^B, 2^64)` with `B = first + n - 2`, is
//! served as index `B + 1`, `(2^B, 2^(B+1)]`: exact when `B` is 63 (no
//! `u64` is above 2^64), else the one step of the mapping that is not
//! (Prometheus reads those observations as at most `2^(B+1)`; a classic
//! histogram's quantile there is `2^B`).

/// The schema-0 parts of a native histogram with integer counts.
#[derive(Clone, Debug, PartialEq)]
pub struct Native {
    /// The zero bucket's threshold: `2^(first + shift)`.
    pub zero_threshold: f64,
    /// Observations in the zero bucket (perfabi's bucket 0).
    pub zero_count: u64,
    /// `(offset, length)` of each run of non-empty buckets: the first
    /// offset is the run's first index, each next one the gap since the
    /// end of the run before.
    pub spans: Vec<(i32, u32)>,
    /// Each non-empty bucket's count minus the one before it (the first's
    /// minus 0), wrapping as the counts do.
    pub deltas: Vec<i64>,
}

/// The native histogram of a `LOG2` histogram whose first bound is
/// `2^first`, with per-bucket (not cumulative) `counts` (`+Inf` last) and
/// values scaled by `2^shift` on the page; `None` if a bucket holds more
/// than `i64::MAX` (only a writer that wrapped or lied): a native
/// histogram's counts are signed, such a bucket would arrive negative and
/// Prometheus would refuse the whole scrape, so the histogram is served
/// with its classic buckets only.
pub fn schema0(first: u32, counts: &[u64], shift: i32) -> Option<Native> {
    if counts.iter().any(|&c| i64::try_from(c).is_err()) {
        return None;
    }
    // first <= 63 and shift is a unit's power of two (|shift| <= 180):
    // the exponent is a normal f64's, and powi of 2 is exact.
    let base = first as i32 + shift;
    let mut native = Native {
        zero_threshold: 2f64.powi(base),
        zero_count: counts.first().copied().unwrap_or(0),
        spans: Vec::new(),
        deltas: Vec::new(),
    };
    let mut previous = 0i64;
    // The index just past the last run's end, once there is a run.
    let mut next: Option<i32> = None;
    for (k, &c) in counts.iter().enumerate().skip(1) {
        if c == 0 {
            continue;
        }
        let index = base + k as i32;
        match (next, native.spans.last_mut()) {
            (Some(n), Some(span)) if n == index => span.1 += 1,
            (Some(n), _) => native.spans.push((index - n, 1)),
            (None, _) => native.spans.push((index, 1)),
        }
        next = Some(index + 1);
        // Counts fit i64 (above); their differences wrap as Prometheus'
        // sums of them do.
        let count = c as i64;
        native.deltas.push(count.wrapping_sub(previous));
        previous = count;
    }
    Some(native)
}

/// The schema-0 index of the bucket an observation `v` (in stored units)
/// falls in on a page that scales by `2^shift`: `None` for the zero bucket
/// (`v <= 2^first`), where bucket `k` of perfabi lies at `first + k +
/// shift` (Prometheus' rule: the smallest `i` with `v·2^shift <= 2^i`).
#[cfg(test)]
fn index_of(v: u64, first: u32, shift: i32) -> Option<i32> {
    if v <= 1u64 << first {
        return None;
    }
    // ceil(log2(v)) for v > 1.
    Some((64 - (v - 1).leading_zeros()) as i32 + shift)
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfabi::Buckets;

    /// Counts of `observations` in `Buckets::Log2 { first, n }`, by the
    /// core's own rule (the writer's).
    fn observe(first: u32, n: u32, observations: &[u64]) -> Vec<u64> {
        let b = Buckets::Log2 { first, n };
        let mut counts = vec![0u64; n as usize];
        for &v in observations {
            counts[b.index(v)] += 1;
        }
        counts
    }

    /// Known observations, spans and deltas worked out by hand.
    #[test]
    fn known_observations_give_hand_computed_spans_and_deltas() {
        // first 0, 8 buckets: [0,1], (1,2], (2,4], (4,8], (8,16], (16,32],
        // (32,64], +Inf. Observations: 0, 1 (zero bucket), 3, 4 (index 2),
        // 5 (index 3), 20, 30, 31 (index 5), 1000 (+Inf, index 7).
        let counts = observe(0, 8, &[0, 1, 3, 4, 5, 20, 30, 31, 1000]);
        assert_eq!(counts, [2, 0, 2, 1, 0, 3, 0, 1]);
        let n = schema0(0, &counts, 0).unwrap();
        assert_eq!(n.zero_threshold, 1.0);
        assert_eq!(n.zero_count, 2);
        // Runs: indexes 2..=3, then 5, then 7.
        assert_eq!(n.spans, [(2, 2), (1, 1), (1, 1)]);
        // Counts 2, 1, 3, 1.
        assert_eq!(n.deltas, [2, -1, 2, -2]);

        // first 10, on a page that scales by 2^3: every index moves by 3.
        let counts = observe(10, 4, &[1024, 1025, 4096, 4097]);
        assert_eq!(counts, [1, 1, 1, 1]);
        let n = schema0(10, &counts, 3).unwrap();
        assert_eq!(n.zero_threshold, 8192.0);
        assert_eq!(n.zero_count, 1);
        assert_eq!(n.spans, [(14, 3)]);
        assert_eq!(n.deltas, [1, 0, 0]);

        // No observation: the zero bucket alone, no span.
        let n = schema0(3, &[0, 0, 0], 0).unwrap();
        assert_eq!((n.zero_count, n.spans.len(), n.deltas.len()), (0, 0, 0));
        assert_eq!(n.zero_threshold, 8.0);
    }

    /// 0, 1, 2^k, 2^k + 1 and u64::MAX land in the native bucket that
    /// Prometheus' rule (the smallest `i` with `v <= 2^i`) gives them,
    /// through the writer's bucket and the mapping.
    #[test]
    fn boundary_values_land_in_prometheus_buckets() {
        for first in [0u32, 1, 10, 40] {
            let n = 64 - first + 1; // the last finite bound 2^63
            let n = n.min(32);
            let last_bound = first + n - 2;
            let mut values = vec![0u64, 1, u64::MAX];
            for k in 0..64 {
                values.push(1u64 << k);
                values.push((1u64 << k) + 1);
            }
            for v in values {
                let counts = observe(first, n, &[v]);
                let native = schema0(first, &counts, 0).unwrap();
                let got = if native.zero_count == 1 {
                    None
                } else {
                    assert_eq!(native.spans.len(), 1, "{v}");
                    Some(native.spans[0].0)
                };
                let want = index_of(v, first, 0);
                // Every value up to the last finite bound is exact; above
                // it, the +Inf bucket is served as index last_bound + 1.
                if v <= 1u64 << last_bound {
                    assert_eq!(got, want, "v {v} first {first}");
                } else {
                    assert_eq!(got, Some(last_bound as i32 + 1), "v {v} first {first}");
                }
            }
        }
        // With the last finite bound 2^63, u64::MAX is exact too.
        let counts = observe(33, 32, &[u64::MAX, (1 << 63) + 1]);
        let native = schema0(33, &counts, 0).unwrap();
        assert_eq!(native.spans, [(64, 1)]);
        assert_eq!(index_of(u64::MAX, 33, 0), Some(64));
        assert_eq!(native.deltas, [2]);
    }

    /// Counts up to i64::MAX that differ by more than an i64 wrap in
    /// their deltas: a decoder adding them (wrapping) gets each back. A
    /// count past i64::MAX, which Prometheus would read as negative (and
    /// refuse the scrape), gives no native histogram.
    #[test]
    fn deltas_wrap_and_add_back_and_counts_past_i64_are_not_native() {
        let max = i64::MAX as u64;
        let counts = [0, max, 1, max - 1];
        let n = schema0(0, &counts, 0).unwrap();
        let mut acc = 0i64;
        let back: Vec<u64> = n
            .deltas
            .iter()
            .map(|d| {
                acc = acc.wrapping_add(*d);
                acc as u64
            })
            .collect();
        assert_eq!(back, counts[1..]);
        assert!(schema0(0, &[0, 1 << 63, 1], 0).is_none());
        assert!(schema0(0, &[u64::MAX, 0], 0).is_none());
    }
}
