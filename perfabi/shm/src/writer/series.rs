//! Label-based series → a family's dimension and a member (`spec/PERFABI.md`
//! §9.2): the one home of the rule the label APIs share (the `metrics`
//! recorder, the Python writer's prometheus_client-shaped classes).
//!
//! * no labels: a family without dimension, its one member;
//! * one label `k=v`: dimension `k`, instance `v` (as it is: readers show
//!   it as the label `k`, so it must be a valid instance itself);
//! * two to four labels: dimension [`SERIES_DIMENSION`], each label as a
//!   member label (`method=GET`, `status=200`), so that consumers show
//!   every label as its own, and the instance [`series_instance`] of the
//!   values: each value escaped, joined by `,` (`GET,200`). The escape
//!   makes the instance a function of the values that no two lists of
//!   values share (`a="x,y" b="z"` is `x%2Cy,z`, `a="x" b="y,z"` is
//!   `x,y%2Cz`) and always a valid instance, so a series is never refused
//!   or merged with another for its instance; only the member label table
//!   decides which values can be stored (§5.3);
//! * five or more: refused ([`perfabi::Error::BadLabels`]: a member has
//!   room for four labels).
//!
//! The order is the caller's: the `metrics` recorder sorts its labels by
//! key first, the Python classes keep their declared label names' order.
//! Readers never parse an instance: they present the member labels.

use std::fmt::Write as _;
use std::hash::Hasher as _;

use perfabi::layout::{INSTANCE_LEN, MAX_LABELS};

/// The dimension of a family whose series carry two to four labels.
pub const SERIES_DIMENSION: &str = "series";

/// A series' place in its family: the family's dimension, the member's
/// instance and its labels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SeriesMember<'a> {
    /// The family's dimension (`""`, the one label's key, or
    /// [`SERIES_DIMENSION`]).
    pub dimension: &'a str,
    /// The member's instance.
    pub instance: String,
    /// The member's labels (empty below two labels).
    pub labels: Vec<(&'a str, &'a str)>,
}

/// The family dimension, member instance and member labels of the series
/// `labels` (key, value pairs in the caller's order), by the rule of this
/// module. Refuses more than four labels and a key given twice
/// ([`perfabi::Error::BadLabels`]); the names and values themselves are
/// checked when the family and member are added.
pub fn series_member(labels: &[(String, String)]) -> Result<SeriesMember<'_>, perfabi::Error> {
    if labels.len() > MAX_LABELS
        || labels
            .iter()
            .enumerate()
            .any(|(i, (k, _))| labels[..i].iter().any(|(k2, _)| k2 == k))
    {
        return Err(perfabi::Error::BadLabels);
    }
    Ok(match labels {
        [] => SeriesMember {
            dimension: "",
            instance: String::new(),
            labels: Vec::new(),
        },
        [(k, v)] => SeriesMember {
            dimension: k,
            instance: v.clone(),
            labels: Vec::new(),
        },
        l => SeriesMember {
            dimension: SERIES_DIMENSION,
            instance: series_instance(l.iter().map(|(_, v)| v.as_str())),
            labels: l.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
        },
    })
}

