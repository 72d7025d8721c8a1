//! A `metrics` key (a name and labels) → a perfabi family and member
//! (spec §5.1, §5.3).
//!
//! The key's name is the family's name as it is (perfabi's naming rule
//! decides: a name it refuses is a refusal). The labels, sorted by key,
//! decide the family's dimension and the member by the writer's one rule,
//! [`perfabi_shm::writer::series_member`] (no labels: no dimension; one:
//! its key; two to four: [`SERIES`], the values escaped and joined by `,`
//! in key order so that no two series share an instance, each label a
//! member label; five or more: refused).
//!
//! A family's label keys are fixed by its first series: a later series of
//! the same name with other keys is refused, as a kind clash is.

use metrics::Key;

/// The dimension of a family whose series have two to four labels.
pub const SERIES: &str = perfabi_shm::writer::SERIES_DIMENSION;

/// At most this many labels (a member's four label slots, §5.3).
pub const MAX_LABELS: usize = perfabi::layout::MAX_LABELS;

/// A series' family dimension, member instance and member labels.
pub(crate) type Member<'a> = (&'a str, String, Vec<(&'a str, &'a str)>);

/// One series: a family name and a member of it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct Series {
    /// The family's name.
    pub name: String,
    /// The labels, sorted by key.
    pub labels: Vec<(String, String)>,
}

impl Series {
    /// The series of `key`.
    pub fn of(key: &Key) -> Self {
        let mut labels: Vec<(String, String)> = key
            .labels()
            .map(|l| (l.key().to_string(), l.value().to_string()))
            .collect();
        labels.sort();
        Self {
            name: key.name().to_string(),
            labels,
        }
    }

    /// The label keys, which fix the family's shape.
    pub fn keys(&self) -> Vec<String> {
        self.labels.iter().map(|(k, _)| k.clone()).collect()
    }

    /// The family's dimension, the member's instance and its labels; `None`
    /// if there are more labels than a member holds.
    pub fn member(&self) -> Option<Member<'_>> {
        let m = perfabi_shm::writer::series_member(&self.labels).ok()?;
        Some((m.dimension, m.instance, m.labels))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use metrics::Label;

    #[test]
    fn labels_sorted_then_mapped() {
        let k = Key::from_parts(
            "http.requests",
            vec![Label::new("status", "200"), Label::new("method", "GET")],
        );
        let s = Series::of(&k);
        let (dim, inst, labels) = s.member().unwrap();
        assert_eq!(dim, SERIES);
        assert_eq!(inst, "GET,200");
        assert_eq!(labels, vec![("method", "GET"), ("status", "200")]);
        // The same labels in another order are the same series.
        let k2 = Key::from_parts(
            "http.requests",
            vec![Label::new("method", "GET"), Label::new("status", "200")],
        );
        assert_eq!(Series::of(&k2), s);

        let one = Series::of(&Key::from_parts("q", vec![Label::new("queue", "a")]));
        assert_eq!(one.member().unwrap(), ("queue", "a".to_string(), vec![]));
        let none = Series::of(&Key::from_name("q"));
        assert_eq!(none.member().unwrap(), ("", String::new(), vec![]));
        let five = Series::of(&Key::from_parts(
            "q",
            (0..5)
                .map(|i| Label::new(format!("k{i}"), "v"))
                .collect::<Vec<_>>(),
        ));
        assert_eq!(five.member(), None);
    }
}
