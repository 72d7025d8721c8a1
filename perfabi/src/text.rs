//! Text from outside the program, made safe to print: the one escaping
//! function every log line and terminal output of perfabi goes through.
//!
//! Device names, `/proc` text, file names in a folder anyone may write to,
//! and strings read from a segment are untrusted bytes. Printed as they
//! are, an interface named `ESC ] 0 ; pwn BEL` retitles the terminal that
//! reads the log, and `ESC [ 2 J` clears it; a bidirectional override
//! (U+202E) makes a line read differently from what it holds. [`escape`]
//! shows such bytes as escapes instead (`spec/PERFABI.md` §11.7):
//!
//! * printable ASCII other than `\` as itself; `\` as `\\`;
//! * tab, line feed and carriage return as `\t`, `\n`, `\r` (a log line
//!   stays one line);
//! * every other control character (C0, DEL, C1) and every character
//!   Rust's own `char::escape_debug` does not print as itself (format
//!   characters such as bidirectional overrides and zero-width joiners,
//!   unassigned code points, a combining mark) as `\u{…}`;
//! * other characters of valid UTF-8 (letters, symbols) as themselves;
//! * each byte that is not part of valid UTF-8 as `\xNN`.
//!
//! The result is at most 6 bytes per input byte, and escaping is
//! one-to-one: two different inputs never print the same.

use core::fmt::{self, Display, Formatter, Write};

/// Escapes `bytes` for a log line or a terminal: see the [module](self)
/// docs for the rules. The returned value formats with `{}`; nothing is
/// allocated.
///
/// ```
/// use perfabi::text::escape;
/// assert_eq!(escape(b"eth0").to_string(), "eth0");
/// assert_eq!(escape(b"\x1b]0;pwn\x07").to_string(), "\\u{1b}]0;pwn\\u{7}");
/// assert_eq!(escape("a\u{202e}b".as_bytes()).to_string(), "a\\u{202e}b");
/// assert_eq!(escape(b"caf\xc3\xa9 \xff").to_string(), "caf\u{e9} \\xff");
/// ```
pub fn escape(bytes: &[u8]) -> Escaped<'_> {
    Escaped(bytes)
}

/// Untrusted bytes that print escaped ([`escape`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Escaped<'a>(&'a [u8]);

impl Display for Escaped<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        for chunk in self.0.utf8_chunks() {
            for c in chunk.valid().chars() {
                write_char(f, c)?;
            }
            for b in chunk.invalid() {
                write!(f, "\\x{b:02x}")?;
            }
        }
        Ok(())
    }
}

/// One character of valid UTF-8, escaped as the module docs say.
fn write_char(f: &mut Formatter<'_>, c: char) -> fmt::Result {
    match c {
        '\\' => f.write_str("\\\\"),
        '\t' => f.write_str("\\t"),
        '\n' => f.write_str("\\n"),
        '\r' => f.write_str("\\r"),
        _ if !harmless(c) => write!(f, "\\u{{{:x}}}", u32::from(c)),
        _ => f.write_char(c),
    }
}

/// Whether a terminal shows `c` as itself, the rule of [`escape`] for
/// every character but `\`: printable ASCII (quotes too), and any other
/// character the standard library's tables call printable. Not: controls
/// (C0, DEL, C1), format characters (bidirectional overrides, zero-width
/// characters), unassigned code points, a combining mark. A format with
/// escapes of its own (JSON's `\u`) uses it to escape the same characters
/// its own way.
///
/// ```
/// use perfabi::text::harmless;
/// assert!(harmless('a') && harmless('"') && harmless('é') && harmless('\\'));
/// assert!(!harmless('\u{1b}') && !harmless('\u{7f}') && !harmless('\u{9b}'));
/// assert!(!harmless('\u{202e}') && !harmless('\n'));
/// ```
pub fn harmless(c: char) -> bool {
    match c {
        ' '..='~' => true,
        // `escape_debug` prints a character as itself exactly when the
        // standard library's tables call it printable; anything else
        // (controls, format characters, unassigned, a mark that would
        // combine with the character before it) is shown by number.
        _ => c.escape_debug().next() != Some('\\'),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::{String, ToString};
    use alloc::vec::Vec;

    fn esc(b: &[u8]) -> String {
        escape(b).to_string()
    }

    #[test]
    fn plain_names_are_unchanged() {
        for s in [
            "eth0",
            "sda1",
            "nvme0n1p2",
            "br-1a2b",
            "wlp0s20f3",
            "a b\"c'",
            "~!@#$%^&*()",
        ] {
            assert_eq!(esc(s.as_bytes()), s);
        }
    }

    #[test]
    fn terminal_controls_are_escaped() {
        // The two names of the report: a title change and a screen clear.
        assert_eq!(esc(b"\x1b]0;pwn\x07"), "\\u{1b}]0;pwn\\u{7}");
        assert_eq!(esc(b"\x1b[2J"), "\\u{1b}[2J");
        assert_eq!(esc(b"a\nb\rc\td"), "a\\nb\\rc\\td");
        assert_eq!(esc(b"\x00\x7f"), "\\u{0}\\u{7f}");
        // C1 controls (U+009B is a one-character CSI to some terminals),
        // bidirectional overrides and zero-width characters.
        for c in [
            '\u{9b}', '\u{85}', '\u{202e}', '\u{2066}', '\u{200b}', '\u{feff}',
        ] {
            let s = c.to_string();
            assert_eq!(
                esc(s.as_bytes()),
                alloc::format!("\\u{{{:x}}}", u32::from(c))
            );
        }
    }

    #[test]
    fn letters_stay_and_bad_utf8_is_shown_byte_by_byte() {
        assert_eq!(esc("résumé Δ 日本".as_bytes()), "résumé Δ 日本");
        assert_eq!(esc(b"\xff\xfe"), "\\xff\\xfe");
        // A truncated sequence: each of its bytes.
        assert_eq!(esc(b"a\xe6\x97"), "a\\xe6\\x97");
        assert_eq!(esc(b"\\"), "\\\\");
    }

    #[test]
    fn no_output_holds_a_control_and_different_inputs_differ() {
        // Every one- and two-byte input: the output is printable, one line,
        // and the escaping is one-to-one over them.
        let mut seen = alloc::collections::BTreeMap::new();
        for a in 0..=255u8 {
            for b in [None, Some(0u8), Some(b'x'), Some(0x80), Some(0xbf)] {
                let mut input: Vec<u8> = alloc::vec![a];
                input.extend(b);
                let out = esc(&input);
                let printable = |c: char| {
                    matches!(c, '\\' | '"' | '\'') || c.escape_debug().next() != Some('\\')
                };
                assert!(out.chars().all(printable), "{input:?} -> {out:?}");
                assert!(out.len() <= 6 * input.len());
                if let Some(prev) = seen.insert(out.clone(), input.clone()) {
                    assert_eq!(prev, input, "two inputs print as {out:?}");
                }
            }
        }
    }
}
