//! Metric families as C sees them: a family's description and members
//! (`perfabi_family_info`), and the values of a member, read from a
//! snapshot or a family handle alike.

use std::ffi::{c_char, CString};
use std::ptr::NonNull;

use perfabi_reader::{Buckets, Family, FamilyValues, Histogram, Kind, Reading, Snapshot};
use perfabi_reader::{Unit, ValueType};

use crate::error::{c_string, guard, guard_value, perfabi_error, Failure};
use crate::ptr;

/// `cpu` of a value accessor that asks for the total over all CPUs (the
/// sum; the maximum for a peak; bucket by bucket for a histogram) rather
/// than one CPU's value.
pub const PERFABI_TOTAL: u32 = u32::MAX;

/// A family's kind (`spec/PERFABI.md` §5.1).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum perfabi_metric_kind {
    /// A monotonic count; the total is the sum over CPUs.
    PERFABI_METRIC_COUNTER = 1,
    /// A level; the total is the sum of the CPUs' contributions.
    PERFABI_METRIC_GAUGE = 2,
    /// A high-water mark per CPU; the total is the maximum over CPUs.
    PERFABI_METRIC_PEAK = 3,
    /// Observations in buckets, with their count and sum.
    PERFABI_METRIC_HISTOGRAM = 4,
}

/// How a family's values are read: unsigned or signed 64-bit (a histogram
/// is `PERFABI_VALUE_U64`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum perfabi_value_type {
    /// Unsigned; read with the `_u64` accessors.
    PERFABI_VALUE_U64 = 1,
    /// Signed; read with the `_i64` accessors.
    PERFABI_VALUE_I64 = 2,
}

/// A family's unit (`spec/PERFABI.md` §5.2): PCP's `pmUnits` in 8 bytes,
/// the bytes of `struct perfabi_unit` in the segment. The unit as text is
/// perfabi_family_unit_text().
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct perfabi_units {
    /// Power of space (bytes), -3..3.
    pub dim_space: i8,
    /// Power of time, -3..3.
    pub dim_time: i8,
    /// Power of count, -3..3.
    pub dim_count: i8,
    /// 0 byte, 1 KiB, 2 MiB, 3 GiB, 4 TiB, 5 PiB, 6 EiB.
    pub scale_space: u8,
    /// 0 ns, 1 us, 2 ms, 3 s, 4 min, 5 h.
    pub scale_time: u8,
    /// A power of ten, -8..7.
    pub scale_count: i8,
    /// 0 plain, 1 pages, 2 ratio.
    pub quantity: u8,
    /// Zero.
    pub reserved: u8,
}

impl From<Unit> for perfabi_units {
    fn from(u: Unit) -> Self {
        Self {
            dim_space: u.dim_space,
            dim_time: u.dim_time,
            dim_count: u.dim_count,
            scale_space: u.scale_space,
            scale_time: u.scale_time,
            scale_count: u.scale_count,
            quantity: u.quantity,
            reserved: u.reserved,
        }
    }
}

/// A histogram's values (the `_histogram` accessors): its bucket counts
/// go to the caller's array.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct perfabi_histogram {
    /// Observations.
    pub count: u64,
    /// Sum of the observations (wrapping).
    pub sum: u64,
    /// Buckets, `+Inf` included: the values the bucket array receives.
    pub nr_buckets: usize,
}

/// One metric family: name, help, kind, unit, dimension, buckets, and its
/// live members (instances) with their labels. A 1.0 counter is a family
/// of one member whose instance is "".
///
/// It belongs to the snapshot or family handle it came from: its strings
/// and members live as long as that snapshot, or until the handle's next
/// successful read (a directory read's family lives as long as the read).
/// Thread safety: a snapshot's (or directory read's) family is immutable, for
/// any threads at once; a family handle's is replaced by the handle's
/// next successful read, so it is read by the thread using the handle's
/// segment.
pub struct perfabi_family_info {
    pub(crate) family: Family,
    name: CString,
    help: CString,
    dimension: CString,
    unit_text: CString,
    members: Vec<MemberText>,
}

/// A member's strings as C strings.
struct MemberText {
    instance: CString,
    labels: Vec<(CString, CString)>,
}

impl perfabi_family_info {
    pub(crate) fn new(f: &Family) -> Self {
        Self {
            family: f.clone(),
            name: c_string(&f.name),
            help: c_string(&f.help),
            dimension: c_string(&f.dimension),
            unit_text: c_string(&f.unit_text),
            members: f
                .members
                .iter()
                .map(|m| MemberText {
                    instance: c_string(&m.instance),
                    labels: m
                        .labels
                        .iter()
                        .map(|(k, v)| (c_string(k), c_string(v)))
                        .collect(),
                })
                .collect(),
        }
    }

