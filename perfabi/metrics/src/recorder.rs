//! [`PerfabiRecorder`]: the `metrics` [`Recorder`] that registers a
//! perfabi family and member for each series, and hands out handles that
//! write to them.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use metrics::{Counter, Gauge, Histogram, Key, KeyName, Metadata, Recorder, SharedString, Unit};
use perfabi::{Buckets, FamilySpec, Kind, ValueType};
use perfabi_shm::writer::{FamilyId, Writer};

use crate::builder::PerMetric;
use crate::dropped::{say, Dropped, Reason};
use crate::handles::{CounterHandle, GaugeHandle, HistogramHandle, Refused};
use crate::series::Series;
use crate::units::{counter_unit, float_unit, scaled_u64};

/// The `metrics` recorder writing into one perfabi segment; made by
/// [`PerfabiBuilder`](crate::PerfabiBuilder).
///
/// Registering a series (what `counter!`, `gauge!` and `histogram!` do
/// before they return a handle) takes the recorder's lock and, the first
/// time, adds a family and a member to the segment; the handle's updates
/// then go straight to perfabi, with no lookup and no lock. Keep the
/// handle of a hot metric (`let c = counter!("x");`, then
/// `c.increment(1)`).
pub struct PerfabiRecorder {
    writer: &'static Writer,
    dropped: Arc<Dropped>,
    per_metric: PerMetric,
    registry: Mutex<Registry>,
}

impl std::fmt::Debug for PerfabiRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PerfabiRecorder")
            .field("path", &self.writer.path())
            .finish_non_exhaustive()
    }
}

/// A registered family.
struct Family {
    id: FamilyId,
    kind: Kind,
    /// The label keys of its series.
    keys: Vec<String>,
    /// The factor from the described unit to the stored one.
    factor: f64,
}

/// A series' handle, of its kind.
#[derive(Clone)]
enum Handle {
    Counter(Counter),
    Gauge(Gauge),
    Histogram(Histogram),
}

/// Refused series kept (and said) at most; later ones are only counted.
const MAX_REFUSED_KEPT: usize = 4096;

#[derive(Default)]
struct Registry {
    /// Refused series kept in `series`.
    refused: usize,
    families: HashMap<String, Family>,
    series: HashMap<(Kind, Series), Handle>,
    /// Descriptions by name: the unit and the help.
    descriptions: HashMap<String, (Option<Unit>, String)>,
}

impl PerfabiRecorder {
    pub(crate) fn new(
        writer: &'static Writer,
        per_metric: PerMetric,
    ) -> Result<Self, perfabi::Error> {
        Ok(Self {
            writer,
            dropped: Arc::new(Dropped::register(writer)?),
            per_metric,
            registry: Mutex::new(Registry::default()),
        })
    }

