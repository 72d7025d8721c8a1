//! Families a C program writes: described by a `perfabi_family_spec`,
//! added with perfabi_writer_add_family(); their members added with
//! perfabi_writer_family_add_member().

use std::ffi::c_char;
use std::sync::Arc;

use perfabi::layout::{MAX_BUCKETS, MAX_LABELS};
use perfabi::{Buckets, FamilySpec, GaugeMode, Kind, Unit, ValueType};
use perfabi_shm::writer::{FamilyId, Writer};

use super::member::{self, perfabi_member};
use super::perfabi_writer;
use crate::error::{guard, perfabi_error, Failure};
use crate::family::perfabi_units;
use crate::ptr;

/// How a gauge family's values merge across the writers of a directory
/// (`spec/PERFABI.md` §15.4).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum perfabi_gauge_mode {
    /// The sum of the live writers' values (the default).
    PERFABI_GAUGE_SUM = 0,
    /// The largest live writer's value.
    PERFABI_GAUGE_MAX = 1,
    /// The smallest live writer's value.
    PERFABI_GAUGE_MIN = 2,
    /// Never merged: one series per live writer, labelled by the writer.
    PERFABI_GAUGE_ALL = 3,
}

/// A histogram's bucket layout in a `perfabi_family_spec`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum perfabi_bucket_layout {
    /// No buckets: every kind but a histogram.
    PERFABI_BUCKETS_NONE = 0,
    /// Bound k is 2^(log2_first + k); `log2_buckets` buckets, `+Inf`
    /// included.
    PERFABI_BUCKETS_LOG2 = 1,
    /// The finite upper bounds `bounds[0..nr_bounds]`, strictly
    /// increasing; one more bucket (`+Inf`) follows them.
    PERFABI_BUCKETS_EXPLICIT = 2,
}

/// What a family is (perfabi_writer_add_family()). Zero is the default of
/// every field but @name and @kind, so a designated initializer names only
/// what it needs:
/// `{ .name = "http.requests", .help = "Requests served",
///    .kind = PERFABI_METRIC_COUNTER }`.
/// The enum fields are plain integers (a value of no enumerator is
/// refused, never undefined behaviour).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfabi_family_spec {
    /// The name (`spec/PERFABI.md` §5: letters, digits, `_` and `.`, at
    /// most 63 bytes).
    pub name: *const c_char,
    /// One line of help (printable ASCII, at most 127 bytes); NULL: "".
    pub help: *const c_char,
    /// The dimension its members vary along, the label key of their
    /// instance strings (`device`, `code`); NULL or "": a family of one
    /// member whose instance is "".
    pub dimension: *const c_char,
    /// A `perfabi_metric_kind`.
    pub kind: u32,
    /// A gauge's `perfabi_gauge_mode` (0, `PERFABI_GAUGE_SUM`, for the
    /// other kinds).
    pub gauge_mode: u32,
    /// A `perfabi_value_type`; 0: `PERFABI_VALUE_U64` (a histogram's and a
    /// peak's must be).
    pub value_type: u32,
    /// The unit; all zero: a plain count.
    pub unit: perfabi_units,
    /// A histogram's `perfabi_bucket_layout` (`PERFABI_BUCKETS_NONE` for
    /// the other kinds).
    pub buckets: u32,
    /// `PERFABI_BUCKETS_LOG2`: the exponent of the first bound.
    pub log2_first: u32,
    /// `PERFABI_BUCKETS_LOG2`: the buckets, `+Inf` included (2 to 32).
    pub log2_buckets: u32,
    /// `PERFABI_BUCKETS_EXPLICIT`: the finite bounds.
    pub bounds: *const u64,
    /// `PERFABI_BUCKETS_EXPLICIT`: how many (1 to 31).
    pub nr_bounds: usize,
}

/// One extra label of a member: `key=value`
/// (perfabi_writer_family_add_member()).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct perfabi_label {
    /// The key (the naming rule of a dimension).
    pub key: *const c_char,
    /// The value (printable ASCII).
    pub value: *const c_char,
}

/// A family of a writer (perfabi_writer_add_family()): its members are
/// added with perfabi_writer_family_add_member().
///
/// Thread safety: any threads at once; freed by one thread, once no other
/// uses it.
pub struct perfabi_writer_family {
    pub(crate) w: Arc<Writer>,
    id: FamilyId,
    name: String,
}

/// The refusal `e` of family `name` by entry point `func` (the message
/// names the family).
#[cold]
fn refused(func: &str, name: &str, e: perfabi::Error) -> Failure {
    Failure::writer(func, &format!("family {name}"), &e)
}

