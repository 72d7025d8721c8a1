//! The hot path: a counter or a family looked up once, then read again and
//! again without allocating or calling the system (the reader's
//! `Segment::read` and `Segment::read_family`).

use std::ffi::c_char;

use perfabi::family::Origin;
use perfabi_reader::{Error, Family, FamilyHandle, FamilyValues, Handle, Kind, Segment};

use crate::error::{guard, guard_value, perfabi_error, Failure};
use crate::family::{
    self, perfabi_family_info, perfabi_histogram, perfabi_metric_kind, perfabi_value_type,
    HistogramOut,
};
use crate::ptr;
use crate::segment::{self, perfabi_segment};

/// One counter looked up once (perfabi_counter_lookup()) and read many
/// times (perfabi_read()): a 1.0 counter, or one member of a family that is
/// not a histogram.
///
/// Thread safety: used with its segment, by the thread using the segment.
pub struct perfabi_counter {
    seg: u64,
    kind: perfabi_metric_kind,
    value_type: perfabi_value_type,
    how: Counter,
}

enum Counter {
    /// A 1.0 counter: the reader's `Handle`, one slot read on every CPU.
    Entry(Handle),
    /// A family's member (boxed: the larger variant).
    Member(Box<Member>),
}

/// A family's member: its family read, then the member's values taken
/// from it.
struct Member {
    handle: FamilyHandle,
    values: FamilyValues,
    instance: String,
    /// The member's index in `handle`'s family, looked up again by its
    /// instance string when the family's members changed.
    at: usize,
    /// The generation `at` was looked up at.
    generation: Option<u64>,
}

/// perfabi_counter_lookup() - look a counter up, for perfabi_read().
/// @seg: the segment.
/// @family: the name of a 1.0 counter (`net.rx_bytes`) or of a family
///          (`disk.dev.read_bytes`) that is not a histogram.
/// @instance: the family's member (`sda`); NULL or "" for a 1.0 counter
///            or a family without dimension.
/// @out: receives the handle (NULL on failure); free it with
///       perfabi_counter_free().
///
/// Context: the thread using the segment. Allocates; decodes the
/// segment's tables if they changed.
/// Return: `PERFABI_OK`; `PERFABI_E_NO_SUCH_FAMILY`,
/// `PERFABI_E_NO_SUCH_COUNTER` (no such instance), `PERFABI_E_WRONG_TYPE`
/// (a histogram: use perfabi_family_handle_lookup()).
///
/// # Safety
/// `seg` is NULL or an open segment used by this thread only; `family`
/// and `instance` are NULL or NUL-terminated strings; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_counter_lookup(
    seg: *mut perfabi_segment,
    family: *const c_char,
    instance: *const c_char,
    out: *mut *mut perfabi_counter,
) -> perfabi_error {
    const F: &str = "perfabi_counter_lookup";
    guard(F, || {
        let make = || -> Result<perfabi_counter, Failure> {
            // SAFETY: the caller promises an open segment and C strings.
            let (s, name, instance) = unsafe {
                (
                    segment::segment(F, seg)?,
                    ptr::text(F, "family", family)?,
                    ptr::text_opt(F, "instance", instance)?.unwrap_or(""),
                )
            };
            let f = s.seg.family(name)?;
            if f.kind == Kind::Histogram {
                return Err(Failure::wrong_type(
                    F,
                    format_args!(
                        "{name} is a histogram: read it with perfabi_family_handle_lookup()"
                    ),
                ));
            }
            let how = match f.origin {
                Origin::Entry(_) if instance.is_empty() => Counter::Entry(s.seg.handle(name)?),
                _ => {
                    let handle = s.seg.family_handle(name)?;
                    Counter::Member(Box::new(Member {
                        at: family::member_index(handle.family(), instance)?,
                        generation: handle.generation(),
                        handle,
                        values: FamilyValues::default(),
                        instance: instance.to_string(),
                    }))
                }
            };
            Ok(perfabi_counter {
                seg: s.id,
                kind: family::kind(f.kind),
                value_type: family::value_type(f.value_type),
                how,
            })
        };
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::create(F, out, make) }
    })
}

/// perfabi_counter_free() - free a counter handle.
/// @h: a handle, or NULL (nothing happens).
///
/// Context: the thread using its segment.
///
/// # Safety
/// `h` is NULL or a handle of perfabi_counter_lookup(), not freed before.
#[no_mangle]
pub unsafe extern "C" fn perfabi_counter_free(h: *mut perfabi_counter) {
    // SAFETY: the caller gives back a handle once.
    unsafe { ptr::release("perfabi_counter_free", h) }
}

