//! The handles `metrics` calls on every update: each goes straight to the
//! perfabi writer, with no lookup and no lock.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use metrics::{CounterFn, GaugeFn, HistogramFn};
use perfabi_shm::writer::{Counter, MemberId, Writer};

use crate::dropped::{say, Dropped, Reason};
use crate::units::{scaled_i64, scaled_u64};

/// Counts a refused value once per handle on stderr, always in the
/// recorder's own family.
struct ValueRefusals {
    dropped: Arc<Dropped>,
    said: AtomicBool,
    name: String,
}

impl ValueRefusals {
    fn new(dropped: Arc<Dropped>, name: &str) -> Self {
        Self {
            dropped,
            said: AtomicBool::new(false),
            name: name.escape_debug().to_string(),
        }
    }

    #[cold]
    fn refuse(&self, v: f64, n: u64) {
        if !self.said.swap(true, Ordering::Relaxed) {
            say(
                &format!("a value of {}", self.name),
                &format_args!("{v} has no integer in the stored unit (said once for this metric)"),
                Reason::Value,
            );
        }
        self.dropped.count(Reason::Value, n);
    }
}

/// A counter: `increment` is one perfabi [`Counter::adjust`].
pub(crate) struct CounterHandle {
    counter: Counter<'static>,
    /// The largest value given to `absolute`.
    absolute: AtomicU64,
}

impl CounterHandle {
    pub fn new(counter: Counter<'static>) -> Self {
        Self {
            counter,
            absolute: AtomicU64::new(0),
        }
    }
}

impl CounterFn for CounterHandle {
    #[inline]
    fn increment(&self, value: u64) {
        // Wrapping, as a perfabi counter is: the cast is exact modulo 2^64.
        // The member is never deleted, so the adjust is never refused.
        let _ = self.counter.adjust(value as i64);
    }

    /// Raises the total by as much as `value` exceeds the largest value
    /// given to `absolute` before; a smaller one changes nothing (a
    /// counter never goes backwards).
    fn absolute(&self, value: u64) {
        let before = self.absolute.fetch_max(value, Ordering::Relaxed);
        if value > before {
            let _ = self.counter.adjust((value - before) as i64);
        }
    }
}

/// A gauge: its `f64` value is kept here, and the perfabi member holds it
/// scaled and rounded (see [`crate::units`]). Each update changes the
/// value with a compare-and-swap, then adjusts the member by the change
/// of the rounded value: the adjusts telescope, so once updates stop the
/// member holds exactly the rounded current value, whatever the
/// interleaving of threads.
pub(crate) struct GaugeHandle {
    counter: Counter<'static>,
    /// The `f64` bits of the current value.
    bits: AtomicU64,
    factor: f64,
    refusals: ValueRefusals,
}

impl GaugeHandle {
    pub fn new(counter: Counter<'static>, factor: f64, dropped: Arc<Dropped>, name: &str) -> Self {
        Self {
            counter,
            bits: AtomicU64::new(0f64.to_bits()),
            factor,
            refusals: ValueRefusals::new(dropped, name),
        }
    }

    fn update(&self, arg: f64, f: impl Fn(f64) -> f64) {
        let mut old = self.bits.load(Ordering::Relaxed);
        loop {
            let value = f(f64::from_bits(old));
            let Some(new_int) = scaled_i64(value, self.factor) else {
                return self.refusals.refuse(arg, 1);
            };
            match self.bits.compare_exchange_weak(
                old,
                value.to_bits(),
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => {
                    // Only values that scaled are ever stored.
                    let old_int = scaled_i64(f64::from_bits(old), self.factor).unwrap_or(0);
                    let _ = self.counter.adjust(new_int.wrapping_sub(old_int));
                    return;
                }
                Err(now) => old = now,
            }
        }
    }
}

impl GaugeFn for GaugeHandle {
    fn increment(&self, value: f64) {
        self.update(value, |v| v + value)
    }

    fn decrement(&self, value: f64) {
        self.update(value, |v| v - value)
    }

    fn set(&self, value: f64) {
        self.update(value, |_| value)
    }
}

/// A histogram: `record` is one perfabi observation (count, sum and
/// bucket in one update).
pub(crate) struct HistogramHandle {
    writer: &'static Writer,
    member: MemberId,
    factor: f64,
    refusals: ValueRefusals,
}

impl HistogramHandle {
    pub fn new(
        writer: &'static Writer,
        member: MemberId,
        factor: f64,
        dropped: Arc<Dropped>,
        name: &str,
    ) -> Self {
        Self {
            writer,
            member,
            factor,
            refusals: ValueRefusals::new(dropped, name),
        }
    }
}

impl HistogramFn for HistogramHandle {
    fn record(&self, value: f64) {
        match scaled_u64(value, self.factor) {
            Some(v) => {
                let _ = self.writer.observe(&self.member, v);
            }
            None => self.refusals.refuse(value, 1),
        }
    }
}

/// The handle of a refused series: every update is counted in the
/// recorder's own family under the refusal's reason.
pub(crate) struct Refused {
    pub dropped: Arc<Dropped>,
    pub reason: Reason,
}

impl CounterFn for Refused {
    fn increment(&self, _: u64) {
        self.dropped.count(self.reason, 1)
    }
    fn absolute(&self, _: u64) {
        self.dropped.count(self.reason, 1)
    }
}

impl GaugeFn for Refused {
    fn increment(&self, _: f64) {
        self.dropped.count(self.reason, 1)
    }
    fn decrement(&self, _: f64) {
        self.dropped.count(self.reason, 1)
    }
    fn set(&self, _: f64) {
        self.dropped.count(self.reason, 1)
    }
}

impl HistogramFn for Refused {
    fn record(&self, _: f64) {
        self.dropped.count(self.reason, 1)
    }
    fn record_many(&self, _: f64, count: usize) {
        self.dropped.count(self.reason, count as u64)
    }
}
