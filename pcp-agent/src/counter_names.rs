//! The number of every family name the agent has met, kept for good:
//! saved (as text, see [`CounterNames::to_text`]) and read back when the
//! agent starts, so that a family's metrics keep their PMIDs across
//! restarts of the agent and of pmcd, and archives that span one stay
//! continuous ([`crate::family_metrics`] makes the PMIDs and instance
//! domains of a number). A histogram's count and sum are numbered apart,
//! as `NAME/count` and `NAME/sum`.
//!
//! Each number also has a flat PCP name component (the name with `.` as
//! `_`, [`component`]; `_2`, `_3`, … for names of the same flat form): the
//! 1.0 agent named its metrics `perfabi.counter.<component>`. The saved
//! file keeps the column, so that files of that agent are read (and their
//! numbers kept: `perfabi.NAME` has the PMID `perfabi.total.<component>`
//! had); the names served no longer use it.

use std::collections::{HashMap, HashSet};
use std::fmt;

/// Counters one agent can number: clusters 16..2048 of 1024 items.
pub const MAX_COUNTERS: u32 = (2048 - 16) * 1024;

/// First line of the saved text (format version 1).
const HEADER: &str = "pmdaperfabi counter numbers 1";

/// Longest perfabi name accepted from a saved file (the ABI's is 63 bytes).
const MAX_NAME: usize = 255;

/// The largest saved text a full table can make: a number, a PCP name and
/// a perfabi name per line. Longer input is refused unread.
pub const MAX_TEXT: u64 = HEADER.len() as u64
    + 1
    + MAX_COUNTERS as u64 * (7 + 1 + (MAX_NAME as u64 + 8) + 1 + MAX_NAME as u64 + 1);

/// A perfabi counter name as one PCP name component: letters, digits and
/// `_`, starting with a letter (`exportd.refreshes` → `exportd_refreshes`).
pub fn component(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !s.starts_with(|c: char| c.is_ascii_alphabetic()) {
        s.insert(0, 'c');
    }
    s
}

/// Why saved text was refused.
#[derive(Debug, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based line.
    pub line: usize,
    /// What is wrong with it.
    pub what: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.what)
    }
}

/// Every counter name met, its number and its PCP name component.
#[derive(Default, Debug)]
pub struct CounterNames {
    by_name: HashMap<String, (u32, String)>,
    /// PCP components given out.
    taken: HashSet<String>,
    /// For each flat form, the next suffix to try: collisions are resolved
    /// in constant time on average, however many names share a flat form.
    next_suffix: HashMap<String, u32>,
    /// The next number to give out.
    next: u32,
    /// Whether a name was numbered since [`take_changed`](Self::take_changed).
    changed: bool,
    /// Suffixed candidates looked up so far (a measure of the work done).
    probes: u64,
}

impl CounterNames {
    /// The number and PCP name component of `name`, assigned on first sight;
    /// `None` once [`MAX_COUNTERS`] numbers were given out.
    pub fn get(&mut self, name: &str) -> Option<(u32, &str)> {
        if !self.by_name.contains_key(name) {
            if self.next >= MAX_COUNTERS {
                return None;
            }
            let pcp = self.free_component(name);
            self.by_name.insert(name.to_string(), (self.next, pcp));
            self.next += 1;
            self.changed = true;
        }
        self.by_name.get(name).map(|(n, p)| (*n, p.as_str()))
    }

    /// A PCP component for `name` that no other name has, marked taken.
    fn free_component(&mut self, name: &str) -> String {
        let base = component(name);
        if self.taken.insert(base.clone()) {
            return base;
        }
        let k = self.next_suffix.entry(base.clone()).or_insert(2);
        loop {
            let candidate = format!("{base}_{k}");
            *k += 1;
            self.probes += 1;
            // Each taken "base_k" is passed over once for its base: the
            // suffix only grows.
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
        }
    }

    /// Names numbered so far.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// Whether no name was numbered.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// Whether names were numbered since the last call (they need saving).
    pub fn take_changed(&mut self) -> bool {
        std::mem::take(&mut self.changed)
    }