/// perfabi_counter_kind() - the kind of a handle's counter: the sum of its
/// per-CPU values is its total, but for a peak, whose total is their
/// maximum.
/// @h: the handle.
///
/// Context: the thread using the handle's segment (perfabi_read() changes
/// the handle).
/// Return: the kind; `PERFABI_METRIC_COUNTER` if `h` is NULL.
///
/// # Safety
/// `h` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_counter_kind(h: *const perfabi_counter) -> perfabi_metric_kind {
    const F: &str = "perfabi_counter_kind";
    guard_value(F, perfabi_metric_kind::PERFABI_METRIC_COUNTER, || {
        // SAFETY: the caller promises a live handle.
        Ok(unsafe { ptr::obj(F, "h", h) }?.kind)
    })
}

/// perfabi_counter_value_type() - whether perfabi_read()'s values are
/// unsigned, or signed (`PERFABI_VALUE_I64`: cast each to `int64_t`).
/// @h: the handle.
///
/// Context: the thread using the handle's segment (perfabi_read() changes
/// the handle).
/// Return: the value type; `PERFABI_VALUE_U64` if `h` is NULL.
///
/// # Safety
/// `h` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_counter_value_type(
    h: *const perfabi_counter,
) -> perfabi_value_type {
    const F: &str = "perfabi_counter_value_type";
    guard_value(F, perfabi_value_type::PERFABI_VALUE_U64, || {
        // SAFETY: the caller promises a live handle.
        Ok(unsafe { ptr::obj(F, "h", h) }?.value_type)
    })
}

/// perfabi_read() - the hot path: read a counter's value on every CPU,
/// consistently (never a torn value), with no system call and no
/// allocation. A 1.0 counter costs what the Rust reader's
/// `Segment::read` costs; a family's member costs a read of its family
/// (perfabi_family_read()).
/// @seg: the segment the handle was looked up on.
/// @h: the handle.
/// @per_cpu_out: receives one value per CPU (perfabi_nr_cpus() of them;
///               `int64_t`s in disguise if the handle's value type is
///               `PERFABI_VALUE_I64`).
/// @n: the values `per_cpu_out` holds.
/// @generation_out: receives the metadata generation read at; may be NULL.
///
/// Does not look at the path or the writer: call perfabi_refresh() from
/// time to time to follow a writer that restarted.
///
/// Context: the thread using the segment.
/// Return: `PERFABI_OK`; `PERFABI_E_UNKNOWN_INSTANCE` if the counter was
/// deleted or the segment created again (look it up again);
/// `PERFABI_E_BUSY`, `PERFABI_E_TRUNCATED_WHILE_MAPPED`,
/// `PERFABI_E_HEADER_CHANGED` (read again); `PERFABI_E_BUFFER_TOO_SMALL`;
/// `PERFABI_E_INVALID_ARGUMENT` for a NULL pointer or a handle of another
/// segment.
///
/// # Safety
/// `seg` is NULL or an open segment used by this thread only; `h` is NULL
/// or a live handle; `per_cpu_out` is NULL or `n` writable values;
/// `generation_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_read(
    seg: *mut perfabi_segment,
    h: *mut perfabi_counter,
    per_cpu_out: *mut u64,
    n: usize,
    generation_out: *mut u64,
) -> perfabi_error {
    const F: &str = "perfabi_read";
    guard(F, || {
        // SAFETY: the caller promises an open segment and a live handle,
        // both used by this thread only.
        let (s, h) = unsafe { (segment::segment(F, seg)?, ptr::obj_mut(F, "h", h)?) };
        if h.seg != s.id {
            return Err(Failure::invalid(
                F,
                "the handle was looked up on another segment",
            ));
        }
        let cpus = s.seg.nr_cpus();
        // SAFETY: the caller promises `n` writable values.
        let out = unsafe { ptr::values(F, "per_cpu_out", per_cpu_out, n, cpus) }?;
        let g = read_counter(&mut s.seg, &mut h.how, out)?;
        // SAFETY: `generation_out` is NULL or writable (the caller's promise).
        unsafe { ptr::put_opt(generation_out, g) };
        Ok(())
    })
}

/// Reads `how` into `out` (one value per CPU); the generation.
#[inline]
fn read_counter(seg: &mut Segment, how: &mut Counter, out: &mut [u64]) -> Result<u64, Failure> {
    match how {
        Counter::Entry(h) => Ok(seg.read(h, out)?),
        Counter::Member(m) => {
            let g = seg.read_family(&mut m.handle, &mut m.values)?;
            if m.generation != m.handle.generation() {
                // The family's members changed: find ours again.
                m.at = family::member_index(m.handle.family(), &m.instance)
                    .map_err(|_| Failure::from(Error::Abi(perfabi::Error::UnknownInstance)))?;
                m.generation = m.handle.generation();
            }
            for (cpu, v) in out.iter_mut().enumerate() {
                *v = m.values.words(m.at, cpu)[0];
            }
            Ok(g)
        }
    }
}