    fn member(&self, func: &str, k: usize) -> Result<&MemberText, Failure> {
        self.members.get(k).ok_or_else(|| {
            Failure::invalid(
                func,
                format_args!(
                    "member {k} of family {}, which has {}",
                    self.family.name,
                    self.members.len()
                ),
            )
        })
    }
}

/// The family behind `f`, an argument of `func`.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
unsafe fn fam<'a>(
    func: &str,
    f: *const perfabi_family_info,
) -> Result<&'a perfabi_family_info, Failure> {
    // SAFETY: the caller's promise, forwarded.
    unsafe { ptr::obj(func, "family", f) }
}

/// perfabi_family_name() - the family's name (`disk.dev.read_bytes`).
/// @f: the family.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: a NUL-terminated string that lives as long as the family; NULL
/// if `f` is NULL.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_name(f: *const perfabi_family_info) -> *const c_char {
    const F: &str = "perfabi_family_name";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live family.
        Ok(unsafe { fam(F, f) }?.name.as_ptr())
    })
}

/// perfabi_family_help() - the family's one line of help ("" for a 1.0
/// counter).
/// @f: the family.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: a NUL-terminated string that lives as long as the family; NULL
/// if `f` is NULL.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_help(f: *const perfabi_family_info) -> *const c_char {
    const F: &str = "perfabi_family_help";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live family.
        Ok(unsafe { fam(F, f) }?.help.as_ptr())
    })
}

/// perfabi_family_dimension() - what the family's instances vary along
/// (`device`); "" for a family of one instance.
/// @f: the family.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: a NUL-terminated string that lives as long as the family; NULL
/// if `f` is NULL.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_dimension(f: *const perfabi_family_info) -> *const c_char {
    const F: &str = "perfabi_family_dimension";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live family.
        Ok(unsafe { fam(F, f) }?.dimension.as_ptr())
    })
}

/// perfabi_family_unit_text() - the family's unit as text (`bytes`,
/// `KiB`, `ns`; a 1.0 counter's own unit string; "" for none).
/// @f: the family.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: a NUL-terminated string that lives as long as the family; NULL
/// if `f` is NULL.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_unit_text(f: *const perfabi_family_info) -> *const c_char {
    const F: &str = "perfabi_family_unit_text";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live family.
        Ok(unsafe { fam(F, f) }?.unit_text.as_ptr())
    })
}

/// perfabi_family_unit() - the family's unit as its 8-byte encoding.
/// @f: the family.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: the unit; all zero (no unit) if `f` is NULL.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_unit(f: *const perfabi_family_info) -> perfabi_units {
    const F: &str = "perfabi_family_unit";
    guard_value(F, perfabi_units::default(), || {
        // SAFETY: the caller promises a live family.
        Ok(unsafe { fam(F, f) }?.family.unit.into())
    })
}

/// perfabi_family_kind() - the family's kind.
/// @f: the family.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: its kind; `PERFABI_METRIC_COUNTER` if `f` is NULL.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_kind(f: *const perfabi_family_info) -> perfabi_metric_kind {
    const F: &str = "perfabi_family_kind";
    guard_value(F, perfabi_metric_kind::PERFABI_METRIC_COUNTER, || {
        // SAFETY: the caller promises a live family.
        Ok(kind(unsafe { fam(F, f) }?.family.kind))
    })
}

pub(crate) fn kind(k: Kind) -> perfabi_metric_kind {
    match k {
        Kind::Counter => perfabi_metric_kind::PERFABI_METRIC_COUNTER,
        Kind::Gauge => perfabi_metric_kind::PERFABI_METRIC_GAUGE,
        Kind::Peak => perfabi_metric_kind::PERFABI_METRIC_PEAK,
        Kind::Histogram => perfabi_metric_kind::PERFABI_METRIC_HISTOGRAM,
    }
}

pub(crate) fn value_type(t: ValueType) -> perfabi_value_type {
    match t {
        ValueType::U64 => perfabi_value_type::PERFABI_VALUE_U64,
        ValueType::I64 => perfabi_value_type::PERFABI_VALUE_I64,
    }
}

