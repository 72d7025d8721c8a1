//! Values for people: a family's unit applied (bytes with IEC prefixes,
//! times in ns/µs/ms/s, counts plain), rates, and a histogram's summary.

use perfabi::text::escape;
use perfabi::unit::{Powers, QUANTITY_PAGES, QUANTITY_PLAIN, QUANTITY_RATIO};
use perfabi_reader::{decimal, Buckets, Family, Histogram, Reading, Unit};

/// How the values of a unit are shown.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// A plain number (no unit, or a count of things).
    Plain {
        /// What one stored unit is worth (a count scaled by `10^k`).
        factor: f64,
        /// `factor` exactly.
        powers: Powers,
    },
    /// Bytes: shown with IEC prefixes.
    Bytes {
        /// Bytes in one stored unit (`1024^scale`).
        factor: f64,
    },
    /// A time: shown in ns, µs, ms or s.
    Time {
        /// Nanoseconds in one stored unit.
        factor: f64,
        /// Whether it is CPU time (see [`is_cpu_time`]): its rate is a
        /// share of one CPU (`% CPU`), another time's a share of one
        /// second (`%`: a PSI stall, a wait).
        cpu: bool,
    },
    /// Bytes per second: IEC prefixes and `/s`.
    BytesPerSecond {
        /// Bytes per second in one stored unit.
        factor: f64,
    },
    /// Memory pages.
    Pages,
    /// A fraction, 1 meaning all: shown as a percentage.
    Ratio,
    /// Any other unit: the number and the unit's name.
    Other(String),
}

impl Shape {
    /// The shape of `f`'s values: from its structured unit, or a 1.0
    /// entry's unit text when it names no unit.
    pub fn of(f: &Family) -> Self {
        let u = f.unit;
        if u == Unit::NONE {
            return if f.unit_text.is_empty() {
                Shape::Plain {
                    factor: 1.0,
                    powers: Powers::ONE,
                }
            } else {
                Shape::Other(shown(&f.unit_text))
            };
        }
        let factor = u.base().1;
        match (u.dim_space, u.dim_time, u.dim_count, u.quantity) {
            (1, 0, 0, QUANTITY_PLAIN) => Shape::Bytes { factor },
            (0, 1, 0, QUANTITY_PLAIN) => Shape::Time {
                factor: factor * 1e9,
                cpu: is_cpu_time(&f.name),
            },
            (1, -1, 0, QUANTITY_PLAIN) => Shape::BytesPerSecond { factor },
            (0, 0, 1, QUANTITY_PLAIN) => Shape::Plain {
                factor,
                powers: u.base_powers(),
            },
            (0, 0, 1, QUANTITY_PAGES) => Shape::Pages,
            (0, 0, 0, QUANTITY_RATIO) => Shape::Ratio,
            _ => Shape::Other(u.to_string()),
        }
    }

    /// `v` stored units (a mean: not a whole number), for people.
    pub fn show(&self, v: f64) -> String {
        match self {
            Shape::Plain { factor, .. } => number(v * factor),
            Shape::Bytes { factor } => bytes(v * factor),
            Shape::Time { factor, .. } => time_ns(v * factor),
            Shape::BytesPerSecond { factor } => format!("{}/s", bytes(v * factor)),
            Shape::Pages => format!("{} pages", number(v)),
            Shape::Ratio => format!("{:.1}%", v * 100.0),
            Shape::Other(u) => format!("{} {u}", number(v)),
        }
    }

    /// `v` stored units, a whole number (a value, a sum, a bound), for
    /// people: a plain number, pages or a number of another unit exactly,
    /// whatever its size (`18446744073709551615`, `-9223372036854775808`;
    /// a count scaled by `10^-3` as its exact decimal); bytes and times
    /// with their prefixes, as [`show`](Self::show).
    pub fn show_whole(&self, v: i128) -> String {
        match self {
            Shape::Plain { factor, powers } => {
                decimal::scaled(v, *powers).unwrap_or_else(|| number(v as f64 * factor))
            }
            Shape::Pages => format!("{v} pages"),
            Shape::Other(u) => format!("{v} {u}"),
            _ => self.show(v as f64),
        }
    }

    /// A rate of `per_s` stored units per second, for people: a counter of
    /// CPU time as a percentage of one CPU (`% CPU`), another time as a
    /// percentage of one second (`%`), bytes as bytes per second.
    pub fn rate(&self, per_s: f64) -> String {
        match self {
            Shape::Plain { factor, .. } => format!("{}/s", rate_number(per_s * factor)),
            Shape::Bytes { factor } => format!("{}/s", bytes(per_s * factor)),
            // Nanoseconds per second: 1e9 is one CPU (or, for a stall,
            // the whole second).
            Shape::Time { factor, cpu } => format!(
                "{:.1}%{}",
                per_s * factor / 1e7,
                if *cpu { " CPU" } else { "" }
            ),
            Shape::BytesPerSecond { factor } => format!("{}/s²", bytes(per_s * factor)),
            Shape::Pages => format!("{} pages/s", rate_number(per_s)),
            Shape::Ratio => format!("{:.1}%/s", per_s * 100.0),
            Shape::Other(u) => format!("{} {u}/s", rate_number(per_s)),
        }
    }
}