/// The instance of a series of two to four labels whose values are
/// `values` (§9.2): each value with every byte that is `%`, `,`, `"`, `\`
/// or not printable ASCII without space (0x21..=0x7e) written `%XX` (two
/// uppercase hex digits), the values joined by `,`; if that is longer
/// than an instance holds (63 bytes), `#` and the 16 lowercase hex digits
/// of the FNV-1a 64-bit hash of it. Distinct lists of values have distinct
/// escaped forms (the escape is undone byte by byte, and no escaped value
/// holds a `,`); a hashed form holds no `,`, so it is never an escaped
/// one, and two hashed forms are equal only by a hash collision, which
/// the writer refuses as an instance another series has.
pub fn series_instance<'a>(values: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for (i, v) in values.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        for b in v.bytes() {
            if (0x21..=0x7e).contains(&b) && !matches!(b, b'%' | b',' | b'"' | b'\\') {
                out.push(char::from(b));
            } else {
                let _ = write!(out, "%{b:02X}");
            }
        }
    }
    if out.len() < INSTANCE_LEN {
        return out;
    }
    let mut h = fnv::FnvHasher::default();
    h.write(out.as_bytes());
    format!("#{:016x}", h.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn none_one_several_and_too_many() {
        let none = pairs(&[]);
        assert_eq!(series_member(&none).unwrap().dimension, "");
        let one = pairs(&[("queue", "a")]);
        let m = series_member(&one).unwrap();
        assert_eq!((m.dimension, m.instance.as_str()), ("queue", "a"));
        assert!(m.labels.is_empty());
        let two = pairs(&[("method", "GET"), ("status", "200")]);
        let m = series_member(&two).unwrap();
        assert_eq!((m.dimension, m.instance.as_str()), ("series", "GET,200"));
        assert_eq!(m.labels, [("method", "GET"), ("status", "200")]);
        let five: Vec<_> = (0..5).map(|i| (format!("k{i}"), "v".to_string())).collect();
        assert_eq!(series_member(&five), Err(perfabi::Error::BadLabels));
        let twice = pairs(&[("a", "1"), ("a", "2")]);
        assert_eq!(series_member(&twice), Err(perfabi::Error::BadLabels));
    }

    #[test]
    fn commas_and_escapes_never_collide() {
        let i = |v: &[&str]| series_instance(v.iter().copied());
        assert_eq!(i(&["x,y", "z"]), "x%2Cy,z");
        assert_eq!(i(&["x", "y,z"]), "x,y%2Cz");
        assert_eq!(i(&["50%", "a b"]), "50%25,a%20b");
        assert_eq!(i(&["%2C", ""]), "%252C,");
        assert_eq!(i(&["k=v", "\"q\"\\\n"]), "k=v,%22q%22%5C%0A");
        assert_eq!(i(&["é", "x"]), "%C3%A9,x");
        let long = "v".repeat(40);
        let h = i(&[&long, &long]);
        assert!(h.starts_with('#') && h.len() == 17, "{h}");
        assert_ne!(h, i(&[&long, &format!("{long}w")]));
        // The hash is FNV-1a 64 as §9.2 gives it (offset basis, prime).
        let fnv1a = |s: &str| {
            s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            })
        };
        let joined = format!("{long},{long}");
        assert_eq!(h, format!("#{:016x}", fnv1a(&joined)));
        // 63 bytes fit; 64 are hashed.
        assert_eq!(i(&[&"v".repeat(31), &"w".repeat(31)]).len(), 63);
        assert_eq!(i(&[&"v".repeat(32), &"w".repeat(31)]).len(), 17);
        // Every form is a valid instance.
        for v in [
            &["x,y", "z"][..],
            &["a b", "\n"],
            &[&long, &long, &long, &long],
        ] {
            perfabi::name::check_instance(&i(v)).unwrap();
        }
    }

    /// The escape is injective: decoding each comma-separated part gives
    /// the values back, for every list of values from an alphabet of the
    /// bytes that matter.
    #[test]
    fn the_escape_is_undone_exactly() {
        let decode = |s: &str| -> Vec<String> {
            s.split(',')
                .map(|p| {
                    let mut out = Vec::new();
                    let b = p.as_bytes();
                    let mut k = 0;
                    while k < b.len() {
                        if b[k] == b'%' {
                            let hex = std::str::from_utf8(&b[k + 1..k + 3]).unwrap();
                            out.push(u8::from_str_radix(hex, 16).unwrap());
                            k += 3;
                        } else {
                            out.push(b[k]);
                            k += 1;
                        }
                    }
                    String::from_utf8(out).unwrap()
                })
                .collect()
        };
        let alphabet = ["", "x", ",", "%", "%2C", " ", "\\", "\"", "=", ",,"];
        for a in alphabet {
            for b in alphabet {
                for c in alphabet {
                    let v = [a, b, c];
                    assert_eq!(decode(&series_instance(v)), v, "{v:?}");
                }
            }
        }
    }
}
