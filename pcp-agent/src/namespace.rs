//! The agent's part of the PCP namespace (everything below `perfabi`), as
//! one sorted table built once per change of the metrics: name → PMID by
//! binary search, PMID → name by hash, and a node's children as a range of
//! the table. Pure Rust; `pmda` hands its answers to libpcp_pmda.
//!
//! It replaces libpcp_pmda's `pmdaTree*`, whose insertion compares a new
//! name with every sibling (`strncmp`), so that 65,536 counters under
//! `perfabi.counter` took half a minute to insert one at a time.

use std::collections::HashMap;
use std::fmt;

use crate::ffi::pmID;

/// A node's child.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Child<'a> {
    /// Its name: one component for [`Namespace::children`], the full name
    /// for [`Namespace::leaves`].
    pub name: &'a str,
    /// Whether it is a metric (a leaf), not a node with children.
    pub leaf: bool,
}

/// Why a name was left out of the namespace.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rejected {
    /// Not dot-separated components of letters, digits and `_`, each
    /// starting with a letter.
    BadName(String),
    /// The same name twice (the first one is kept).
    Duplicate(String),
    /// A name below another metric's name (`a.b` is a metric, `a.b.c` is
    /// left out).
    BelowALeaf(String),
}

impl fmt::Display for Rejected {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rejected::BadName(n) => write!(f, "{n:?} is not a valid PCP metric name"),
            Rejected::Duplicate(n) => write!(f, "{n} is named twice"),
            Rejected::BelowALeaf(n) => write!(f, "{n} would be below another metric"),
        }
    }
}

/// The metric names below one root, sorted.
#[derive(Debug, Default)]
pub struct Namespace {
    /// Every metric's full name and PMID, sorted by name.
    leaves: Vec<(Box<str>, pmID)>,
    /// PMID → index in `leaves`.
    by_pmid: HashMap<pmID, usize>,
}

/// One PCP name component: a letter, then letters, digits and `_`.
pub(crate) fn valid_component(c: &str) -> bool {
    let mut b = c.bytes();
    b.next().is_some_and(|c| c.is_ascii_alphabetic())
        && b.all(|c| c.is_ascii_alphanumeric() || c == b'_')
}

impl Namespace {
    /// The namespace of `metrics` (full name, PMID); names that cannot be
    /// in it are left out and returned with the reason.
    pub fn new(metrics: impl IntoIterator<Item = (String, pmID)>) -> (Namespace, Vec<Rejected>) {
        let mut rejected = Vec::new();
        let mut all: Vec<(Box<str>, pmID)> = metrics
            .into_iter()
            .filter_map(|(name, pmid)| {
                if name.split('.').all(valid_component) {
                    Some((name.into_boxed_str(), pmid))
                } else {
                    rejected.push(Rejected::BadName(name));
                    None
                }
            })
            .collect();
        // Stable: of two equal names the first given is kept.
        all.sort_by(|a, b| a.0.cmp(&b.0));
        let mut leaves: Vec<(Box<str>, pmID)> = Vec::with_capacity(all.len());
        for (name, pmid) in all {
            if let Some((prev, _)) = leaves.last() {
                if **prev == *name {
                    rejected.push(Rejected::Duplicate(name.into()));
                    continue;
                }
                // '.' sorts before every character of a component, so the
                // names below a leaf come right after it.
                if name.len() > prev.len()
                    && name.starts_with(&**prev)
                    && name.as_bytes()[prev.len()] == b'.'
                {
                    rejected.push(Rejected::BelowALeaf(name.into()));
                    continue;
                }
            }
            leaves.push((name, pmid));
        }
        let mut by_pmid = HashMap::with_capacity(leaves.len());
        for (i, (_, pmid)) in leaves.iter().enumerate() {
            by_pmid.entry(*pmid).or_insert(i);
        }
        (Namespace { leaves, by_pmid }, rejected)
    }

