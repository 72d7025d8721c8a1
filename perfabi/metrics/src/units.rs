//! `metrics::Unit` → perfabi's unit (spec §5.2), and the scale that turns
//! a gauge's or histogram's `f64` into the integer perfabi stores.

use metrics::Unit as M;
use perfabi::Unit;

/// Count per second: a count over time in seconds.
const COUNT_PER_SECOND: Unit = Unit::new(0, -1, 1, 0, 3, 0, perfabi::unit::QUANTITY_PLAIN);

/// Bytes times `1024^scale`.
const fn bytes(scale: u8) -> Unit {
    Unit::new(1, 0, 0, scale, 0, 0, perfabi::unit::QUANTITY_PLAIN)
}

/// The unit of a counter: the described unit as it is, since a counter's
/// increments are integers already. Units perfabi cannot say (percent,
/// bits per second) are no unit.
pub fn counter_unit(u: Option<M>) -> Unit {
    match u {
        Some(M::Count) => Unit::COUNT,
        Some(M::Seconds) => Unit::SECONDS,
        Some(M::Milliseconds) => Unit::MS,
        Some(M::Microseconds) => Unit::US,
        Some(M::Nanoseconds) => Unit::NS,
        Some(M::Bytes) => Unit::BYTES,
        Some(M::Kibibytes) => Unit::KIB,
        Some(M::Mebibytes) => bytes(2),
        Some(M::Gibibytes) => bytes(3),
        Some(M::Tebibytes) => bytes(4),
        Some(M::CountPerSecond) => COUNT_PER_SECOND,
        _ => Unit::NONE,
    }
}

/// The unit a gauge or histogram stores its `f64` values in, and the
/// factor from the described unit to it: times in nanoseconds, sizes in
/// bytes, bit rates in bits per second (no unit: perfabi has no bits),
/// everything else as given. The stored integer is the value times the
/// factor, rounded to the nearest (ties away from zero).
pub fn float_unit(u: Option<M>) -> (Unit, f64) {
    match u {
        Some(M::Seconds) => (Unit::NS, 1e9),
        Some(M::Milliseconds) => (Unit::NS, 1e6),
        Some(M::Microseconds) => (Unit::NS, 1e3),
        Some(M::Nanoseconds) => (Unit::NS, 1.0),
        Some(M::Bytes) => (Unit::BYTES, 1.0),
        Some(M::Kibibytes) => (Unit::BYTES, 1024.0),
        Some(M::Mebibytes) => (Unit::BYTES, 1024.0 * 1024.0),
        Some(M::Gibibytes) => (Unit::BYTES, 1024.0 * 1024.0 * 1024.0),
        Some(M::Tebibytes) => (Unit::BYTES, 1024.0 * 1024.0 * 1024.0 * 1024.0),
        Some(M::BitsPerSecond) => (Unit::NONE, 1.0),
        Some(M::KilobitsPerSecond) => (Unit::NONE, 1e3),
        Some(M::MegabitsPerSecond) => (Unit::NONE, 1e6),
        Some(M::GigabitsPerSecond) => (Unit::NONE, 1e9),
        Some(M::TerabitsPerSecond) => (Unit::NONE, 1e12),
        Some(M::Count) => (Unit::COUNT, 1.0),
        Some(M::CountPerSecond) => (COUNT_PER_SECOND, 1.0),
        Some(M::Percent) | None => (Unit::NONE, 1.0),
    }
}

/// `v × factor` rounded to the nearest integer, if that is a finite
/// number in `i64`'s range.
pub fn scaled_i64(v: f64, factor: f64) -> Option<i64> {
    let x = (v * factor).round();
    // -2^63 and 2^63 are exact in f64; NaN and infinities are in no range.
    (i64::MIN as f64..-(i64::MIN as f64))
        .contains(&x)
        .then_some(x as i64)
}

/// `v × factor` rounded to the nearest integer, if that is a finite
/// number in `u64`'s range (negative observations are refused).
pub fn scaled_u64(v: f64, factor: f64) -> Option<u64> {
    let x = (v * factor).round();
    // -0.0 (a small negative rounded) is 0; 2^64 is exact in f64.
    (-0.0..-2.0 * (i64::MIN as f64))
        .contains(&x)
        .then_some(x as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_unit_is_valid_in_perfabi() {
        let all = [
            M::Count,
            M::Percent,
            M::Seconds,
            M::Milliseconds,
            M::Microseconds,
            M::Nanoseconds,
            M::Tebibytes,
            M::Gibibytes,
            M::Mebibytes,
            M::Kibibytes,
            M::Bytes,
            M::TerabitsPerSecond,
            M::GigabitsPerSecond,
            M::MegabitsPerSecond,
            M::KilobitsPerSecond,
            M::BitsPerSecond,
            M::CountPerSecond,
        ];
        for u in all {
            assert!(counter_unit(Some(u)).check(), "{u:?}");
            assert!(float_unit(Some(u)).0.check(), "{u:?}");
        }
    }

    #[test]
    fn scaling_rounds_and_refuses_what_does_not_fit() {
        assert_eq!(scaled_i64(0.0035, 1e9), Some(3_500_000));
        assert_eq!(scaled_i64(-2.5, 1.0), Some(-3));
        assert_eq!(scaled_i64(2.4, 1.0), Some(2));
        assert_eq!(scaled_i64(f64::NAN, 1.0), None);
        assert_eq!(scaled_i64(1e19, 1.0), None);
        assert_eq!(scaled_i64(-9.3e18, 1.0), None);
        assert_eq!(scaled_u64(1.5, 1024.0), Some(1536));
        assert_eq!(scaled_u64(-0.6, 1.0), None);
        assert_eq!(scaled_u64(f64::INFINITY, 1.0), None);
        assert_eq!(scaled_u64(1.8e19, 1.0), Some(18_000_000_000_000_000_000));
        assert_eq!(scaled_u64(2e19, 1.0), None);
    }
}