/// The Rust spec of the C spec `s`.
///
/// # Safety
/// `s`'s strings are NULL or NUL-terminated; `bounds` is NULL or points to
/// `nr_bounds` values.
unsafe fn spec(func: &str, s: &perfabi_family_spec) -> Result<FamilySpec, Failure> {
    // SAFETY: the caller promises C strings.
    let (name, help, dimension) = unsafe {
        (
            ptr::text(func, "spec->name", s.name)?,
            ptr::text_opt(func, "spec->help", s.help)?.unwrap_or(""),
            ptr::text_opt(func, "spec->dimension", s.dimension)?.unwrap_or(""),
        )
    };
    let bad = |e| refused(func, name, e);
    let kind = match s.kind {
        1 => Kind::Counter,
        2 => Kind::Gauge,
        3 => Kind::Peak,
        4 => Kind::Histogram,
        k => {
            return Err(Failure::invalid(
                func,
                format_args!("spec->kind {k} is no perfabi_metric_kind"),
            ))
        }
    };
    let gauge_mode = GaugeMode::from_raw(s.gauge_mode).ok_or_else(|| {
        Failure::invalid(
            func,
            format_args!("spec->gauge_mode {} is no perfabi_gauge_mode", s.gauge_mode),
        )
    })?;
    let value_type = match s.value_type {
        0 | 1 => ValueType::U64,
        2 => ValueType::I64,
        v => {
            return Err(Failure::invalid(
                func,
                format_args!("spec->value_type {v} is no perfabi_value_type"),
            ))
        }
    };
    let buckets = match s.buckets {
        0 => None,
        1 => Some(Buckets::Log2 {
            first: s.log2_first,
            n: s.log2_buckets,
        }),
        2 => {
            // Bounded before anything is read: never more than the ABI
            // holds, whatever `nr_bounds` claims.
            if s.nr_bounds == 0 || s.nr_bounds >= MAX_BUCKETS as usize {
                return Err(bad(perfabi::Error::BadBuckets));
            }
            if s.bounds.is_null() {
                return Err(Failure::invalid(func, "spec->bounds is NULL"));
            }
            // SAFETY: non-NULL, and the caller promises `nr_bounds`
            // readable values (any bits are a valid u64).
            let b = unsafe { std::slice::from_raw_parts(s.bounds, s.nr_bounds) };
            Some(Buckets::Explicit(b.to_vec()))
        }
        b => {
            return Err(Failure::invalid(
                func,
                format_args!("spec->buckets {b} is no perfabi_bucket_layout"),
            ))
        }
    };
    let u = s.unit;
    Ok(FamilySpec {
        name: name.to_string(),
        help: help.to_string(),
        dimension: dimension.to_string(),
        kind,
        unit: Unit {
            dim_space: u.dim_space,
            dim_time: u.dim_time,
            dim_count: u.dim_count,
            scale_space: u.scale_space,
            scale_time: u.scale_time,
            scale_count: u.scale_count,
            quantity: u.quantity,
            reserved: u.reserved,
        },
        value_type,
        buckets,
        gauge_mode,
    })
}

/// perfabi_writer_add_family() - add a family to a writer's segment
/// (`spec/PERFABI.md` §5.1): readers see it, with no members, at once.
/// @w: the writer.
/// @spec: what the family is.
/// @out: receives the family (NULL on failure); free it with
///       perfabi_writer_family_free() (the family stays in the segment).
///
/// Context: any thread. Takes the writer's metadata lock; allocates.
/// Return: `PERFABI_OK`; `PERFABI_E_BAD_NAME` (the name, help, dimension,
/// unit or buckets break the rules of §5), `PERFABI_E_WRONG_KIND` (the
/// fields do not fit the kind: buckets on a counter, a histogram without,
/// a signed peak or histogram, a gauge mode of another kind),
/// `PERFABI_E_DUPLICATE` (a live family or counter has the name, or one
/// is a dotted prefix of the other), `PERFABI_E_TABLE_FULL`,
/// `PERFABI_E_INVALID_ARGUMENT` (a NULL pointer, text that is not UTF-8, a
/// value of no enumerator).
///
/// # Safety
/// `w` is NULL or a writer not closed; `spec` is NULL or points to a
/// `perfabi_family_spec` whose strings are NULL or NUL-terminated and
/// whose `bounds` is NULL or holds `nr_bounds` values; `out` is NULL or
/// writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_writer_add_family(
    w: *const perfabi_writer,
    spec: *const perfabi_family_spec,
    out: *mut *mut perfabi_writer_family,
) -> perfabi_error {
    const F: &str = "perfabi_writer_add_family";
    guard(F, || {
        let make = || {
            // SAFETY: the caller promises a live writer and a spec as the
            // header describes it.
            let (w, spec) = unsafe {
                let w = ptr::obj(F, "w", w)?;
                (w, self::spec(F, ptr::obj(F, "spec", spec)?)?)
            };
            let id =
                w.w.add_family(&spec)
                    .map_err(|e| refused(F, &spec.name, e))?;
            Ok(perfabi_writer_family {
                w: Arc::clone(&w.w),
                id,
                name: spec.name,
            })
        };
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::create(F, out, make) }
    })
}