    /// The writer of the recorder's segment (its path, its health).
    pub fn writer(&self) -> &'static Writer {
        self.writer
    }

    fn registry(&self) -> std::sync::MutexGuard<'_, Registry> {
        self.registry.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn describe(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        let mut r = self.registry();
        let described = (unit, help(&description));
        if r.families.contains_key(key.as_str()) {
            if r.descriptions.get(key.as_str()) == Some(&described) {
                return; // the description the family has already
            }
            say(
                &format!("the description of {}", key.as_str().escape_debug()),
                &"it came after the metric was registered, whose help and unit are fixed then; describe metrics before their first use",
                Reason::Description,
            );
            self.dropped.count(Reason::Description, 1);
            return;
        }
        r.descriptions.insert(key.as_str().to_string(), described);
    }

    /// The handle of `key` as a `kind`, registered now if it is new.
    fn register(&self, key: &Key, kind: Kind) -> Handle {
        let series = Series::of(key);
        let mut r = self.registry();
        let at = (kind, series);
        if let Some(h) = r.series.get(&at) {
            return h.clone();
        }
        let handle = match self.add(&mut r, &at.1, kind) {
            Ok(h) => h,
            Err((reason, why)) => {
                // A refused series is kept, so it is said once, up to a
                // bound: a program making ever new label values after the
                // segment is full must not grow the map without end.
                let keep = r.refused < MAX_REFUSED_KEPT;
                if keep {
                    r.refused += 1;
                    say(
                        &format!("the {} {}", kind_name(kind), describe(key)),
                        &why,
                        reason,
                    );
                    if r.refused == MAX_REFUSED_KEPT {
                        eprintln!(
                            "perfabi-metrics: {MAX_REFUSED_KEPT} series refused; later refusals are counted but not said"
                        );
                    }
                }
                let refused = Arc::new(Refused {
                    dropped: self.dropped.clone(),
                    reason,
                });
                let h = match kind {
                    Kind::Counter => Handle::Counter(Counter::from_arc(refused)),
                    Kind::Gauge => Handle::Gauge(Gauge::from_arc(refused)),
                    _ => Handle::Histogram(Histogram::from_arc(refused)),
                };
                if !keep {
                    return h; // not kept in the map: counted, not said
                }
                h
            }
        };
        r.series.insert(at, handle.clone());
        handle
    }

    /// Adds `series` to the segment (and its family, if new).
    fn add(
        &self,
        r: &mut Registry,
        series: &Series,
        kind: Kind,
    ) -> Result<Handle, (Reason, String)> {
        let Some((dimension, instance, labels)) = series.member() else {
            return Err((
                Reason::Labels,
                format!(
                    "more than {} labels, or a label key twice",
                    crate::series::MAX_LABELS
                ),
            ));
        };
        if !r.families.contains_key(&series.name) {
            let family = self.add_family(r, series, kind, dimension)?;
            r.families.insert(series.name.clone(), family);
        }
        let family = &r.families[&series.name];
        if family.kind != kind {
            return Err((
                Reason::Kind,
                format!("the name is registered as a {}", kind_name(family.kind)),
            ));
        }
        if family.keys != series.keys() {
            return Err((
                Reason::Kind,
                format!(
                    "the name is registered with the label keys {:?}",
                    family.keys
                ),
            ));
        }
        let refused = |e: perfabi::Error| (Reason::of(&e), e.to_string());
        let member = self
            .writer
            .add_member(family.id, &instance, &labels)
            .map_err(refused)?;
        let name = &series.name;
        Ok(match kind {
            Kind::Counter => {
                let c = self.writer.counter(member.instance()).map_err(refused)?;
                Handle::Counter(Counter::from_arc(Arc::new(CounterHandle::new(c))))
            }
            Kind::Gauge => {
                let c = self.writer.counter(member.instance()).map_err(refused)?;
                Handle::Gauge(Gauge::from_arc(Arc::new(GaugeHandle::new(
                    c,
                    family.factor,
                    self.dropped.clone(),
                    name,
                ))))
            }
            _ => Handle::Histogram(Histogram::from_arc(Arc::new(HistogramHandle::new(
                self.writer,
                member,
                family.factor,
                self.dropped.clone(),
                name,
            )))),
        })
    }

    fn add_family(
        &self,
        r: &Registry,
        series: &Series,
        kind: Kind,
        dimension: &str,
    ) -> Result<Family, (Reason, String)> {
        let (unit, help) = r
            .descriptions
            .get(&series.name)
            .cloned()
            .unwrap_or_default();
        let (perfabi_unit, factor) = match kind {
            Kind::Counter => (counter_unit(unit), 1.0),
            _ => float_unit(unit),
        };
        let spec = match kind {
            Kind::Histogram => {
                let buckets = match self.per_metric.buckets.get(&series.name) {
                    Some(bounds) => explicit(bounds, factor).ok_or_else(|| {
                        (
                            Reason::Buckets,
                            format!(
                                "its buckets {bounds:?} times {factor} are not strictly increasing integers"
                            ),
                        )
                    })?,
                    None if perfabi_unit == perfabi::Unit::NS => {
                        // 1.024 µs to 2^40 ns (18 minutes).
                        Buckets::Log2 { first: 10, n: 32 }
                    }
                    None => Buckets::Log2 { first: 0, n: 32 },
                };
                FamilySpec::histogram(&series.name, &help, dimension, perfabi_unit, buckets)
            }
            Kind::Gauge => FamilySpec {
                value_type: ValueType::I64,
                ..FamilySpec::gauge(
                    &series.name,
                    &help,
                    dimension,
                    perfabi_unit,
                    self.per_metric
                        .gauge_modes
                        .get(&series.name)
                        .copied()
                        .unwrap_or_default(),
                )
            },
            _ => FamilySpec::new(&series.name, &help, dimension, kind, perfabi_unit),
        };
        let id = self
            .writer
            .add_family(&spec)
            .map_err(|e| (Reason::of(&e), e.to_string()))?;
        Ok(Family {
            id,
            kind,
            keys: series.keys(),
            factor,
        })
    }
}

/// Explicit buckets: `bounds` scaled, if they stay strictly increasing.
fn explicit(bounds: &[f64], factor: f64) -> Option<Buckets> {
    let b: Vec<u64> = bounds
        .iter()
        .map(|&v| scaled_u64(v, factor))
        .collect::<Option<_>>()?;
    (b.windows(2).all(|w| w[0] < w[1])).then_some(Buckets::Explicit(b))
}

/// A description as perfabi's help (§5.1: one line of at most 127
/// printable ASCII bytes): other characters become `?`, and a longer one
/// is cut.
fn help(description: &str) -> String {
    description
        .chars()
        .map(|c| if (' '..='~').contains(&c) { c } else { '?' })
        .take(127)
        .collect()
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Counter => "counter",
        Kind::Gauge => "gauge",
        _ => "histogram",
    }
}

/// A key as a message shows it (escaped: it is the program's text).
fn describe(key: &Key) -> String {
    let labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={:?}", l.key().escape_debug(), l.value()))
        .collect();
    format!("{}{{{}}}", key.name().escape_debug(), labels.join(","))
}

impl Recorder for PerfabiRecorder {
    fn describe_counter(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description)
    }

    fn describe_gauge(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description)
    }

    fn describe_histogram(&self, key: KeyName, unit: Option<Unit>, description: SharedString) {
        self.describe(key, unit, description)
    }

    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        match self.register(key, Kind::Counter) {
            Handle::Counter(c) => c,
            _ => Counter::noop(),
        }
    }

    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        match self.register(key, Kind::Gauge) {
            Handle::Gauge(g) => g,
            _ => Gauge::noop(),
        }
    }

    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        match self.register(key, Kind::Histogram) {
            Handle::Histogram(h) => h,
            _ => Histogram::noop(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn help_is_one_printable_line() {
        assert_eq!(help("Requests served"), "Requests served");
        assert_eq!(help("a\nb\u{e9}"), "a?b?");
        assert_eq!(help(&"x".repeat(300)).len(), 127);
    }

    #[test]
    fn explicit_buckets_scale_or_refuse() {
        assert_eq!(
            explicit(&[0.001, 0.01], 1e9),
            Some(Buckets::Explicit(vec![1_000_000, 10_000_000]))
        );
        // 0.1 and 0.2 both round to 0: not increasing.
        assert_eq!(explicit(&[0.1, 0.2], 1.0), None);
        assert_eq!(explicit(&[-1.0], 1.0), None);
    }
}