/// A segment string for people (a name, an instance, a label, a unit):
/// validated printable ASCII already, but escaped as every outside text is
/// (`spec/PERFABI.md` §11.7).
pub fn shown(s: &str) -> String {
    escape(s.as_bytes()).to_string()
}

/// Whether a family of times named `name` counts CPU time: its name has
/// the words `cpu` and `time` in a row (`kernel.cpu.time`,
/// `task.cpu_time`) or `cputime`. A stall on the CPU
/// (`kernel.all.pressure.cpu.some.total`) is not CPU time.
pub fn is_cpu_time(name: &str) -> bool {
    let words: Vec<String> = name
        .split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .collect();
    words.iter().any(|w| w == "cputime")
        || words.windows(2).any(|w| w[0] == "cpu" && w[1] == "time")
}

/// A number that is not a stored integer (a mean, a value times a float
/// factor): whole numbers below 10^15 as such, others with one decimal.
/// Stored integers go through [`Shape::show_whole`], exact at any size.
fn number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else if v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        // Past 2^53 an f64 holds no decimal of it, nor every unit: its
        // digits would look exact and not be.
        format!("{v:.3e}")
    }
}

/// A count per second (or any plain rate): one decimal, with an SI prefix
/// from a thousand on (`12.5`, `9.9 k`, `1.2 M`), so that a column of
/// rates stays narrow and readable.
pub fn rate_number(v: f64) -> String {
    if !v.is_finite() || v.abs() < 999.95 {
        return format!("{v:.1}");
    }
    prefixed(v, 1000.0, 999.95, &["k", "M", "G", "T", "P", "E"])
}

/// `v` divided by `base` once, then again while it is at least `limit`
/// (and a larger prefix is left), with one decimal and that prefix:
/// the one scaling of [`rate_number`] (SI) and [`bytes`] (IEC).
fn prefixed(v: f64, base: f64, limit: f64, prefixes: &[&str]) -> String {
    let mut x = v / base;
    let mut k = 0;
    while x.abs() >= limit && k + 1 < prefixes.len() {
        x /= base;
        k += 1;
    }
    format!("{x:.1} {}", prefixes[k])
}

/// Bytes with IEC prefixes: `512 B`, `4.0 KiB`, `1.5 GiB`.
pub fn bytes(b: f64) -> String {
    if b.abs() < 1024.0 {
        return format!("{} B", number(b));
    }
    prefixed(
        b,
        1024.0,
        1024.0,
        &["KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB"],
    )
}

/// Nanoseconds as ns, µs, ms or s.
pub fn time_ns(ns: f64) -> String {
    let a = ns.abs();
    if a < 1e3 {
        format!("{} ns", number(ns))
    } else if a < 1e6 {
        format!("{:.1} µs", ns / 1e3)
    } else if a < 1e9 {
        format!("{:.1} ms", ns / 1e6)
    } else if a < 1e22 {
        format!("{:.2} s", ns / 1e9)
    } else {
        // Seconds with two decimals past 2^53 hundredths: digits an f64
        // does not hold (see `number`).
        format!("{:.3e} s", ns / 1e9)
    }
}

/// A reading as a whole number, exactly (a histogram: its count).
pub fn whole(r: &Reading) -> i128 {
    match r {
        Reading::Unsigned(v) => i128::from(*v),
        Reading::Signed(v) => i128::from(*v),
        Reading::Histogram(h) => i128::from(h.count),
    }
}

/// A reading for people; a histogram as its number of observations.
pub fn reading(shape: &Shape, r: &Reading) -> String {
    match r {
        Reading::Histogram(h) => format!("{} obs", h.count),
        r => shape.show_whole(whole(r)),
    }
}

/// The mean of `count` observations that sum to `sum` (`count` not 0):
/// exactly when it is a whole number, else as [`Shape::show`] shows a
/// fraction.
pub fn mean(shape: &Shape, sum: u64, count: u64) -> String {
    if sum.is_multiple_of(count) {
        shape.show_whole((sum / count).into())
    } else {
        shape.show(sum as f64 / count as f64)
    }
}

/// The bucket that holds the `q`-quantile of `h`'s observations, as text:
/// `≤bound` (the bucket's upper bound), or `>bound` for the `+Inf` bucket;
/// `None` without observations.
pub fn quantile(h: &Histogram, b: &Buckets, shape: &Shape, q: f64) -> Option<String> {
    let total: u128 = h.buckets.iter().map(|&c| u128::from(c)).sum();
    if total == 0 {
        return None;
    }
    let rank = ((q * total as f64).ceil() as u128).clamp(1, total);
    let mut seen = 0u128;
    for (k, &c) in h.buckets.iter().enumerate() {
        seen += u128::from(c);
        if seen >= rank {
            return Some(match b.bound(k) {
                Some(bound) => format!("≤{}", shape.show_whole(bound.into())),
                None => match k.checked_sub(1).and_then(|p| b.bound(p)) {
                    Some(last) => format!(">{}", shape.show_whole(last.into())),
                    None => "any".to_string(),
                },
            });
        }
    }
    None
}

