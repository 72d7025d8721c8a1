//! The recorder's own family, [`DROPPED`]: what the `metrics` API could
//! not be told was refused (it returns no errors), counted by reason.

use perfabi::{FamilySpec, Kind, Unit};
use perfabi_shm::writer::{Counter, Writer};

/// The name of the recorder's own family of refusals.
pub const DROPPED: &str = "perfabi.metrics.dropped";

/// Why an update or a description was dropped: the instance of its member
/// in [`DROPPED`] (dimension `reason`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// The segment's tables are full (families, members or value slots).
    Capacity,
    /// perfabi refuses the name (its naming rule, or a clash with a live
    /// name such as `x` and `x_total`).
    Name,
    /// The name is registered already as another kind, or with other
    /// label keys.
    Kind,
    /// A label perfabi refuses (key or value), or more than four.
    Labels,
    /// The metric's histogram buckets do not fit perfabi's (after the
    /// unit's scale: 1 to 31 strictly increasing non-negative integers).
    Buckets,
    /// A value that has no integer in the stored unit: NaN, infinite, out
    /// of range, a negative observation.
    Value,
    /// A description of a metric that was registered before it (a
    /// family's help and unit are fixed when it is registered).
    Description,
    /// Anything else the writer refused.
    Other,
}

impl Reason {
    /// Every reason, in the order of the members.
    pub const ALL: [Reason; 8] = [
        Reason::Capacity,
        Reason::Name,
        Reason::Kind,
        Reason::Labels,
        Reason::Buckets,
        Reason::Value,
        Reason::Description,
        Reason::Other,
    ];

    /// Its member's instance string.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Capacity => "capacity",
            Reason::Name => "name",
            Reason::Kind => "kind",
            Reason::Labels => "labels",
            Reason::Buckets => "buckets",
            Reason::Value => "value",
            Reason::Description => "description",
            Reason::Other => "other",
        }
    }

    /// The reason of a writer's refusal.
    pub(crate) fn of(e: &perfabi::Error) -> Self {
        use perfabi::Error as E;
        match e {
            E::TableFull | E::NoFamilyRoom => Reason::Capacity,
            E::BadName | E::DuplicateName | E::NameClash { .. } => Reason::Name,
            E::WrongKind => Reason::Kind,
            E::BadLabelKey | E::BadInstance | E::BadLabels | E::DuplicateInstance => Reason::Labels,
            E::BadBuckets => Reason::Buckets,
            _ => Reason::Other,
        }
    }
}

/// The members of [`DROPPED`], one per [`Reason`].
pub(crate) struct Dropped {
    counters: Vec<Counter<'static>>,
}

impl Dropped {
    /// Registers [`DROPPED`] and its members in `w`.
    pub fn register(w: &'static Writer) -> Result<Self, perfabi::Error> {
        let f = w.add_family(&FamilySpec::new(
            DROPPED,
            "Updates and descriptions the metrics recorder refused, by reason (see perfabi-metrics)",
            "reason",
            Kind::Counter,
            Unit::COUNT,
        ))?;
        let counters = Reason::ALL
            .iter()
            .map(|r| {
                let m = w.add_member(f, r.as_str(), &[])?;
                w.counter(m.instance())
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { counters })
    }

    /// Counts `n` dropped for `r`.
    pub fn count(&self, r: Reason, n: u64) {
        let i = Reason::ALL.iter().position(|&x| x == r).unwrap_or(0);
        // The members are never deleted: the adjust cannot be refused.
        let _ = self.counters[i].adjust(n as i64);
    }
}

/// Says once, on stderr, what was refused and where it is counted.
pub(crate) fn say(what: &str, why: &dyn std::fmt::Display, r: Reason) {
    eprintln!(
        "perfabi-metrics: {what} is dropped: {why}; counted in {DROPPED}{{reason=\"{}\"}}",
        r.as_str()
    );
}
