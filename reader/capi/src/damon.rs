//! DAMON regions for C: the latest complete aggregation of every
//! (monitor, target), as the reader rebuilds them (`spec/PERFABI.md` §6.4).

use perfabi_reader::{Aggregation, Intervals};

use crate::error::{guard, guard_value, perfabi_error, Failure};
use crate::ptr;
use crate::segment::{self, perfabi_segment};

/// One DAMON region of an aggregation.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct perfabi_region {
    /// First address.
    pub start: u64,
    /// One past the last address.
    pub end: u64,
    /// Samples of the aggregation interval that saw an access.
    pub nr_accesses: u32,
    /// Aggregation intervals the region kept its access pattern.
    pub age: u32,
}

/// One complete aggregation of one (monitor, target) (perfabi_damon_aggregation()).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct perfabi_aggregation {
    /// Monitor id (the kdamond's thread id, or the writer's choice).
    pub monitor_id: u64,
    /// Target id.
    pub target_id: u64,
    /// Aggregation index, 1, 2, 3... per (monitor, target).
    pub aggregation: u64,
    /// Sampling interval, microseconds.
    pub sample_us: u32,
    /// Aggregation interval, microseconds.
    pub aggr_us: u32,
    /// Regions, sorted by address, not overlapping.
    pub nr_regions: usize,
    /// The regions: an array owned by the `perfabi_damon` it came from.
    pub regions: *const perfabi_region,
}

/// What perfabi_damon_read() found: the latest complete aggregation of
/// every (monitor, target), and the CPUs whose rings stayed busy.
///
/// Thread safety: immutable; any threads may read it at once. It does not
/// refer to its segment.
pub struct perfabi_damon {
    aggregations: Vec<(Aggregation, Vec<perfabi_region>)>,
    busy_cpus: Vec<u32>,
}

const _: () = {
    const fn send_sync<T: Send + Sync>() {}
    send_sync::<perfabi_damon>();
};

/// perfabi_damon_read() - read the DAMON regions of every CPU's ring and
/// rebuild the latest complete aggregation of every (monitor, target).
/// @seg: the segment.
/// @out: receives the result (NULL on failure); free it with
///       perfabi_damon_free().
///
/// Context: the thread using the segment. Allocates.
/// Return: `PERFABI_OK` (a CPU whose ring stayed busy is left out and
/// named in perfabi_damon_busy_cpus()); `PERFABI_E_STALE`...
///
/// # Safety
/// `seg` is NULL or an open segment used by this thread only; `out` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_damon_read(
    seg: *mut perfabi_segment,
    out: *mut *mut perfabi_damon,
) -> perfabi_error {
    const F: &str = "perfabi_damon_read";
    guard(F, || {
        let make = || -> Result<perfabi_damon, Failure> {
            // SAFETY: the caller promises an open segment, used by this thread.
            let s = unsafe { segment::segment(F, seg) }?;
            let read = s.seg.damon()?;
            let aggregations = read
                .aggregations
                .into_iter()
                .map(|a| {
                    let regions = a
                        .regions
                        .iter()
                        .map(|r| perfabi_region {
                            start: r.start,
                            end: r.end,
                            nr_accesses: r.nr_accesses,
                            age: r.age,
                        })
                        .collect();
                    (a, regions)
                })
                .collect();
            Ok(perfabi_damon {
                aggregations,
                busy_cpus: read.busy_cpus,
            })
        };
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::create(F, out, make) }
    })
}

/// perfabi_damon_free() - free what perfabi_damon_read() returned.
/// @d: the result, or NULL (nothing happens).
///
/// Context: any thread, once no thread uses it any more.
///
/// # Safety
/// `d` is NULL or a result of perfabi_damon_read(), not freed before.
#[no_mangle]
pub unsafe extern "C" fn perfabi_damon_free(d: *mut perfabi_damon) {
    // SAFETY: the caller gives it back once.
    unsafe { ptr::release("perfabi_damon_free", d) }
}