    /// The text [`from_text`](Self::from_text) reads back: a header line,
    /// then `NUMBER PCP-NAME PERFABI-NAME` per line, by number. Names that
    /// could not be read back (with white space or control characters,
    /// which no valid perfabi name has) are not written.
    pub fn to_text(&self) -> String {
        let mut rows: Vec<(u32, &str, &str)> = self
            .by_name
            .iter()
            .filter(|(name, _)| savable(name))
            .map(|(name, (n, pcp))| (*n, pcp.as_str(), name.as_str()))
            .collect();
        rows.sort_unstable();
        let mut out = String::with_capacity(rows.len() * 48 + HEADER.len() + 1);
        out += HEADER;
        out.push('\n');
        for (n, pcp, name) in rows {
            out += &format!("{n} {pcp} {name}\n");
        }
        out
    }

    /// The names saved by [`to_text`](Self::to_text). Any line that is not
    /// what it writes (an unknown header, a bad or repeated number, PCP
    /// name or perfabi name) refuses the whole text.
    pub fn from_text(text: &str) -> Result<CounterNames, ParseError> {
        let mut lines = text.split('\n').enumerate();
        let err = |line: usize, what: String| ParseError {
            line: line + 1,
            what,
        };
        match lines.next() {
            Some((_, HEADER)) => {}
            Some((i, l)) => {
                return Err(err(i, format!("expected {HEADER:?}, found {:?}", clip(l))))
            }
            None => return Err(err(0, "empty".into())),
        }
        let mut names = CounterNames::default();
        let mut numbers = HashSet::new();
        for (i, line) in lines {
            if line.is_empty() {
                continue;
            }
            let mut f = line.split(' ');
            let (Some(n), Some(pcp), Some(name), None) = (f.next(), f.next(), f.next(), f.next())
            else {
                return Err(err(
                    i,
                    format!(
                        "expected NUMBER PCP-NAME PERFABI-NAME, found {:?}",
                        clip(line)
                    ),
                ));
            };
            let n: u32 = Some(n)
                .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|n| n.parse().ok())
                .filter(|n| *n < MAX_COUNTERS)
                .ok_or_else(|| {
                    err(
                        i,
                        format!("{:?} is not a number below {MAX_COUNTERS}", clip(n)),
                    )
                })?;
            if !valid_component(pcp) {
                return Err(err(
                    i,
                    format!("{:?} is not a PCP name component", clip(pcp)),
                ));
            }
            if !savable(name) || name.len() > MAX_NAME {
                return Err(err(i, format!("{:?} is not a counter name", clip(name))));
            }
            if !numbers.insert(n) {
                return Err(err(i, format!("number {n} is given twice")));
            }
            if !names.taken.insert(pcp.to_string()) {
                return Err(err(i, format!("PCP name {pcp} is given twice")));
            }
            if names
                .by_name
                .insert(name.to_string(), (n, pcp.to_string()))
                .is_some()
            {
                return Err(err(i, format!("counter {name} is given twice")));
            }
            names.next = names.next.max(n + 1);
        }
        Ok(names)
    }
}

/// A name `to_text` can write on one line and read back.
fn savable(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic())
}

fn valid_component(c: &str) -> bool {
    c.len() <= MAX_NAME + 8 && crate::namespace::valid_component(c)
}

