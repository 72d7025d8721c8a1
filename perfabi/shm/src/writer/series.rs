//! Label-based series → a family's dimension and a member (`spec/PERFABI.md`
//! §9.2): the one home of the rule the label APIs share (the `metrics`
//! recorder, the Python writer's prometheus_client-shaped classes).
//!
//! * no labels: a family without dimension, its one member;
//! * one label `k=v`: dimension `k`, instance `v`;
//! * two to four labels: dimension [`SERIES_DIMENSION`], instance the
//!   values joined by `,` in the labels' order (`GET,200`), and each label
//!   as a member label (`method=GET`, `status=200`), so that consumers show
//!   every label as its own and the instance is still unique in the family;
//! * five or more: refused ([`perfabi::Error::BadLabels`]: a member has
//!   room for four labels).
//!
//! The order is the caller's: the `metrics` recorder sorts its labels by
//! key first, the Python classes keep their declared label names' order.

use perfabi::layout::MAX_LABELS;

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
/// ([`perfabi::Error::BadLabels`]); the names themselves are checked when
/// the family and member are added.
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
            instance: l
                .iter()
                .map(|(_, v)| v.as_str())
                .collect::<Vec<_>>()
                .join(","),
            labels: l.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect(),
        },
    })
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
}