/// perfabi_damon_nr_aggregations() - the aggregations read, one per
/// (monitor, target), sorted by monitor and target.
/// @d: the result.
///
/// Context: any thread.
/// Return: their number; 0 if `d` is NULL.
///
/// # Safety
/// `d` is NULL or a live result.
#[no_mangle]
pub unsafe extern "C" fn perfabi_damon_nr_aggregations(d: *const perfabi_damon) -> usize {
    const F: &str = "perfabi_damon_nr_aggregations";
    guard_value(F, 0, || {
        // SAFETY: the caller promises a live result.
        Ok(unsafe { ptr::obj(F, "d", d) }?.aggregations.len())
    })
}

/// perfabi_damon_aggregation() - one aggregation and its regions.
/// @d: the result.
/// @k: the aggregation, 0 to perfabi_damon_nr_aggregations() - 1.
/// @out: receives it; `out->regions` lives as long as `d`.
///
/// Context: any thread.
/// Return: `PERFABI_OK`, or `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `d` is NULL or a live result; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_damon_aggregation(
    d: *const perfabi_damon,
    k: usize,
    out: *mut perfabi_aggregation,
) -> perfabi_error {
    const F: &str = "perfabi_damon_aggregation";
    guard(F, || {
        // SAFETY: the caller promises a live result.
        let d = unsafe { ptr::obj(F, "d", d) }?;
        let out = ptr::out(F, "out", out)?;
        let (a, regions) = d.aggregations.get(k).ok_or_else(|| {
            Failure::invalid(
                F,
                format_args!("aggregation {k} of {}", d.aggregations.len()),
            )
        })?;
        let c = perfabi_aggregation {
            monitor_id: a.monitor_id,
            target_id: a.target_id,
            aggregation: a.aggregation,
            sample_us: a.intervals.sample_us,
            aggr_us: a.intervals.aggr_us,
            nr_regions: regions.len(),
            regions: regions.as_ptr(),
        };
        // SAFETY: `out` is writable (the caller's promise).
        unsafe { ptr::put(out, c) };
        Ok(())
    })
}

/// perfabi_damon_busy_cpus() - the CPUs whose ring stayed busy for the
/// whole busy timeout: an aggregation with regions there may be missing,
/// or an older one.
/// @d: the result.
/// @n: receives their number.
///
/// Context: any thread.
/// Return: the CPUs, an array of `*n` that lives as long as `d`; NULL
/// (and `*n` 0) when there are none or for a NULL argument.
///
/// # Safety
/// `d` is NULL or a live result; `n` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_damon_busy_cpus(
    d: *const perfabi_damon,
    n: *mut usize,
) -> *const u32 {
    const F: &str = "perfabi_damon_busy_cpus";
    guard_value(F, std::ptr::null(), || {
        let n = ptr::out(F, "n", n)?;
        // SAFETY: `n` is writable (the caller's promise).
        unsafe { ptr::put(n, 0) };
        // SAFETY: the caller promises a live result.
        let d = unsafe { ptr::obj(F, "d", d) }?;
        if d.busy_cpus.is_empty() {
            return Ok(std::ptr::null());
        }
        // SAFETY: as above.
        unsafe { ptr::put(n, d.busy_cpus.len()) };
        Ok(d.busy_cpus.as_ptr())
    })
}

/// perfabi_damon_frequency() - a region's access frequency, 0 to 1: the
/// share of the aggregation's samples that saw an access
/// (`nr_accesses * sample_us / aggr_us`, exact and clamped,
/// `spec/PERFABI.md` §6.3).
/// @a: the aggregation.
/// @nr_accesses: a region's `nr_accesses`.
///
/// Context: any thread.
/// Return: the frequency; 0 if `a` is NULL or its `aggr_us` is 0.
///
/// # Safety
/// `a` is NULL or points to a `perfabi_aggregation`.
#[no_mangle]
pub unsafe extern "C" fn perfabi_damon_frequency(
    a: *const perfabi_aggregation,
    nr_accesses: u32,
) -> f64 {
    const F: &str = "perfabi_damon_frequency";
    guard_value(F, 0.0, || {
        // SAFETY: the caller promises an aggregation.
        let a = unsafe { ptr::obj(F, "a", a) }?;
        let iv = Intervals {
            sample_us: a.sample_us,
            aggr_us: a.aggr_us,
        };
        Ok(iv.frequency(nr_accesses))
    })
}