/// At most 80 characters of `s`, for a message.
fn clip(s: &str) -> String {
    s.chars().take(80).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_valid_components_unique_and_stable() {
        let mut n = CounterNames::default();
        assert_eq!(n.get("exportd.refreshes"), Some((0, "exportd_refreshes")));
        assert_eq!(n.get("exportd_refreshes"), Some((1, "exportd_refreshes_2")));
        assert_eq!(n.get("9lives"), Some((2, "c9lives")));
        // Seen again (after a writer restart): the same number and name.
        assert_eq!(n.get("exportd.refreshes"), Some((0, "exportd_refreshes")));
        assert!(n.take_changed());
        assert!(!n.take_changed());
        assert_eq!(n.get("exportd.refreshes"), Some((0, "exportd_refreshes")));
        assert!(!n.take_changed(), "nothing new");
    }

    #[test]
    fn a_suffix_taken_by_a_real_name_is_passed_over() {
        let mut n = CounterNames::default();
        assert_eq!(n.get("x"), Some((0, "x")));
        assert_eq!(n.get("x_2"), Some((1, "x_2")));
        assert_eq!(n.get("x.2"), Some((2, "x_2_2")));
        assert_eq!(n.get("x."), Some((3, "x_")));
        assert_eq!(n.get("x-"), Some((4, "x__2")));
        assert_eq!(n.get("x+"), Some((5, "x__3")));
    }

    #[test]
    fn many_names_with_one_flat_form_are_numbered_in_linear_time() {
        // 20,000 distinct names that all flatten to "a________b": the old
        // search tried every suffix from _2 for each, 200 million probes.
        let mut n = CounterNames::default();
        let t = std::time::Instant::now();
        for i in 0..20_000u32 {
            let mid: String = (0..8)
                .map(|d| ['.', '_', '-', '+'][(i >> (2 * d)) as usize & 3])
                .collect();
            n.get(&format!("a{mid}b")).unwrap();
        }
        let mut pcp: Vec<&str> = n.by_name.values().map(|(_, p)| p.as_str()).collect();
        pcp.sort_unstable();
        pcp.dedup();
        assert_eq!(pcp.len(), 20_000, "PCP names are unique");
        assert!(
            n.probes < 2 * 20_000,
            "{} probes for 20,000 names",
            n.probes
        );
        println!("20,000 colliding names numbered in {:?}", t.elapsed());
    }

    #[test]
    fn saved_text_reads_back_to_the_same_numbers_and_names() {
        let mut n = CounterNames::default();
        for name in ["b.x", "a", "b_x", "zeta.1"] {
            n.get(name).unwrap();
        }
        let text = n.to_text();
        assert!(
            text.starts_with("pmdaperfabi counter numbers 1\n0 b_x b.x\n1 a a\n2 b_x_2 b_x\n"),
            "{text}"
        );
        let mut back = CounterNames::from_text(&text).unwrap();
        for name in ["b.x", "a", "b_x", "zeta.1"] {
            assert_eq!(back.get(name), n.get(name), "{name}");
        }
        assert!(!back.take_changed());
        // A new name after a restart takes the next number and a free name.
        assert_eq!(back.get("b-x"), Some((4, "b_x_3")));
        assert!(back.take_changed());
    }

    #[test]
    fn bad_saved_text_is_refused_with_its_line() {
        let h = "pmdaperfabi counter numbers 1\n";
        for (text, line, what) in [
            ("", 1, "expected"),
            ("something else\n", 1, "expected"),
            (&*format!("{h}0 a a\nx a b\n"), 3, "not a number"),
            (&*format!("{h}-1 a a\n"), 2, "not a number"),
            (&*format!("{h}+1 a a\n"), 2, "not a number"),
            (&*format!("{h}{MAX_COUNTERS} a a\n"), 2, "not a number"),
            (&*format!("{h}0 9a a\n"), 2, "not a PCP name"),
            (&*format!("{h}0 a\n"), 2, "expected NUMBER"),
            (&*format!("{h}0 a a extra\n"), 2, "expected NUMBER"),
            (&*format!("{h}0 a a\n0 b b\n"), 3, "number 0 is given twice"),
            (
                &*format!("{h}0 a a\n1 a b\n"),
                3,
                "PCP name a is given twice",
            ),
            (
                &*format!("{h}0 a a\n1 b a\n"),
                3,
                "counter a is given twice",
            ),
            (&*format!("{h}0 a a\u{7}\n"), 2, "not a counter name"),
        ] {
            let e = CounterNames::from_text(text).unwrap_err();
            assert_eq!(e.line, line, "{text:?}: {e}");
            assert!(e.to_string().contains(what), "{text:?}: {e}");
        }
    }
}
