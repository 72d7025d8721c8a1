//! Rules for instance names and units, and their fixed-size encodings
//! (`spec/PERFABI.md` §5).
//!
//! A name is 1..=63 bytes of dot-separated parts; each part is
//! `[A-Za-z_][A-Za-z0-9_]*`, and the name starts with a letter. Its
//! [flat form](flat) (dots as underscores) is then a valid PCP name
//! component and, after `perfabi_`, a valid OpenMetrics family name: that is
//! the one name every consumer shows. Two live names whose flat forms agree
//! once OpenMetrics' reserved sample suffixes are taken off ([`clash_key`])
//! would be one series to those consumers, so they may not be live together
//! (`a.b` and `a_b`; `x` and `x_total`). A unit is 0..=15 bytes of printable
//! ASCII without spaces.

use alloc::string::String;

use crate::error::Error;
use crate::layout::{
    DIMENSION_LEN, HELP_LEN, INSTANCE_LEN, LABEL_KEY_LEN, LABEL_VALUE_LEN, NAME_LEN, UNIT_LEN,
};

/// The suffixes OpenMetrics gives the samples of a family (counter:
/// `_total`, `_created`; histogram and summary: `_count`, `_sum`, `_bucket`;
/// gauge histogram: `_gcount`, `_gsum`; info: `_info`). A name ending in one
/// would be read as a sample of another family.
pub const RESERVED_SUFFIXES: [&str; 8] = [
    "_total", "_created", "_count", "_sum", "_bucket", "_gcount", "_gsum", "_info",
];

/// The flat form of a valid name: dots as underscores
/// (`net.rx_bytes` → `net_rx_bytes`), from which the OpenMetrics family
/// name is made ([`openmetrics`]) and clash keys are computed.
pub fn flat(name: &str) -> String {
    name.replace('.', "_")
}

/// The OpenMetrics family name of a live name: `perfabi_` and its flat
/// form (`net.rx_bytes` → `perfabi_net_rx_bytes`). Live names have
/// distinct clash keys, so their families and samples never collide
/// (spec §5.5).
pub fn openmetrics(name: &str) -> String {
    let mut s = String::from("perfabi_");
    s.push_str(&flat(name));
    s
}

/// The PCP metric name of a live name: `perfabi.` and the name, dots kept
/// as PCP's own hierarchy (`disk.dev.read_bytes` → `perfabi.disk.dev.read_bytes`).
/// No live family's name is a dotted prefix of another live name, so a
/// family is never a node of another metric (spec §5.5).
pub fn pcp(name: &str) -> String {
    let mut s = String::from("perfabi.");
    s.push_str(name);
    s
}

/// The key under which live names must be unique: the flat form with every
/// trailing reserved suffix taken off (`x_total_total` → `x`).
pub fn clash_key(name: &str) -> String {
    let mut key = flat(name);
    while let Some(s) = RESERVED_SUFFIXES
        .iter()
        .find(|s| key.len() > s.len() && key.ends_with(*s))
    {
        key.truncate(key.len() - s.len());
    }
    key
}