/// perfabi_family_value_type() - whether the family's values are unsigned
/// or signed.
/// @f: the family.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: its value type; `PERFABI_VALUE_U64` if `f` is NULL.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_value_type(
    f: *const perfabi_family_info,
) -> perfabi_value_type {
    const F: &str = "perfabi_family_value_type";
    guard_value(F, perfabi_value_type::PERFABI_VALUE_U64, || {
        // SAFETY: the caller promises a live family.
        Ok(value_type(unsafe { fam(F, f) }?.family.value_type))
    })
}

/// perfabi_family_nr_buckets() - a histogram's buckets, `+Inf` included.
/// @f: the family.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: the number of buckets; 0 for a family that is not a histogram,
/// or if `f` is NULL.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_nr_buckets(f: *const perfabi_family_info) -> usize {
    const F: &str = "perfabi_family_nr_buckets";
    guard_value(F, 0, || {
        // SAFETY: the caller promises a live family.
        Ok(unsafe { fam(F, f) }?
            .family
            .buckets
            .as_ref()
            .map_or(0, Buckets::count))
    })
}

/// perfabi_family_bucket_bound() - the inclusive upper bound of a
/// histogram's bucket.
/// @f: the family.
/// @k: the bucket, 0 to perfabi_family_nr_buckets() - 1.
/// @bound: receives the bound; `UINT64_MAX` for the last bucket, `+Inf`.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: `PERFABI_OK`; `PERFABI_E_INVALID_ARGUMENT` for a NULL pointer,
/// a family that is not a histogram or a bucket past the last.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle; `bound` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_bucket_bound(
    f: *const perfabi_family_info,
    k: usize,
    bound: *mut u64,
) -> perfabi_error {
    const F: &str = "perfabi_family_bucket_bound";
    guard(F, || {
        // SAFETY: the caller promises a live family.
        let f = unsafe { fam(F, f) }?;
        let out = ptr::out(F, "bound", bound)?;
        let b = f
            .family
            .buckets
            .as_ref()
            .filter(|b| k < b.count())
            .ok_or_else(|| {
                Failure::invalid(
                    F,
                    format_args!("family {} has no bucket {k}", f.family.name),
                )
            })?;
        // SAFETY: `bound` is writable (the caller's promise).
        unsafe { ptr::put(out, b.bound(k).unwrap_or(u64::MAX)) };
        Ok(())
    })
}

/// perfabi_family_reg_id() - the family's registration id: a family
/// deleted and registered again has a new one.
/// @f: the family.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: the id; 0 if `f` is NULL.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_reg_id(f: *const perfabi_family_info) -> u64 {
    const F: &str = "perfabi_family_reg_id";
    guard_value(F, 0, || {
        // SAFETY: the caller promises a live family.
        Ok(unsafe { fam(F, f) }?.family.reg_id)
    })
}

/// perfabi_family_nr_members() - the family's live members (instances).
/// @f: the family.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: their number; 0 if `f` is NULL.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_nr_members(f: *const perfabi_family_info) -> usize {
    const F: &str = "perfabi_family_nr_members";
    guard_value(F, 0, || {
        // SAFETY: the caller promises a live family.
        Ok(unsafe { fam(F, f) }?.members.len())
    })
}

/// perfabi_family_member_instance() - a member's instance string (`sda`;
/// "" for the one member of a family without dimension).
/// @f: the family.
/// @k: the member, 0 to perfabi_family_nr_members() - 1.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: a NUL-terminated string that lives as long as the family; NULL
/// for a NULL family or a member past the last.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_member_instance(
    f: *const perfabi_family_info,
    k: usize,
) -> *const c_char {
    const F: &str = "perfabi_family_member_instance";
    guard_value(F, std::ptr::null(), || {
        // SAFETY: the caller promises a live family.
        Ok(unsafe { fam(F, f) }?.member(F, k)?.instance.as_ptr())
    })
}

/// perfabi_family_member_instance_id() - a member's instance number,
/// stable for its instance string within the family (an instance that
/// returns keeps it).
/// @f: the family.
/// @k: the member.
/// @id: receives the number.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: `PERFABI_OK`, or `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle; `id` is
/// NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_member_instance_id(
    f: *const perfabi_family_info,
    k: usize,
    id: *mut u32,
) -> perfabi_error {
    const F: &str = "perfabi_family_member_instance_id";
    guard(F, || {
        // SAFETY: the caller promises a live family.
        let f = unsafe { fam(F, f) }?;
        let out = ptr::out(F, "id", id)?;
        f.member(F, k)?;
        // SAFETY: `id` is writable (the caller's promise).
        unsafe { ptr::put(out, f.family.members[k].instance_id) };
        Ok(())
    })
}

