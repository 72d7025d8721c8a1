//! Units of metric families (`spec/PERFABI.md` §5.2): checking the
//! encoding, naming a unit for people, and converting to base units for
//! tools that want them (OpenMetrics' `bytes`, `seconds`, `ratio`).
//!
//! A [`Unit`] is PCP's `pmUnits` in 8 bytes: a power of space, time and
//! count, each with a scale, plus a `quantity` that says what a plain count
//! counts (pages) or that a dimensionless value is a ratio. Tools convert
//! without parsing strings: `bytes` scaled by KiB is `1024` bytes, `µs` is
//! `1e-6` seconds.

use alloc::string::String;
use core::fmt::{self, Write};

pub use crate::layout::Unit;

/// `quantity`: a plain value of the unit's dimensions.
pub const QUANTITY_PLAIN: u8 = 0;
/// `quantity`: a count of memory pages (`dim_count` 1, nothing else).
pub const QUANTITY_PAGES: u8 = 1;
/// `quantity`: a dimensionless fraction, 1 meaning all (no dimensions).
pub const QUANTITY_RATIO: u8 = 2;

/// Names of the space scales, by `scale_space`.
const SPACE: [&str; 7] = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];
/// Names of the time scales, by `scale_time`.
const TIME: [&str; 6] = ["ns", "us", "ms", "s", "min", "h"];
/// Seconds in one unit of each time scale.
const TIME_SECONDS: [f64; 6] = [1e-9, 1e-6, 1e-3, 1.0, 60.0, 3600.0];
/// The same seconds exactly, as powers of 2, 3 and 5 ([`Powers`]).
const TIME_POWERS: [(i32, i32, i32); 6] = [
    (-9, 0, -9),
    (-6, 0, -6),
    (-3, 0, -3),
    (0, 0, 0),
    (2, 1, 1),
    (4, 2, 2),
];

/// A unit's factor to its base unit exactly: `2^two × 3^three × 5^five`.
/// Every factor of §5.2 is one (`1024^k`, `10^k`, the time scales from
/// `10^-9` to `3600` seconds, and their powers), so a stored integer in
/// the base unit has an exact decimal whenever `three` is not negative
/// (a unit per minute or per hour may have none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Powers {
    /// Power of 2.
    pub two: i32,
    /// Power of 3.
    pub three: i32,
    /// Power of 5.
    pub five: i32,
}

impl Powers {
    /// The factor 1: no conversion.
    pub const ONE: Powers = Powers {
        two: 0,
        three: 0,
        five: 0,
    };
}

impl Unit {
    /// No unit: a plain number.
    pub const NONE: Unit = Unit::new(0, 0, 0, 0, 0, 0, QUANTITY_PLAIN);
    /// Bytes.
    pub const BYTES: Unit = Unit::new(1, 0, 0, 0, 0, 0, QUANTITY_PLAIN);
    /// Kibibytes.
    pub const KIB: Unit = Unit::new(1, 0, 0, 1, 0, 0, QUANTITY_PLAIN);
    /// Nanoseconds.
    pub const NS: Unit = Unit::new(0, 1, 0, 0, 0, 0, QUANTITY_PLAIN);
    /// Microseconds.
    pub const US: Unit = Unit::new(0, 1, 0, 0, 1, 0, QUANTITY_PLAIN);
    /// Milliseconds.
    pub const MS: Unit = Unit::new(0, 1, 0, 0, 2, 0, QUANTITY_PLAIN);
    /// Seconds.
    pub const SECONDS: Unit = Unit::new(0, 1, 0, 0, 3, 0, QUANTITY_PLAIN);
    /// A count of events or things.
    pub const COUNT: Unit = Unit::new(0, 0, 1, 0, 0, 0, QUANTITY_PLAIN);
    /// A count of memory pages.
    pub const PAGES: Unit = Unit::new(0, 0, 1, 0, 0, 0, QUANTITY_PAGES);
    /// A fraction, 1 = all.
    pub const RATIO: Unit = Unit::new(0, 0, 0, 0, 0, 0, QUANTITY_RATIO);
    /// Bytes per second.
    pub const BYTES_PER_SECOND: Unit = Unit::new(1, -1, 0, 0, 3, 0, QUANTITY_PLAIN);

