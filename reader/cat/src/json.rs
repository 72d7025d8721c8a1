//! JSON as perfabi-cat writes it: compact, one document per line, and safe
//! for the terminal it may be printed on.
//!
//! serde_json escapes `"`, `\` and the C0 controls, as JSON requires; DEL,
//! the C1 controls (U+009B is a one-character CSI to some terminals),
//! bidirectional overrides and the other characters that
//! [`perfabi::text::escape`] shows by number are legal in a JSON string,
//! and would reach the terminal as they are (a path in `--info --json`, a
//! message quoting one). [`Safe`] writes those as JSON's own `\uXXXX`
//! escapes: the document decodes to the same strings, and no byte of it is
//! a terminal control.

use std::io::{self, Write};

use perfabi::text::harmless;
use serde::{Serialize, Serializer};
use serde_json::ser::Formatter;

/// serde_json's compact form (the trait's default methods), with every
/// character [`harmless`] refuses written as a `\uXXXX` escape (serde_json
/// escapes those below 0x20 before a fragment reaches it).
struct Safe;

impl Formatter for Safe {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut from = 0;
        for (at, c) in fragment.char_indices() {
            if harmless(c) {
                continue;
            }
            w.write_all(&fragment.as_bytes()[from..at])?;
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                write!(w, "\\u{u:04x}")?;
            }
            from = at + c.len_utf8();
        }
        w.write_all(&fragment.as_bytes()[from..])
    }
}

/// A JSON array of what the iterators that `.0` makes yield, serialized as
/// they are made (nothing of the array is built in memory).
pub struct Seq<F>(pub F);

impl<F, I> Serialize for Seq<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_seq((self.0)())
    }
}

/// A JSON object of the (key, value) pairs that the iterators that `.0`
/// makes yield, serialized as they are made.
pub struct Map<F>(pub F);

impl<F, I, K, V> Serialize for Map<F>
where
    F: Fn() -> I,
    I: Iterator<Item = (K, V)>,
    K: Serialize,
    V: Serialize,
{
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map((self.0)())
    }
}

/// Writes `v` as one line of JSON (see the module docs) to `out`.
pub fn line(out: &mut impl Write, v: &impl Serialize) -> io::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(&mut *out, Safe);
    v.serialize(&mut ser).map_err(io::Error::from)?;
    writeln!(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(v: &impl Serialize) -> String {
        let mut out = Vec::new();
        line(&mut out, v).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn controls_are_json_escapes_and_read_back() {
        let hostile = "/tmp/\u{1b}]0;pwn\u{7}\u{7f}\u{9b}2J\u{202e}é\u{1f600}\\\"x";
        let doc = serde_json::json!({ "path": hostile, "n": [1, -2] });
        let out = text(&doc);
        assert!(
            out.trim_end().chars().all(|c| c == '\\' || harmless(c)),
            "{out:?}"
        );
        assert!(out.contains("\\u007f\\u009b2J\\u202e"), "{out}");
        assert!(out.contains("é\u{1f600}"), "{out}");
        let back: serde_json::Value = serde_json::from_str(&out).unwrap();
        assert_eq!(back, doc);
        assert_eq!(
            out,
            format!(
                "{}\n",
                serde_json::to_string(&back)
                    .unwrap()
                    .replace('\u{7f}', "\\u007f")
                    .replace('\u{9b}', "\\u009b")
                    .replace('\u{202e}', "\\u202e")
            )
        );
    }
}