/// One family looked up once (perfabi_family_handle_lookup()) and read
/// many times (perfabi_family_read()): every member's values on every CPU
/// inside one generation. It follows members that come and go.
///
/// Thread safety: used with its segment, by the thread using the segment.
pub struct perfabi_family_handle {
    seg: u64,
    handle: FamilyHandle,
    values: FamilyValues,
    /// Whether `values` are those of a successful read: false before the
    /// first read and after a failed one, when the accessors refuse
    /// (`PERFABI_E_NOT_READ`) rather than give values of no family.
    valid: bool,
    /// The family as of the last successful read, for C; rebuilt when its
    /// generation moved.
    info: perfabi_family_info,
    generation: Option<u64>,
}

impl perfabi_family_handle {
    /// The values of the last read and their family, for accessor `func`;
    /// `PERFABI_E_NOT_READ` if that read failed or none was made.
    fn last_read(&self, func: &str) -> Result<(&FamilyValues, &Family), Failure> {
        if !self.valid {
            return Err(Failure::not_read(func));
        }
        Ok((&self.values, self.handle.family()))
    }
}

/// perfabi_family_handle_lookup() - look a family up, for
/// perfabi_family_read().
/// @seg: the segment.
/// @name: the family's name (or a 1.0 counter's).
/// @out: receives the handle (NULL on failure); free it with
///       perfabi_family_handle_free().
///
/// Context: the thread using the segment. Allocates.
/// Return: `PERFABI_OK`; `PERFABI_E_NO_SUCH_FAMILY`...
///
/// # Safety
/// `seg` is NULL or an open segment used by this thread only; `name` is
/// NULL or a NUL-terminated string; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_handle_lookup(
    seg: *mut perfabi_segment,
    name: *const c_char,
    out: *mut *mut perfabi_family_handle,
) -> perfabi_error {
    const F: &str = "perfabi_family_handle_lookup";
    guard(F, || {
        let make = || -> Result<perfabi_family_handle, Failure> {
            // SAFETY: the caller promises an open segment and a C string.
            let (s, name) = unsafe { (segment::segment(F, seg)?, ptr::text(F, "name", name)?) };
            let handle = s.seg.family_handle(name)?;
            Ok(perfabi_family_handle {
                seg: s.id,
                info: perfabi_family_info::new(handle.family()),
                generation: handle.generation(),
                handle,
                values: FamilyValues::default(),
                valid: false,
            })
        };
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::create(F, out, make) }
    })
}

/// perfabi_family_handle_free() - free a family handle.
/// @h: a handle, or NULL (nothing happens).
///
/// Context: the thread using its segment.
///
/// # Safety
/// `h` is NULL or a handle of perfabi_family_handle_lookup(), not freed
/// before.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_handle_free(h: *mut perfabi_family_handle) {
    // SAFETY: the caller gives back a handle once.
    unsafe { ptr::release("perfabi_family_handle_free", h) }
}

/// perfabi_family_read() - the hot path for a family: read every member's
/// values on every CPU inside one metadata generation, into the handle
/// (read them with perfabi_family_handle_u64() and the like). No system
/// call; no allocation once the handle has held as many members. When the
/// family's members changed, the handle follows them: its
/// perfabi_family_handle_info() is then a new family (the old one's
/// strings are freed). When the read fails, the handle holds no values
/// until its next successful read: perfabi_family_handle_u64() and the
/// like fail with `PERFABI_E_NOT_READ` (its info stays that of the last
/// successful read). A NULL argument or a handle of another segment
/// leaves it as it was.
/// @seg: the segment the handle was looked up on.
/// @h: the handle.
/// @generation_out: receives the generation read at; may be NULL.
///
/// Like perfabi_read(), it does not look at the path or the writer.
///
/// Context: the thread using the segment.
/// Return: `PERFABI_OK`; `PERFABI_E_UNKNOWN_INSTANCE` if the family was
/// deleted or the segment created again (the handle will not read again:
/// look it up again); `PERFABI_E_BUSY`...
///
/// # Safety
/// `seg` is NULL or an open segment used by this thread only; `h` is NULL
/// or a live handle; `generation_out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_read(
    seg: *mut perfabi_segment,
    h: *mut perfabi_family_handle,
    generation_out: *mut u64,
) -> perfabi_error {
    const F: &str = "perfabi_family_read";
    guard(F, || {
        // SAFETY: the caller promises an open segment and a live handle,
        // both used by this thread only.
        let (s, h) = unsafe { (segment::segment(F, seg)?, ptr::obj_mut(F, "h", h)?) };
        if h.seg != s.id {
            return Err(Failure::invalid(
                F,
                "the handle was looked up on another segment",
            ));
        }
        // Valid again only once this read succeeded: the reader leaves the
        // values of a failed one empty, and the family they were for may
        // be another by then.
        h.valid = false;
        let g = s.seg.read_family(&mut h.handle, &mut h.values)?;
        if h.generation != h.handle.generation() {
            h.info = perfabi_family_info::new(h.handle.family());
            h.generation = h.handle.generation();
        }
        h.valid = true;
        // SAFETY: `generation_out` is NULL or writable.
        unsafe { ptr::put_opt(generation_out, g) };
        Ok(())
    })
}