    /// A unit from its fields (`reserved` 0). Not checked: see [`Unit::check`].
    pub const fn new(
        dim_space: i8,
        dim_time: i8,
        dim_count: i8,
        scale_space: u8,
        scale_time: u8,
        scale_count: i8,
        quantity: u8,
    ) -> Self {
        Unit {
            dim_space,
            dim_time,
            dim_count,
            scale_space,
            scale_time,
            scale_count,
            quantity,
            reserved: 0,
        }
    }

    /// Whether the encoding follows §5.2: dimensions in -3..=3, each scale
    /// in its range and 0 where its dimension is 0, a defined `quantity`
    /// with the dimensions it needs, `reserved` 0.
    pub fn check(&self) -> bool {
        let dims = [self.dim_space, self.dim_time, self.dim_count];
        dims.iter().all(|d| (-3..=3).contains(d))
            && usize::from(self.scale_space) < SPACE.len()
            && usize::from(self.scale_time) < TIME.len()
            && (-8..=7).contains(&self.scale_count)
            && (self.dim_space != 0 || self.scale_space == 0)
            && (self.dim_time != 0 || self.scale_time == 0)
            && (self.dim_count != 0 || self.scale_count == 0)
            && self.reserved == 0
            && match self.quantity {
                QUANTITY_PLAIN => true,
                QUANTITY_PAGES => dims == [0, 0, 1] && self.scale_count == 0,
                QUANTITY_RATIO => dims == [0, 0, 0],
                _ => false,
            }
    }

    /// The unit of a 1.0 entry's unit string, where the string names one
    /// (`bytes`, `ns`, `count`, `calls`, …; §5.2); other strings have no
    /// structured unit and are shown as they are.
    pub fn from_legacy(text: &str) -> Option<Unit> {
        Some(match text {
            "" => Unit::NONE,
            "bytes" | "byte" | "B" => Unit::BYTES,
            "KiB" | "kB" | "KB" => Unit::KIB,
            "ns" => Unit::NS,
            "us" => Unit::US,
            "ms" => Unit::MS,
            "s" | "sec" | "seconds" => Unit::SECONDS,
            "count" | "events" | "calls" | "packets" | "requests" | "regions" => Unit::COUNT,
            "pages" => Unit::PAGES,
            "ratio" => Unit::RATIO,
            "bytes/s" => Unit::BYTES_PER_SECOND,
            _ => return None,
        })
    }

    /// Whether the unit is a time (dimension time¹, nothing else).
    pub fn is_time(&self) -> bool {
        self.dim_time == 1 && self.dim_space == 0 && self.dim_count == 0
    }

    /// Whether the unit is a size in bytes (space¹, nothing else).
    pub fn is_space(&self) -> bool {
        self.dim_space == 1 && self.dim_time == 0 && self.dim_count == 0
    }

    /// The base unit a value converts to and the factor to multiply by:
    /// bytes, seconds, a count, pages or a ratio, each power applied
    /// (`KiB` → (`"bytes"`, 1024); `bytes/s` → (`"bytes_per_second"`, 1)).
    /// The name is empty for a plain number or count (OpenMetrics: no unit).
    pub fn base(&self) -> (String, f64) {
        let mut factor = 1.0;
        let mut up: [(&str, i8); 3] = [("", 0); 3];
        if self.dim_space != 0 {
            factor *= powi(powi(1024.0, self.scale_space as i8), self.dim_space);
            up[0] = ("bytes", self.dim_space);
        }
        if self.dim_time != 0 {
            factor *= powi(TIME_SECONDS[usize::from(self.scale_time)], self.dim_time);
            up[1] = ("seconds", self.dim_time);
        }
        if self.dim_count != 0 {
            factor *= powi(powi(10.0, self.scale_count), self.dim_count);
            let counted = if self.quantity == QUANTITY_PAGES {
                "pages"
            } else {
                ""
            };
            up[2] = (counted, self.dim_count);
        }
        let mut name = String::new();
        for (n, d) in up.iter().filter(|(n, d)| *d > 0 && !n.is_empty()) {
            push_part(&mut name, n, *d);
        }
        let mut per = true;
        for (n, d) in up.iter().filter(|(n, d)| *d < 0 && !n.is_empty()) {
            if per {
                name.push_str(if name.is_empty() { "per" } else { "_per" });
                per = false;
            }
            // Singular after "per": bytes_per_second.
            push_part(&mut name, n.trim_end_matches('s'), -*d);
        }
        if self.quantity == QUANTITY_RATIO {
            name.push_str("ratio");
        }
        (name, factor)
    }
}

