//! Rules for instance names and units, and their fixed-size encodings.
//!
//! A name is 1..=63 bytes of dot-separated parts; each part is
//! `[A-Za-z_][A-Za-z0-9_]*`. That is exactly what a PCP metric name component
//! accepts, so `perfabi.counter.<name>` is always a valid PCP name. A unit is
//! 0..=15 bytes of printable ASCII without spaces.

use crate::error::Error;
use crate::layout::{NAME_LEN, UNIT_LEN};

/// Checks a name against the rules above.
pub fn check_name(name: &str) -> Result<(), Error> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() >= NAME_LEN {
        return Err(Error::BadName);
    }
    for part in name.split('.') {
        let mut chars = part.bytes();
        match chars.next() {
            Some(c) if c.is_ascii_alphabetic() || c == b'_' => {}
            _ => return Err(Error::BadName),
        }
        if !chars.all(|c| c.is_ascii_alphanumeric() || c == b'_') {
            return Err(Error::BadName);
        }
    }
    Ok(())
}

/// Checks a unit against the rules above.
pub fn check_unit(unit: &str) -> Result<(), Error> {
    if unit.len() >= UNIT_LEN || !unit.bytes().all(|c| c.is_ascii_graphic()) {
        return Err(Error::BadUnit);
    }
    Ok(())
}

/// NUL-pads `s` into a fixed field. `s` must be shorter than `N` (checked by
/// [`check_name`] / [`check_unit`]).
pub fn encode<const N: usize>(s: &str) -> [u8; N] {
    let mut out = [0u8; N];
    let n = s.len().min(N - 1);
    out[..n].copy_from_slice(&s.as_bytes()[..n]);
    out
}

/// Decodes a NUL-padded field written by a (possibly hostile) writer: the
/// bytes before the first NUL, or `None` if the field has no NUL or is not
/// UTF-8.
pub fn decode(field: &[u8]) -> Option<&str> {
    let end = field.iter().position(|&c| c == 0)?;
    core::str::from_utf8(&field[..end]).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for ok in ["a", "net.rx_bytes", "_x.y1", &"a".repeat(63)] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".a",
            "a.",
            "a..b",
            "1a",
            "a-b",
            "a b",
            "é",
            &"a".repeat(64),
        ] {
            assert_eq!(check_name(bad), Err(Error::BadName), "{bad}");
        }
    }

    #[test]
    fn units() {
        assert_eq!(check_unit(""), Ok(()));
        assert_eq!(check_unit("bytes/s"), Ok(()));
        assert_eq!(check_unit("a b"), Err(Error::BadUnit));
        assert_eq!(check_unit(&"u".repeat(16)), Err(Error::BadUnit));
    }

    #[test]
    fn roundtrip() {
        let f: [u8; 16] = encode("bytes");
        assert_eq!(decode(&f), Some("bytes"));
        assert_eq!(decode(&[b'a'; 4]), None);
        assert_eq!(decode(&[0xff, 0]), None);
    }
}