/// A histogram's summary: sum, mean and the buckets of p50 and p99
/// (`sum 4.1 ms  mean 820.0 µs  p50 ≤1.0 µs  p99 >16.0 µs`).
pub fn histogram_summary(h: &Histogram, f: &Family) -> String {
    let shape = Shape::of(f);
    let Some(b) = &f.buckets else {
        return String::new();
    };
    if h.count == 0 {
        return "no observations".to_string();
    }
    let mut s = format!(
        "sum {}  mean {}",
        shape.show_whole(h.sum.into()),
        mean(&shape, h.sum, h.count)
    );
    for (name, q) in [("p50", 0.5), ("p99", 0.99)] {
        if let Some(t) = quantile(h, b, &shape, q) {
            s.push_str(&format!("  {name} {t}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_for_people() {
        assert_eq!(bytes(512.0), "512 B");
        assert_eq!(bytes(4096.0), "4.0 KiB");
        assert_eq!(bytes(123_456.0), "120.6 KiB");
        assert_eq!(bytes(1.5 * (1u64 << 30) as f64), "1.5 GiB");
        assert_eq!(time_ns(999.0), "999 ns");
        assert_eq!(time_ns(1500.0), "1.5 µs");
        assert_eq!(time_ns(2.5e6), "2.5 ms");
        assert_eq!(time_ns(3e9), "3.00 s");
        let kib = Shape::Bytes { factor: 1024.0 };
        assert_eq!(kib.show(2.0), "2.0 KiB");
        let ns = Shape::Time {
            factor: 1.0,
            cpu: true,
        };
        // Half a CPU: 0.5 s of CPU time per second.
        assert_eq!(ns.rate(5e8), "50.0% CPU");
        assert_eq!(
            Shape::Plain {
                factor: 1.0,
                powers: Powers::ONE,
            }
            .show(42.0),
            "42"
        );
        assert_eq!(Shape::Ratio.show(1.0), "100.0%");
    }

    /// The rates of --watch and the live view: CPU time (whatever its
    /// stored unit) as a share of one CPU, bytes with IEC prefixes, counts
    /// with SI prefixes, all per second.
    #[test]
    fn rates_for_people() {
        // 9994.9 µs of CPU time a second: about 1% of one CPU, not "9994.9/s".
        let us = Shape::Time {
            factor: 1e3,
            cpu: true,
        };
        assert_eq!(us.rate(9994.9), "1.0% CPU");
        assert_eq!(us.rate(2e6), "200.0% CPU");
        let ns = Shape::Time {
            factor: 1.0,
            cpu: true,
        };
        assert_eq!(ns.rate(0.0), "0.0% CPU");
        // A stall (PSI): 0.97 s of each second, not CPU time.
        let stall = Shape::Time {
            factor: 1e3,
            cpu: false,
        };
        assert_eq!(stall.rate(970_000.0), "97.0%");
        let b = Shape::Bytes { factor: 1.0 };
        assert_eq!(b.rate(100.0), "100 B/s");
        assert_eq!(b.rate(3.0 * 1024.0 * 1024.0), "3.0 MiB/s");
        let count = Shape::Plain {
            factor: 1.0,
            powers: Powers::ONE,
        };
        assert_eq!(count.rate(35.0), "35.0/s");
        assert_eq!(count.rate(999.9), "999.9/s");
        assert_eq!(count.rate(5_000.0), "5.0 k/s");
        assert_eq!(count.rate(12_345_678.0), "12.3 M/s");
        assert_eq!(count.rate(-2_000.0), "-2.0 k/s");
        assert_eq!(Shape::Pages.rate(2_500.0), "2.5 k pages/s");
        assert_eq!(rate_number(f64::NAN), "NaN");
    }

    /// Only a family whose name says CPU time is shown as `% CPU`.
    #[test]
    fn cpu_time_is_told_by_its_name() {
        for yes in [
            "kernel.cpu.time",
            "task.cpu_time",
            "proc.CPU-Time",
            "x.cputime",
        ] {
            assert!(is_cpu_time(yes), "{yes}");
        }
        for no in [
            "kernel.all.pressure.cpu.some.total",
            "rpc.wait_time",
            "cpu",
            "time.cpu",
            "cpufreq.time",
        ] {
            assert!(!is_cpu_time(no), "{no}");
        }
    }

    #[test]
    fn quantiles_name_their_bucket() {
        let b = Buckets::Explicit(vec![10, 100]);
        let h = Histogram {
            count: 100,
            sum: 0,
            buckets: vec![50, 49, 1],
        };
        let plain = Shape::Plain {
            factor: 1.0,
            powers: Powers::ONE,
        };
        assert_eq!(quantile(&h, &b, &plain, 0.5).unwrap(), "≤10");
        assert_eq!(quantile(&h, &b, &plain, 0.99).unwrap(), "≤100");
        assert_eq!(quantile(&h, &b, &plain, 1.0).unwrap(), ">100");
        assert_eq!(quantile(&Histogram::default(), &b, &plain, 0.5), None);
    }
}