/// perfabi_family_member_nr_labels() - a member's extra labels (at most
/// 4).
/// @f: the family.
/// @k: the member.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: their number; 0 for a NULL family or a member past the last.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_member_nr_labels(
    f: *const perfabi_family_info,
    k: usize,
) -> usize {
    const F: &str = "perfabi_family_member_nr_labels";
    guard_value(F, 0, || {
        // SAFETY: the caller promises a live family.
        Ok(unsafe { fam(F, f) }?.member(F, k)?.labels.len())
    })
}

/// perfabi_family_member_label() - one of a member's labels.
/// @f: the family.
/// @k: the member.
/// @j: the label, 0 to perfabi_family_member_nr_labels() - 1.
/// @key: receives the key (`model`), a string that lives as the family.
/// @value: receives the value (`virtio`), likewise.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: `PERFABI_OK`, or `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle; `key` and
/// `value` are NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_member_label(
    f: *const perfabi_family_info,
    k: usize,
    j: usize,
    key: *mut *const c_char,
    value: *mut *const c_char,
) -> perfabi_error {
    const F: &str = "perfabi_family_member_label";
    guard(F, || {
        // SAFETY: the caller promises a live family.
        let f = unsafe { fam(F, f) }?;
        let (key, value) = (ptr::out(F, "key", key)?, ptr::out(F, "value", value)?);
        let (k_text, v_text) = f.member(F, k)?.labels.get(j).ok_or_else(|| {
            Failure::invalid(
                F,
                format_args!("label {j} of member {k} of family {}", f.family.name),
            )
        })?;
        // SAFETY: `key` and `value` are writable (the caller's promise).
        unsafe {
            ptr::put(key, k_text.as_ptr());
            ptr::put(value, v_text.as_ptr());
        }
        Ok(())
    })
}

/// perfabi_family_find_member() - the member whose instance string is
/// `instance`.
/// @f: the family.
/// @instance: the instance string (NUL-terminated; "" for the one member
///            of a family without dimension).
/// @k: receives the member's index.
///
/// Context: any thread for a snapshot's or directory read's family; the
/// thread using the segment for a family handle's
/// (perfabi_family_handle_info()).
/// Return: `PERFABI_OK`; `PERFABI_E_NO_SUCH_COUNTER` if no live member has
/// that instance; `PERFABI_E_INVALID_ARGUMENT`.
///
/// # Safety
/// `f` is NULL or a family of a live snapshot or family handle;
/// `instance` is NULL or a NUL-terminated string; `k` is NULL or writable.
#[no_mangle]
pub unsafe extern "C" fn perfabi_family_find_member(
    f: *const perfabi_family_info,
    instance: *const c_char,
    k: *mut usize,
) -> perfabi_error {
    const F: &str = "perfabi_family_find_member";
    guard(F, || {
        // SAFETY: the caller promises a live family and a C string.
        let (f, instance) = unsafe { (fam(F, f)?, ptr::text(F, "instance", instance)?) };
        let out = ptr::out(F, "k", k)?;
        let at = member_index(&f.family, instance)?;
        // SAFETY: `k` is writable (the caller's promise).
        unsafe { ptr::put(out, at) };
        Ok(())
    })
}

/// The index of `family`'s member `instance`, or `no-such-counter`.
pub(crate) fn member_index(family: &Family, instance: &str) -> Result<usize, Failure> {
    family
        .members
        .iter()
        .position(|m| m.instance == instance)
        .ok_or_else(|| {
            perfabi_reader::Error::NoSuchCounter(format!(
                "{}{{{}={instance}}}",
                family.name, family.dimension
            ))
            .into()
        })
}

/// Where member values come from: a snapshot, or a family handle's last
/// read.
pub(crate) trait Values {
    /// CPUs the values cover.
    fn cpus(&self) -> usize;
    /// The words of member `k` of `family` on `cpu`.
    fn words(&self, family: &Family, k: usize, cpu: usize) -> &[u64];
}

impl Values for Snapshot {
    fn cpus(&self) -> usize {
        self.nr_cpus
    }
    fn words(&self, family: &Family, k: usize, cpu: usize) -> &[u64] {
        Snapshot::words(self, cpu, &family.members[k])
    }
}

impl Values for FamilyValues {
    fn cpus(&self) -> usize {
        self.nr_cpus()
    }
    fn words(&self, _: &Family, k: usize, cpu: usize) -> &[u64] {
        FamilyValues::words(self, k, cpu)
    }
}