/// Checks a name against the rules above.
pub fn check_name(name: &str) -> Result<(), Error> {
    let b = name.as_bytes();
    if b.is_empty() || b.len() >= NAME_LEN || !b[0].is_ascii_alphabetic() {
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

/// Checks a family's name (ABI 1.1, spec §5.1): the rule of [`check_name`],
/// and every part starts with a letter, so that each part is a PCP name
/// component (`perfabi.<name>` needs no mapping).
pub fn check_family_name(name: &str) -> Result<(), Error> {
    check_name(name)?;
    if name
        .split('.')
        .all(|p| p.bytes().next().is_some_and(|c| c.is_ascii_alphabetic()))
    {
        Ok(())
    } else {
        Err(Error::BadName)
    }
}

/// Checks a unit against the rules above.
pub fn check_unit(unit: &str) -> Result<(), Error> {
    if unit.len() >= UNIT_LEN || !unit.bytes().all(|c| c.is_ascii_graphic()) {
        return Err(Error::BadUnit);
    }
    Ok(())
}

/// Whether `a` is a dotted prefix of `b` (`a.b` of `a.b.c`): PCP cannot
/// have both as metrics, so live families may not be (spec §5).
pub fn dotted_prefix(a: &str, b: &str) -> bool {
    b.len() > a.len() && b.starts_with(a) && b.as_bytes()[a.len()] == b'.'
}

/// Label keys readers add themselves, which a dimension or label may not
/// be: `cpu` (per-CPU values), `le` (OpenMetrics histogram buckets),
/// `lower_bound` and `upper_bound` (PCP histogram bucket instances).
pub const RESERVED_LABEL_KEYS: [&str; 4] = ["cpu", "le", "lower_bound", "upper_bound"];

/// Checks one line of help: 0..=127 printable ASCII bytes (spaces allowed).
pub fn check_help(help: &str) -> Result<(), Error> {
    if help.len() >= HELP_LEN || !help.bytes().all(|c| (0x20..0x7f).contains(&c)) {
        return Err(Error::BadHelp);
    }
    Ok(())
}

fn label_key_ok(key: &str, max: usize) -> bool {
    let b = key.as_bytes();
    !b.is_empty()
        && b.len() < max
        && b[0].is_ascii_lowercase()
        && b.iter()
            .all(|&c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_')
        && !RESERVED_LABEL_KEYS.contains(&key)
}

/// Checks a family's instance dimension: empty (a family of one instance)
/// or a label key of at most 31 bytes.
pub fn check_dimension(dim: &str) -> Result<(), Error> {
    if dim.is_empty() || label_key_ok(dim, DIMENSION_LEN) {
        Ok(())
    } else {
        Err(Error::BadLabelKey)
    }
}

/// Checks a label key: `[a-z][a-z0-9_]*`, at most 15 bytes, not one of
/// [`RESERVED_LABEL_KEYS`].
pub fn check_label_key(key: &str) -> Result<(), Error> {
    if label_key_ok(key, LABEL_KEY_LEN) {
        Ok(())
    } else {
        Err(Error::BadLabelKey)
    }
}

/// An instance string made of a kernel name (a disk's, an interface's):
/// every byte that is not printable ASCII, and space, `"` and `\`, becomes
/// `_`; at most 63 bytes are kept; an empty name becomes `_`. The kernel
/// module's `src_instance_name()` and the eBPF writer name instances so.
///
/// ```
/// assert_eq!(perfabi::name::instance_from(b"sda"), "sda");
/// assert_eq!(perfabi::name::instance_from(b"my \"disk\"\xff"), "my__disk__");
/// assert_eq!(perfabi::name::instance_from(b""), "_");
/// ```
pub fn instance_from(name: &[u8]) -> String {
    let mut out: String = name
        .iter()
        .take(INSTANCE_LEN - 1)
        .map(|&c| {
            if c.is_ascii_graphic() && c != b'"' && c != b'\\' {
                c as char
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() {
        out.push('_');
    }
    out
}

/// Checks an instance string: 0..=63 printable ASCII bytes without space,
/// `"` or `\` (whether it may be empty depends on the family, §5.3).
pub fn check_instance(instance: &str) -> Result<(), Error> {
    let ok = instance.len() < INSTANCE_LEN
        && instance
            .bytes()
            .all(|c| c.is_ascii_graphic() && c != b'"' && c != b'\\');
    if ok {
        Ok(())
    } else {
        Err(Error::BadInstance)
    }
}

/// Checks a label value: 1..=47 printable ASCII bytes (spaces allowed),
/// without `"` or `\`.
pub fn check_label_value(value: &str) -> Result<(), Error> {
    let ok = !value.is_empty()
        && value.len() < LABEL_VALUE_LEN
        && value
            .bytes()
            .all(|c| (0x20..0x7f).contains(&c) && c != b'"' && c != b'\\');
    if ok {
        Ok(())
    } else {
        Err(Error::BadInstance)
    }
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
        for ok in ["a", "net.rx_bytes", "x._y1", &"a".repeat(63)] {
            assert_eq!(check_name(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            ".a",
            "a.",
            "a..b",
            "1a",
            "_x.y1",
            "a-b",
            "a b",
            "é",
            &"a".repeat(64),
        ] {
            assert_eq!(check_name(bad), Err(Error::BadName), "{bad}");
        }
    }

    #[test]
    fn clash_keys() {
        assert_eq!(clash_key("a.b"), clash_key("a_b"));
        assert_eq!(clash_key("x"), clash_key("x_total"));
        assert_eq!(clash_key("y"), clash_key("y.created"));
        assert_eq!(clash_key("x_total_total"), "x");
        assert_eq!(clash_key("lat.count"), "lat");
        assert_ne!(clash_key("a.b"), clash_key("ab"));
        assert_ne!(clash_key("totals"), clash_key("total"));
        // A name that is only a suffix keeps it (never empty).
        assert_eq!(clash_key("a_sum"), "a");
        assert_eq!(flat("net.rx_bytes"), "net_rx_bytes");
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