    /// Number of metrics.
    pub fn len(&self) -> usize {
        self.leaves.len()
    }

    /// Whether it has no metric.
    pub fn is_empty(&self) -> bool {
        self.leaves.is_empty()
    }

    /// The PMID of the metric `name`; `None` for an unknown name or a node
    /// that is not a metric.
    pub fn pmid(&self, name: &str) -> Option<pmID> {
        self.leaves
            .binary_search_by(|(n, _)| (**n).cmp(name))
            .ok()
            .map(|i| self.leaves[i].1)
    }

    /// The name of the metric `pmid`.
    pub fn name(&self, pmid: pmID) -> Option<&str> {
        self.by_pmid.get(&pmid).map(|&i| &*self.leaves[i].0)
    }

    /// The index range of the metrics strictly below `node` (its full
    /// name), and whether `node` is itself a metric.
    fn below(&self, node: &str) -> (std::ops::Range<usize>, bool) {
        let prefix = format!("{node}.");
        let start = self.leaves.partition_point(|(n, _)| **n < *prefix);
        // Everything below `node` starts with "node."; the first name
        // after them is at least "node/" ('/' follows '.').
        let end =
            start + self.leaves[start..].partition_point(|(n, _)| n.starts_with(prefix.as_str()));
        let is_leaf = start > 0 && *self.leaves[start - 1].0 == *node;
        (start..end, is_leaf)
    }