impl Unit {
    /// The factor of [`Unit::base`] exactly, as powers of 2, 3 and 5
    /// (`KiB` → `2^10`; `µs` → `2^-6 × 5^-6`; `min` → `2^2 × 3 × 5`).
    pub fn base_powers(&self) -> Powers {
        let (dim_space, dim_time, dim_count) = (
            i32::from(self.dim_space),
            i32::from(self.dim_time),
            i32::from(self.dim_count),
        );
        let space = 10 * i32::from(self.scale_space) * dim_space;
        let (t2, t3, t5) = TIME_POWERS[usize::from(self.scale_time) % TIME_POWERS.len()];
        let count = i32::from(self.scale_count) * dim_count;
        Powers {
            two: space + t2 * dim_time + count,
            three: t3 * dim_time,
            five: t5 * dim_time + count,
        }
    }
}

fn push_part(out: &mut String, name: &str, power: i8) {
    if !out.is_empty() {
        out.push('_');
    }
    out.push_str(name);
    if power > 1 {
        let _ = write!(out, "{power}");
    }
}

/// `x^n` by repeated multiplication (`core` has no `powi`); `|n|` is small.
fn powi(x: f64, n: i8) -> f64 {
    let mut r = 1.0;
    for _ in 0..n.unsigned_abs() {
        r *= x;
    }
    if n < 0 {
        1.0 / r
    } else {
        r
    }
}

