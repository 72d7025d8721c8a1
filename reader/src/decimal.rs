//! Exact decimal text of a stored value: integers as they are, and an
//! integer converted to its base unit (`18446744073709551615` ms is
//! `18446744073709551.615` s) as the exact decimal of that rational
//! number, never through an `f64` (which has 53 bits: 2^64 − 1 prints as
//! `18446744073709551616`).
//!
//! Every unit factor of `spec/PERFABI.md` §5.2 is `2^a × 3^b × 5^c`
//! ([`Powers`]); the value times it has a finite decimal unless `b` is
//! negative and `3^-b` does not divide the value (a unit per minute), and
//! then [`scaled`] says so with `None`.

use num_bigint::{BigInt, Sign};
use perfabi::unit::Powers;

/// `v × 2^two × 3^three × 5^five` as the shortest exact decimal text:
/// `-12`, `0.000001`, `18446744073709551.615` (no exponent, no trailing
/// zero after the point, no point for a whole number); `None` if it has no
/// finite decimal.
///
/// ```
/// use perfabi::unit::Powers;
/// use perfabi_reader::decimal::scaled;
/// let ms = perfabi::Unit::MS.base_powers();
/// assert_eq!(scaled(u64::MAX.into(), ms).unwrap(), "18446744073709551.615");
/// assert_eq!(scaled(i64::MIN.into(), Powers::ONE).unwrap(), "-9223372036854775808");
/// assert_eq!(scaled(1, perfabi::Unit::KIB.base_powers()).unwrap(), "1024");
/// // A count per minute: 1/60 per second has no finite decimal.
/// let per_min = Powers { two: -2, three: -1, five: -1 };
/// assert_eq!(scaled(1, per_min), None);
/// assert_eq!(scaled(90, per_min).unwrap(), "1.5");
/// ```
pub fn scaled(v: i128, p: Powers) -> Option<String> {
    // `places` digits after the point: v × 2^two × 5^five is
    // v × 2^(two + places) × 5^(five + places) / 10^places, both powers
    // whole.
    let places = 0.max(-p.two).max(-p.five);
    let mut x = BigInt::from(v) << (p.two + places).unsigned_abs();
    x *= BigInt::from(5u8).pow((p.five + places).unsigned_abs());
    let three = BigInt::from(3u8).pow(p.three.unsigned_abs());
    if p.three >= 0 {
        x *= three;
    } else if (&x % &three) == BigInt::ZERO {
        x /= three;
    } else {
        return None;
    }
    Some(point(x, places as usize))
}

/// `x / 10^places` in decimal, trailing zeros of the fraction left out.
fn point(x: BigInt, places: usize) -> String {
    let (sign, magnitude) = x.into_parts();
    let digits = magnitude.to_string();
    let digits = format!("{digits:0>width$}", width = places + 1);
    let (whole, frac) = digits.split_at(digits.len() - places);
    let frac = frac.trim_end_matches('0');
    let minus = if sign == Sign::Minus { "-" } else { "" };
    if frac.is_empty() {
        format!("{minus}{whole}")
    } else {
        format!("{minus}{whole}.{frac}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use perfabi::Unit;

    fn exact(v: i128, u: Unit) -> String {
        scaled(v, u.base_powers()).unwrap()
    }

    #[test]
    fn integers_near_the_edges_are_exact() {
        for (v, text) in [
            (i128::from(u64::MAX), "18446744073709551615"),
            (1 << 63, "9223372036854775808"),
            ((1 << 53) + 1, "9007199254740993"),
            (i128::from(i64::MIN), "-9223372036854775808"),
            (0, "0"),
        ] {
            assert_eq!(exact(v, Unit::NONE), text);
            assert_eq!(exact(v, Unit::SECONDS), text);
        }
    }

    #[test]
    fn converted_values_are_exact_decimals() {
        let max = i128::from(u64::MAX);
        assert_eq!(exact(max, Unit::MS), "18446744073709551.615");
        assert_eq!(exact(max, Unit::NS), "18446744073.709551615");
        assert_eq!(
            exact(i128::from(i64::MIN), Unit::US),
            "-9223372036854.775808"
        );
        assert_eq!(exact((1 << 53) + 1, Unit::KIB), "9223372036854776832");
        assert_eq!(exact(10, Unit::US), "0.00001");
        assert_eq!(exact(1_500_000_000, Unit::NS), "1.5");
        assert_eq!(exact(-1, Unit::NS), "-0.000000001");
        // Minutes are 60 s; a count x 10^-3 is thousandths.
        assert_eq!(
            exact(max, Unit::new(0, 1, 0, 0, 4, 0, 0)),
            "1106804644422573096900"
        );
        assert_eq!(exact(7, Unit::new(0, 0, 1, 0, 0, -3, 0)), "0.007");
        // EiB³: a factor of 2^180, far past any fixed-width integer.
        let eib3 = Unit::new(3, 0, 0, 6, 0, 0, 0);
        assert_eq!(
            exact(1, eib3),
            "1532495540865888858358347027150309183618739122183602176"
        );
    }

    #[test]
    fn per_minute_is_exact_only_where_three_divides() {
        let per_min = Unit::new(0, -1, 1, 0, 4, 0, 0);
        assert_eq!(scaled(1, per_min.base_powers()), None);
        assert_eq!(scaled(6, per_min.base_powers()).unwrap(), "0.1");
    }
}