/// perfabi_family_handle_info() - the handle's family as of its last
/// successful read (or its look-up): name, unit, members... Member `k` of
/// it is member `k` of the values perfabi_family_handle_u64() and the like
/// return.
/// @h: the handle.
///
/// Context: the thread using the handle's segment.
/// Return: the family, valid until the handle's next successful
/// perfabi_family_read() or its free; NULL if `h` is NULL.
///
/// # Safety
/// `h` is NULL or a live handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_handle_info(
    h: *const perfabi_family_handle,
) -> *const perfabi_family_info {
    const F: &str = "perfabi_family_handle_info";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live handle.
        Ok(&unsafe { ptr::obj(F, "h", h) }?.info as *const perfabi_family_info)
    })
}

/// perfabi_family_handle_u64() - an unsigned member's value as the
/// handle's last read found it.
/// @h: the handle, read successfully (else `PERFABI_E_NOT_READ`).
/// @k: the member (of perfabi_family_handle_info()).
/// @cpu: a CPU, or `PERFABI_TOTAL`.
/// @out: receives the value.
///
/// Context: the thread using the handle's segment.
/// Return: as perfabi_snapshot_u64(); `PERFABI_E_NOT_READ` if the handle
/// holds no values (not read yet, or its last read failed).
///
/// # Safety
/// `h` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_handle_u64(
    h: *const perfabi_family_handle,
    k: usize,
    cpu: u32,
    out: *mut u64,
) -> perfabi_error {
    const F: &str = "perfabi_family_handle_u64";
    guard(F, || {
        // SAFETY: the caller promises a live handle.
        let (values, fam) = unsafe { ptr::obj(F, "h", h) }?.last_read(F)?;
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::deliver(F, "out", out, || family::get_u64(F, values, fam, k, cpu)) }
    })
}

/// perfabi_family_handle_i64() - a signed member's value as the handle's
/// last read found it.
/// @h: the handle, read successfully (else `PERFABI_E_NOT_READ`).
/// @k: the member.
/// @cpu: a CPU, or `PERFABI_TOTAL`.
/// @out: receives the value.
///
/// Context: the thread using the handle's segment.
/// Return: as perfabi_snapshot_i64(); `PERFABI_E_NOT_READ` if the handle
/// holds no values (not read yet, or its last read failed).
///
/// # Safety
/// `h` is NULL or a live handle; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_handle_i64(
    h: *const perfabi_family_handle,
    k: usize,
    cpu: u32,
    out: *mut i64,
) -> perfabi_error {
    const F: &str = "perfabi_family_handle_i64";
    guard(F, || {
        // SAFETY: the caller promises a live handle.
        let (values, fam) = unsafe { ptr::obj(F, "h", h) }?.last_read(F)?;
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::deliver(F, "out", out, || family::get_i64(F, values, fam, k, cpu)) }
    })
}

/// perfabi_family_handle_histogram() - a histogram member's values as the
/// handle's last read found them.
/// @h: the handle, read successfully (else `PERFABI_E_NOT_READ`).
/// @k: the member.
/// @cpu: a CPU, or `PERFABI_TOTAL`.
/// @out: receives the count, the sum and the number of buckets.
/// @buckets: receives each bucket's observations.
/// @n: the values `buckets` holds.
///
/// Context: the thread using the handle's segment.
/// Return: as perfabi_snapshot_histogram(); `PERFABI_E_NOT_READ` if the
/// handle holds no values (not read yet, or its last read failed).
///
/// # Safety
/// `h` is NULL or a live handle; `out` is NULL or writable; `buckets` is
/// NULL or `n` writable values.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_handle_histogram(
    h: *const perfabi_family_handle,
    k: usize,
    cpu: u32,
    out: *mut perfabi_histogram,
    buckets: *mut u64,
    n: usize,
) -> perfabi_error {
    const F: &str = "perfabi_family_handle_histogram";
    guard(F, || {
        // SAFETY: the caller promises a live handle.
        let (values, fam) = unsafe { ptr::obj(F, "h", h) }?.last_read(F)?;
        let out = ptr::out(F, "out", out)?;
        // SAFETY: `out` and `buckets` are writable (the caller's promise).
        unsafe { family::get_histogram(F, values, fam, k, cpu, HistogramOut { out, buckets, n }) }
    })
}

// Handles move between threads with their segment.
const _: () = {
    const fn send<T: Send>() {}
    send::<perfabi_counter>();
    send::<perfabi_family_handle>();
};