/// perfabi_writer_family_add_member() - add a member (an instance) to a
/// family (`spec/PERFABI.md` §5.3): readers see it at once, its values 0.
/// @f: the family.
/// @instance: its value of the family's dimension (`sda`, `200`); NULL or
///            "" in a family without dimension (and only there).
/// @labels: up to four extra labels (NULL if @nr_labels is 0).
/// @nr_labels: how many.
/// @out: receives the member (NULL on failure), the handle every update
///       goes through; free it with perfabi_member_free() (the member
///       stays in the segment).
///
/// An instance seen before in the family (deleted since) gets its
/// instance number back, so readers see the same series continue.
///
/// Context: any thread. Takes the writer's metadata lock; allocates.
/// Return: `PERFABI_OK`; `PERFABI_E_BAD_NAME` (the instance or a label
/// breaks the rules of §5, more than four labels, an instance in a family
/// without dimension or none in one with), `PERFABI_E_DUPLICATE` (the
/// instance is live), `PERFABI_E_TABLE_FULL`, `PERFABI_E_UNKNOWN_INSTANCE`
/// (the family was deleted), `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `f` is NULL or a live family handle; `instance` is NULL or a
/// NUL-terminated string; `labels` is NULL or holds `nr_labels` labels
/// whose strings are NULL or NUL-terminated; `out` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_writer_family_add_member(
    f: *const perfabi_writer_family,
    instance: *const c_char,
    labels: *const perfabi_label,
    nr_labels: usize,
    out: *mut *mut perfabi_member,
) -> perfabi_error {
    const F: &str = "perfabi_writer_family_add_member";
    guard(F, || {
        let make = || {
            // SAFETY: the caller promises a live family and a C string.
            let (f, instance) = unsafe {
                (
                    ptr::obj(F, "f", f)?,
                    ptr::text_opt(F, "instance", instance)?.unwrap_or(""),
                )
            };
            let what = || {
                format!(
                    "family {} instance \"{}\"",
                    f.name,
                    instance.escape_default()
                )
            };
            // Bounded before anything is read.
            if nr_labels > MAX_LABELS {
                return Err(Failure::writer(F, &what(), &perfabi::Error::BadLabels));
            }
            let pairs: &[perfabi_label] = if nr_labels == 0 {
                &[]
            } else if labels.is_null() {
                return Err(Failure::invalid(F, "labels is NULL"));
            } else {
                // SAFETY: non-NULL; the caller promises `nr_labels` labels
                // (at most MAX_LABELS, checked above).
                unsafe { std::slice::from_raw_parts(labels, nr_labels) }
            };
            let mut kv = Vec::with_capacity(pairs.len());
            for l in pairs {
                // SAFETY: the caller promises C strings.
                kv.push(unsafe {
                    (
                        ptr::text(F, "a label's key", l.key)?,
                        ptr::text(F, "a label's value", l.value)?,
                    )
                });
            }
            let id =
                f.w.add_member(f.id, instance, &kv)
                    .map_err(|e| Failure::writer(F, &what(), &e))?;
            Ok(member::make(&f.w, id))
        };
        // SAFETY: `out` is NULL or writable (the caller's promise).
        unsafe { ptr::create(F, out, make) }
    })
}

/// perfabi_writer_family_delete() - delete a family and every member of
/// it from the segment, in one change readers see at once. Its handles
/// stay allocated (free them): their updates are refused from now on.
/// @f: the family.
///
/// Context: any thread. Takes the writer's metadata lock.
/// Return: `PERFABI_OK`; `PERFABI_E_UNKNOWN_INSTANCE` (deleted before),
/// `PERFABI_E_INVALID_ARGUMENT` (NULL).
///
/// # Safety
/// `f` is NULL or a live family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_writer_family_delete(
    f: *const perfabi_writer_family,
) -> perfabi_error {
    const F: &str = "perfabi_writer_family_delete";
    guard(F, || {
        // SAFETY: the caller promises a live family handle.
        let f = unsafe { ptr::obj(F, "f", f) }?;
        f.w.del_family(f.id)
            .map_err(|e| Failure::writer(F, &format!("family {}", f.name), &e))
    })
}

/// perfabi_writer_family_free() - free a family handle (the family stays
/// in the segment: perfabi_writer_family_delete() deletes it).
/// @f: the handle, or NULL (nothing happens).
///
/// Context: any thread, once no other uses @f.
///
/// # Safety
/// `f` is NULL or a handle of perfabi_writer_add_family(), not freed
/// before and not used after.
#[no_mangle]
pub unsafe extern "C" fn perfabi_writer_family_free(f: *mut perfabi_writer_family) {
    // SAFETY: the caller gives back a handle once.
    unsafe { ptr::release("perfabi_writer_family_free", f) }
}