    /// The children of `node` (a full name below the root), one component
    /// each, in name order; empty for a metric; `None` if there is no such
    /// name.
    pub fn children(&self, node: &str) -> Option<Vec<Child<'_>>> {
        let (range, is_leaf) = self.below(node);
        if range.is_empty() {
            return is_leaf.then(Vec::new);
        }
        let skip = node.len() + 1;
        let mut out = Vec::new();
        let mut i = range.start;
        while i < range.end {
            let rest = &self.leaves[i].0[skip..];
            match rest.find('.') {
                None => {
                    out.push(Child {
                        name: rest,
                        leaf: true,
                    });
                    i += 1;
                }
                Some(dot) => {
                    let comp = &rest[..dot];
                    out.push(Child {
                        name: comp,
                        leaf: false,
                    });
                    // Skip the rest of this child's subtree.
                    let sub = &self.leaves[i].0[..skip + dot + 1];
                    i += self.leaves[i..range.end].partition_point(|(n, _)| n.starts_with(sub));
                }
            }
        }
        Some(out)
    }

    /// The full names of every metric at or below `node`, in name order
    /// (`node` alone if it is a metric); `None` if there is no such name.
    pub fn leaves(&self, node: &str) -> Option<Vec<Child<'_>>> {
        let (range, is_leaf) = self.below(node);
        if is_leaf {
            let i = range.start - 1;
            return Some(vec![Child {
                name: &self.leaves[i].0,
                leaf: true,
            }]);
        }
        if range.is_empty() {
            return None;
        }
        Some(
            self.leaves[range]
                .iter()
                .map(|(n, _)| Child {
                    name: n,
                    leaf: true,
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ns(names: &[(&str, pmID)]) -> (Namespace, Vec<Rejected>) {
        Namespace::new(names.iter().map(|(n, p)| (n.to_string(), *p)))
    }

    fn kids(v: Option<Vec<Child<'_>>>) -> Option<Vec<(String, bool)>> {
        v.map(|v| {
            v.into_iter()
                .map(|c| (c.name.to_string(), c.leaf))
                .collect()
        })
    }

    #[test]
    fn names_pmids_and_children_as_pmdatree_gives_them() {
        let (n, bad) = ns(&[
            ("perfabi.total.b", 5),
            ("perfabi.segment.epoch", 2),
            ("perfabi.damon.region.start", 7),
            ("perfabi.damon.nr_regions", 6),
            ("perfabi.total.a", 4),
            ("perfabi.total.a_2", 3),
            ("perfabi.segment.available", 1),
        ]);
        assert!(bad.is_empty());
        assert_eq!(n.len(), 7);
        assert_eq!(n.pmid("perfabi.total.a"), Some(4));
        assert_eq!(n.pmid("perfabi.total"), None, "a node is not a metric");
        assert_eq!(n.pmid("perfabi.total.c"), None);
        assert_eq!(n.pmid("perfabi.total.a.x"), None);
        assert_eq!(n.name(7), Some("perfabi.damon.region.start"));
        assert_eq!(n.name(99), None);
        let s = |v: &[(&str, bool)]| Some(v.iter().map(|(a, b)| (a.to_string(), *b)).collect());
        assert_eq!(
            kids(n.children("perfabi")),
            s(&[("damon", false), ("segment", false), ("total", false)])
        );
        assert_eq!(
            kids(n.children("perfabi.damon")),
            s(&[("nr_regions", true), ("region", false)])
        );
        assert_eq!(
            kids(n.children("perfabi.total")),
            s(&[("a", true), ("a_2", true), ("b", true)])
        );
        assert_eq!(kids(n.children("perfabi.total.a")), s(&[]), "a leaf");
        assert_eq!(kids(n.children("perfabi.tot")), None, "a prefix is no node");
        assert_eq!(kids(n.children("nothing")), None);
        assert_eq!(
            kids(n.leaves("perfabi.damon")),
            s(&[
                ("perfabi.damon.nr_regions", true),
                ("perfabi.damon.region.start", true)
            ])
        );
        assert_eq!(
            kids(n.leaves("perfabi.segment.epoch")),
            s(&[("perfabi.segment.epoch", true)])
        );
        assert_eq!(n.leaves("perfabi").unwrap().len(), 7);
        assert_eq!(kids(n.leaves("perfabi.x")), None);
    }

    #[test]
    fn bad_duplicate_and_nested_names_are_left_out_and_said() {
        let (n, bad) = ns(&[
            ("perfabi.a", 1),
            ("perfabi.a", 2),
            ("perfabi.a.b", 3),
            ("perfabi.9x", 4),
            ("perfabi..y", 5),
            ("perfabi.ok", 6),
            ("perfabi.a-b", 7),
        ]);
        assert_eq!(n.len(), 2);
        assert_eq!(n.pmid("perfabi.a"), Some(1), "the first one stays");
        assert_eq!(n.pmid("perfabi.ok"), Some(6));
        assert_eq!(bad.len(), 5, "{bad:?}");
        assert!(bad.contains(&Rejected::Duplicate("perfabi.a".into())));
        assert!(bad.contains(&Rejected::BelowALeaf("perfabi.a.b".into())));
        assert!(bad.contains(&Rejected::BadName("perfabi.9x".into())));
        assert!(bad.iter().all(|r| !r.to_string().is_empty()));
    }

    #[test]
    fn sixty_five_thousand_siblings_resolve_by_name_and_pmid() {
        // Twice 65,536 counters, as the agent names them (the time is
        // printed; pcp-agent/bench/start-65536 holds the bound).
        let names = (0..65_536u32).flat_map(|i| {
            [
                (format!("perfabi.counter.bench_c{i:05}"), i),
                (format!("perfabi.total.bench_c{i:05}"), 0x10_0000 + i),
            ]
        });
        let t = std::time::Instant::now();
        let (n, bad) = Namespace::new(names);
        assert!(bad.is_empty());
        let built = t.elapsed();
        assert_eq!(
            n.pmid("perfabi.total.bench_c65535"),
            Some(0x10_0000 + 65_535)
        );
        assert_eq!(n.name(17), Some("perfabi.counter.bench_c00017"));
        assert_eq!(n.children("perfabi.counter").unwrap().len(), 65_536);
        assert_eq!(n.children("perfabi").unwrap().len(), 2);
        assert_eq!(n.leaves("perfabi").unwrap().len(), 131_072);
        println!("131,072 names: built in {built:?}");
    }
}