impl fmt::Display for Unit {
    /// A short human name: `bytes`, `KiB`, `ns`, `count`, `pages`,
    /// `ratio`, `bytes/s`, `count x 10^3`; empty for no unit.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut num: [(String, i8); 3] = Default::default();
        if self.dim_space != 0 {
            num[0] = (
                String::from(SPACE[usize::from(self.scale_space) % 7]),
                self.dim_space,
            );
        }
        if self.dim_time != 0 {
            num[1] = (
                String::from(TIME[usize::from(self.scale_time) % 6]),
                self.dim_time,
            );
        }
        if self.dim_count != 0 {
            let mut c = String::from(if self.quantity == QUANTITY_PAGES {
                "pages"
            } else {
                "count"
            });
            if self.scale_count != 0 {
                let _ = write!(c, " x 10^{}", self.scale_count);
            }
            num[2] = (c, self.dim_count);
        }
        let mut out = String::new();
        for (n, d) in num.iter().filter(|(_, d)| *d > 0) {
            if !out.is_empty() {
                out.push(' ');
            }
            out.push_str(n);
            if *d > 1 {
                let _ = write!(out, "^{d}");
            }
        }
        for (n, d) in num.iter().filter(|(_, d)| *d < 0) {
            if out.is_empty() {
                out.push('1');
            }
            out.push('/');
            out.push_str(n);
            if *d < -1 {
                let _ = write!(out, "^{}", -d);
            }
        }
        if self.quantity == QUANTITY_RATIO {
            out.push_str("ratio");
        }
        f.write_str(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    /// The exact factor is the float one, for every unit §5.2 allows.
    #[test]
    fn exact_powers_are_the_factor() {
        let mut seen = 0;
        for dims in 0..7i8.pow(3) {
            let (ds, dt, dc) = (dims % 7 - 3, dims / 7 % 7 - 3, dims / 49 - 3);
            for (ss, st, sc) in (0..7u8)
                .flat_map(|a| (0..6u8).flat_map(move |b| (-8..=7i8).map(move |c| (a, b, c))))
            {
                let u = Unit::new(ds, dt, dc, ss, st, sc, QUANTITY_PLAIN);
                if !u.check() {
                    continue;
                }
                let p = u.base_powers();
                let pow = |x: f64, n: i32| {
                    let r = (0..n.unsigned_abs()).fold(1.0, |r, _| r * x);
                    if n < 0 {
                        1.0 / r
                    } else {
                        r
                    }
                };
                let exact = pow(2.0, p.two) * pow(3.0, p.three) * pow(5.0, p.five);
                let factor = u.base().1;
                assert!(
                    ((exact - factor) / factor).abs() < 1e-12,
                    "{u:?}: {p:?} is {exact}, base() {factor}"
                );
                seen += 1;
            }
        }
        assert!(seen > 1000, "{seen}");
        assert_eq!(Unit::NONE.base_powers(), Powers::ONE);
        assert_eq!(
            Unit::KIB.base_powers(),
            Powers {
                two: 10,
                three: 0,
                five: 0
            }
        );
        assert_eq!(
            Unit::US.base_powers(),
            Powers {
                two: -6,
                three: 0,
                five: -6
            }
        );
    }

    #[test]
    fn checks() {
        for u in [
            Unit::NONE,
            Unit::BYTES,
            Unit::KIB,
            Unit::NS,
            Unit::US,
            Unit::SECONDS,
            Unit::COUNT,
            Unit::PAGES,
            Unit::RATIO,
            Unit::BYTES_PER_SECOND,
        ] {
            assert!(u.check(), "{u:?}");
        }
        let bad = [
            Unit::new(4, 0, 0, 0, 0, 0, 0),
            Unit::new(1, 0, 0, 7, 0, 0, 0),
            Unit::new(0, 1, 0, 0, 6, 0, 0),
            Unit::new(0, 0, 0, 1, 0, 0, 0),
            Unit::new(0, 0, 0, 0, 0, 3, 0),
            Unit::new(1, 0, 0, 0, 0, 0, QUANTITY_PAGES),
            Unit::new(0, 0, 1, 0, 0, 0, QUANTITY_RATIO),
            Unit::new(0, 0, 0, 0, 0, 0, 3),
            Unit {
                reserved: 1,
                ..Unit::NONE
            },
        ];
        for u in bad {
            assert!(!u.check(), "{u:?}");
        }
    }

    #[test]
    fn names() {
        assert_eq!(Unit::BYTES.to_string(), "bytes");
        assert_eq!(Unit::KIB.to_string(), "KiB");
        assert_eq!(Unit::US.to_string(), "us");
        assert_eq!(Unit::PAGES.to_string(), "pages");
        assert_eq!(Unit::RATIO.to_string(), "ratio");
        assert_eq!(Unit::BYTES_PER_SECOND.to_string(), "bytes/s");
        assert_eq!(Unit::new(0, -1, 1, 0, 3, 0, 0).to_string(), "count/s");
        assert_eq!(Unit::NONE.to_string(), "");
    }

    #[test]
    fn bases() {
        assert_eq!(Unit::KIB.base(), ("bytes".to_string(), 1024.0));
        assert_eq!(Unit::US.base(), ("seconds".to_string(), 1e-6));
        assert_eq!(Unit::COUNT.base(), (String::new(), 1.0));
        assert_eq!(Unit::PAGES.base().0, "pages");
        assert_eq!(Unit::RATIO.base().0, "ratio");
        assert_eq!(Unit::BYTES_PER_SECOND.base().0, "bytes_per_second");
        assert_eq!(Unit::new(0, -1, 1, 0, 3, 0, 0).base().0, "per_second");
    }
}