/// The value of member `k` of `family` on `cpu`, or its total
/// (`PERFABI_TOTAL`).
fn reading(
    func: &str,
    v: &impl Values,
    family: &Family,
    k: usize,
    cpu: u32,
) -> Result<Reading, Failure> {
    if k >= family.members.len() {
        return Err(Failure::invalid(
            func,
            format_args!(
                "member {k} of family {}, which has {}",
                family.name,
                family.members.len()
            ),
        ));
    }
    if cpu == PERFABI_TOTAL {
        return Ok(Reading::total_words(
            family,
            (0..v.cpus()).map(|c| v.words(family, k, c)),
        ));
    }
    let c = cpu as usize;
    if c >= v.cpus() {
        return Err(Failure::invalid(
            func,
            format_args!("cpu {cpu} of {}", v.cpus()),
        ));
    }
    Ok(Reading::from_words(family, v.words(family, k, c)))
}

/// Member `k`'s unsigned value (see the `_u64` accessors).
pub(crate) fn get_u64(
    func: &str,
    v: &impl Values,
    f: &Family,
    k: usize,
    cpu: u32,
) -> Result<u64, Failure> {
    as_u64(func, f, reading(func, v, f, k, cpu)?)
}

/// `r`, a value of family `f`, as an unsigned value (see the `_u64`
/// accessors).
pub(crate) fn as_u64(func: &str, f: &Family, r: Reading) -> Result<u64, Failure> {
    match r {
        Reading::Unsigned(x) => Ok(x),
        Reading::Signed(_) => Err(Failure::wrong_type(
            func,
            format_args!("{} is signed: read it as i64", f.name),
        )),
        Reading::Histogram(_) => Err(Failure::wrong_type(
            func,
            format_args!("{} is a histogram", f.name),
        )),
    }
}

/// Member `k`'s signed value (see the `_i64` accessors).
pub(crate) fn get_i64(
    func: &str,
    v: &impl Values,
    f: &Family,
    k: usize,
    cpu: u32,
) -> Result<i64, Failure> {
    as_i64(func, f, reading(func, v, f, k, cpu)?)
}

/// `r`, a value of family `f`, as a signed value (see the `_i64`
/// accessors).
pub(crate) fn as_i64(func: &str, f: &Family, r: Reading) -> Result<i64, Failure> {
    match r {
        Reading::Signed(x) => Ok(x),
        Reading::Unsigned(_) => Err(Failure::wrong_type(
            func,
            format_args!("{} is unsigned: read it as u64", f.name),
        )),
        Reading::Histogram(_) => Err(Failure::wrong_type(
            func,
            format_args!("{} is a histogram", f.name),
        )),
    }
}

/// Where a histogram's values go: the caller's `perfabi_histogram` and
/// its array of `n` bucket values.
pub(crate) struct HistogramOut {
    pub(crate) out: NonNull<perfabi_histogram>,
    pub(crate) buckets: *mut u64,
    pub(crate) n: usize,
}

/// Member `k`'s histogram: count, sum and bucket number into `to.out`,
/// the buckets into the caller's `to.buckets` (`to.out` is written first,
/// so a caller can size its array from a call that fails with
/// `buffer-too-small`).
///
/// # Safety
/// `to.out` is writable; `to.buckets` is NULL or `to.n` writable values.
pub(crate) unsafe fn get_histogram(
    func: &str,
    v: &impl Values,
    f: &Family,
    k: usize,
    cpu: u32,
    to: HistogramOut,
) -> Result<(), Failure> {
    // SAFETY: the caller's promise, forwarded.
    unsafe { put_histogram(func, f, reading(func, v, f, k, cpu)?, to) }
}

/// `r`, a value of family `f`, as a histogram into `to` (see
/// [`get_histogram`]).
///
/// # Safety
/// `to.out` is writable; `to.buckets` is NULL or `to.n` writable values.
pub(crate) unsafe fn put_histogram(
    func: &str,
    f: &Family,
    r: Reading,
    to: HistogramOut,
) -> Result<(), Failure> {
    let h: Histogram = match r {
        Reading::Histogram(h) => h,
        _ => {
            return Err(Failure::wrong_type(
                func,
                format_args!("{} is not a histogram", f.name),
            ))
        }
    };
    let head = perfabi_histogram {
        count: h.count,
        sum: h.sum,
        nr_buckets: h.buckets.len(),
    };
    // SAFETY: `to.out` is writable (the caller's promise).
    unsafe { ptr::put(to.out, head) };
    // SAFETY: the caller promises `to.n` writable values at `to.buckets`.
    let dst = unsafe { ptr::values(func, "buckets", to.buckets, to.n, h.buckets.len()) }?;
    dst.copy_from_slice(&h.buckets);
    Ok(())
}
