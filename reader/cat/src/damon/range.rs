//! `--address-range START END` and `--time-range START END`, as a person
//! types them (and sizes, such as `--wss-min-size`, written as addresses
//! are).
//!
//! Addresses are hexadecimal with `0x` or decimal, optionally with a
//! binary size suffix (`K`, `M`, `G`, `T`, also `KiB`…: powers of 1024),
//! and END may be `+SIZE`, relative to START: `0x7fab87800000 +4M`.
//! Times are seconds since the window's first aggregation, optionally with
//! a unit (`ns`, `us`, `ms`, `s`, `m`), and END may be `end`: `2.5 end`,
//! `500ms 1.5s`.

/// An address: `0x…` or decimal, with an optional binary suffix.
pub fn address(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, scale) = split_suffix(
        t,
        &[
            ("kib", 1 << 10),
            ("mib", 1 << 20),
            ("gib", 1 << 30),
            ("tib", 1 << 40),
            ("k", 1 << 10),
            ("m", 1 << 20),
            ("g", 1 << 30),
            ("t", 1 << 40),
        ],
        1,
    );
    let n = match digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        Some(hex) => u64::from_str_radix(&hex.replace('_', ""), 16),
        None => digits.replace(['_', ','], "").parse(),
    }
    .map_err(|_| {
        format!("{text:?} is not an address (0x… or decimal, with K/M/G/T if you like)")
    })?;
    n.checked_mul(scale)
        .ok_or_else(|| format!("{text:?} is beyond the 64-bit address space"))
}

/// A size in bytes, as an address is written (`4096`, `4K`, `0x1000`,
/// `2MiB`).
pub fn size(text: &str) -> Result<u64, String> {
    address(text).map_err(|_| format!("{text:?} is not a size (bytes, with K/M/G/T if you like)"))
}

/// The address range `[start, end)` from the two words of
/// `--address-range`; `end` may be `+SIZE`.
pub fn address_range(words: &[String]) -> Result<(u64, u64), String> {
    let [start, end] = words else {
        return Err("--address-range takes START and END".into());
    };
    let lo = address(start)?;
    let hi = match end.trim().strip_prefix('+') {
        Some(size) => lo
            .checked_add(address(size)?)
            .ok_or_else(|| format!("{start} {end} is beyond the 64-bit address space"))?,
        None => address(end)?,
    };
    if hi <= lo {
        return Err(format!(
            "--address-range {start} {end}: the end must be above the start"
        ));
    }
    Ok((lo, hi))
}

/// A time in ns: seconds, or a number with a unit (`ns`, `us`, `ms`, `s`,
/// `m`).
pub fn time_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (digits, scale) = split_suffix(
        t,
        &[
            ("ns", 1),
            ("us", 1_000),
            ("µs", 1_000),
            ("ms", 1_000_000),
            ("s", 1_000_000_000),
            ("m", 60_000_000_000),
        ],
        1_000_000_000,
    );
    let v: f64 = digits
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| format!("{text:?} is not a time (seconds, or with ns/us/ms/s/m)"))?;
    let ns = v * scale as f64;
    if ns >= u64::MAX as f64 {
        return Err(format!("{text:?} is too long a time"));
    }
    Ok(ns.round() as u64)
}

/// The time range `[start, end)` in ns from the two words of
/// `--time-range`; `end` may be `end` (`None`: the end of the window).
pub fn time_range(words: &[String]) -> Result<(u64, Option<u64>), String> {
    let [start, end] = words else {
        return Err("--time-range takes START and END".into());
    };
    let lo = time_ns(start)?;
    if end.trim().eq_ignore_ascii_case("end") {
        return Ok((lo, None));
    }
    let hi = time_ns(end)?;
    if hi <= lo {
        return Err(format!(
            "--time-range {start} {end}: the end must be after the start"
        ));
    }
    Ok((lo, Some(hi)))
}

/// `text` without the first of `suffixes` it ends with (case-insensitive),
/// and that suffix's scale (`none` without one).
fn split_suffix<'a>(text: &'a str, suffixes: &[(&str, u64)], none: u64) -> (&'a str, u64) {
    let lower = text.to_ascii_lowercase();
    for &(s, scale) in suffixes {
        if lower.ends_with(s)
            && lower.len() > s.len()
            && text.is_char_boundary(text.len() - s.len())
        {
            return (text[..text.len() - s.len()].trim_end(), scale);
        }
    }
    (text, none)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(a: &str, b: &str) -> Vec<String> {
        vec![a.into(), b.into()]
    }

    #[test]
    fn addresses_and_ranges() {
        assert_eq!(address("0x7fab87800000"), Ok(0x7fab_8780_0000));
        assert_eq!(address("4096"), Ok(4096));
        assert_eq!(address("4M"), Ok(4 << 20));
        assert_eq!(address("2GiB"), Ok(2 << 30));
        assert_eq!(address("0x10k"), Ok(16 << 10));
        assert!(address("0xzz").is_err());
        assert!(address("16777216T").is_err());
        assert_eq!(size("2MiB"), Ok(2 << 20));
        assert!(size("lots").unwrap_err().contains("not a size"));
        assert_eq!(address_range(&words("0x1000", "+4K")), Ok((0x1000, 0x2000)));
        assert_eq!(address_range(&words("0", "64M")), Ok((0, 64 << 20)));
        assert!(address_range(&words("0x2000", "0x1000"))
            .unwrap_err()
            .contains("above"));
        assert!(address_range(&words("0xffffffffffffffff", "+1")).is_err());
    }

    #[test]
    fn times_and_ranges() {
        assert_eq!(time_ns("2.5"), Ok(2_500_000_000));
        assert_eq!(time_ns("500ms"), Ok(500_000_000));
        assert_eq!(time_ns("1m"), Ok(60_000_000_000));
        assert_eq!(time_ns("250us"), Ok(250_000));
        assert!(time_ns("-1").is_err());
        assert!(time_ns("soon").is_err());
        assert!(time_ns("1e30").is_err());
        assert_eq!(time_range(&words("1", "end")), Ok((1_000_000_000, None)));
        assert_eq!(
            time_range(&words("0.5", "1.5s")),
            Ok((500_000_000, Some(1_500_000_000)))
        );
        assert!(time_range(&words("2", "1")).is_err());
    }
}
