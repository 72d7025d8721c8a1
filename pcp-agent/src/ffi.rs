//! The few parts of PCP's C API this agent uses, declared by hand from
//! `pcp/pmapi.h` and `pcp/pmda.h` (PCP 6), and loaded at run time with
//! `dlopen`, so that a missing PCP library is a one-line message saying
//! what to install rather than a loader error. The layouts are checked
//! against the real headers by `tests/ffi_layout.rs`.
//!
//! This module and its children hold all of the agent's unsafe code: every
//! C function is called from a safe method of the type that owns that
//! boundary ([`Pcp`] for the library, [`daemon::Daemon`] and
//! [`daemon::Tables`] for the dispatch table and what it points to,
//! [`cnames::NameList`] and [`cnames::StatusList`] for memory handed to
//! libpcp_pmda), and the callbacks libpcp_pmda makes are in [`daemon`].

#![allow(non_camel_case_types, non_snake_case)]

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};

pub mod cnames;
pub mod daemon;

/// `pmID`: domain (9 bits), cluster (12), item (10).
pub type pmID = c_uint;
/// `pmInDom`: domain (9 bits), serial (22).
pub type pmInDom = c_uint;

/// `PM_INDOM_NULL`.
pub const PM_INDOM_NULL: pmInDom = 0xffff_ffff;
/// `PM_IN_NULL`: no instance (as the `int` the instance callback gets).
pub const PM_IN_NULL: c_int = -1;
/// `PMDA_INTERFACE_4`: dynamic namespace callbacks.
pub const PMDA_INTERFACE_4: c_int = 4;
/// `PMDA_INTERFACE_7`: version 4's callbacks, client contexts (5),
/// attributes (6) and metric labels (7). The agent's version.
pub const PMDA_INTERFACE_7: c_int = 7;
/// `PMDA_EXT_FLAG_HASHED`: look metrics up by hash (the table is dynamic).
pub const PMDA_EXT_FLAG_HASHED: c_int = 1 << 1;
/// Fetch callback results.
pub const PMDA_FETCH_NOVALUES: c_int = 0;
/// The value is in the atom (strings: a pointer the agent keeps alive).
pub const PMDA_FETCH_STATIC: c_int = 1;
/// `pmDesc.type` values: signed 32-bit.
pub const PM_TYPE_32: c_int = 0;
/// Unsigned 32-bit.
pub const PM_TYPE_U32: c_int = 1;
/// Signed 64-bit.
pub const PM_TYPE_64: c_int = 2;
/// Unsigned 64-bit.
pub const PM_TYPE_U64: c_int = 3;
/// Double.
pub const PM_TYPE_DOUBLE: c_int = 5;
/// String.
pub const PM_TYPE_STRING: c_int = 6;
/// `pmDesc.sem` values.
pub const PM_SEM_COUNTER: c_int = 1;
/// Instantaneous, continuous.
pub const PM_SEM_INSTANT: c_int = 3;
/// Instantaneous, discrete (changes rarely).
pub const PM_SEM_DISCRETE: c_int = 4;
/// `pmNotifyErr` levels (syslog's).
pub const LOG_ERR: c_int = 3;
/// Informational.
pub const LOG_INFO: c_int = 6;
/// Label request kinds (`pmLabelSets(3)`): the agent's domain.
pub const PM_LABEL_DOMAIN: c_int = 1 << 1;
/// An instance domain (the request's ident is a `pmInDom`).
pub const PM_LABEL_INDOM: c_int = 1 << 2;
/// A cluster of metrics (ident: a `pmID`).
pub const PM_LABEL_CLUSTER: c_int = 1 << 3;
/// One metric (ident: its `pmID`).
pub const PM_LABEL_ITEM: c_int = 1 << 4;
/// Every instance of an instance domain (ident: the `pmInDom`).
pub const PM_LABEL_INSTANCES: c_int = 1 << 5;
/// Help text request bits.
pub const PM_TEXT_ONELINE: c_int = 1;
/// The request names a metric.
pub const PM_TEXT_PMID: c_int = 4;
/// The request names an instance domain.
pub const PM_TEXT_INDOM: c_int = 8;
const PM_ERR_BASE: c_int = 12345;
/// Generic error.
pub const PM_ERR_GENERIC: c_int = -PM_ERR_BASE;
/// No help text.
pub const PM_ERR_TEXT: c_int = -PM_ERR_BASE - 4;
/// Unknown metric name.
pub const PM_ERR_NAME: c_int = -PM_ERR_BASE - 12;
/// Unknown metric identifier.
pub const PM_ERR_PMID: c_int = -PM_ERR_BASE - 13;
/// Unknown or illegal instance identifier.
pub const PM_ERR_INST: c_int = -PM_ERR_BASE - 15;
/// "Try again. Information not currently available".
pub const PM_ERR_AGAIN: c_int = -PM_ERR_BASE - 44;
/// `PMNS_LEAF_STATUS`: a child that is a metric.
pub const PMNS_LEAF_STATUS: c_int = 0;
/// `PMNS_NONLEAF_STATUS`: a child with children of its own.
pub const PMNS_NONLEAF_STATUS: c_int = 1;
/// `pmdaCacheOp`: read the saved instances of an instance domain.
pub const PMDA_CACHE_LOAD: c_int = 1;
/// `pmdaCacheStore`: add (or make active) an instance.
pub const PMDA_CACHE_ADD: c_int = 2;
/// `pmdaCacheStore`: forget an instance (it is no longer saved).
pub const PMDA_CACHE_CULL: c_int = 4;
/// `pmdaCacheOp`: save the instances if some were added or culled.
pub const PMDA_CACHE_SAVE: c_int = 6;
/// `pmdaCacheOp`: mark every instance inactive.
pub const PMDA_CACHE_INACTIVE: c_int = 9;
/// `pmdaCacheOp`: mark every instance active.
pub const PMDA_CACHE_ACTIVE: c_int = 8;
/// `pmdaCacheOp`: start a walk over the active instances.
pub const PMDA_CACHE_WALK_REWIND: c_int = 14;
/// `pmdaCacheOp`: the next active instance of the walk, or -1.
pub const PMDA_CACHE_WALK_NEXT: c_int = 15;

/// `pmUnits` as its 32-bit word (x86_64 bit-field order).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct pmUnits(pub u32);

impl pmUnits {
    /// `PMDA_PMUNITS(dimSpace, dimTime, dimCount, scaleSpace, scaleTime, scaleCount)`.
    pub const fn new(ds: i32, dt: i32, dc: i32, ss: u32, st: u32, sc: i32) -> pmUnits {
        let (ds, dt, dc, sc) = (
            ds as u32 & 0xf,
            dt as u32 & 0xf,
            dc as u32 & 0xf,
            sc as u32 & 0xf,
        );
        pmUnits(ds << 28 | dt << 24 | dc << 20 | (ss & 0xf) << 16 | (st & 0xf) << 12 | sc << 8)
    }
}

/// `pmDesc`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct pmDesc {
    /// Metric id.
    pub pmid: pmID,
    /// `PM_TYPE_*`.
    pub type_: c_int,
    /// Instance domain or `PM_INDOM_NULL`.
    pub indom: pmInDom,
    /// `PM_SEM_*`.
    pub sem: c_int,
    /// Units.
    pub units: pmUnits,
}

/// `pmdaMetric`.
#[repr(C)]
#[derive(Debug)]
pub struct pmdaMetric {
    /// Agent's own data: here the index of the metric in the catalog.
    pub m_user: *mut c_void,
    /// Description.
    pub m_desc: pmDesc,
}

/// `pmdaInstid`.
#[repr(C)]
#[derive(Debug)]
pub struct pmdaInstid {
    /// Instance id.
    pub i_inst: c_int,
    /// Instance name.
    pub i_name: *mut c_char,
}

/// `pmdaIndom`.
#[repr(C)]
#[derive(Debug)]
pub struct pmdaIndom {
    /// The instance domain.
    pub it_indom: pmInDom,
    /// Instances in `it_set`.
    pub it_numinst: c_int,
    /// The instances.
    pub it_set: *mut pmdaInstid,
}

/// `pmInResult`: an instance request's answer, freed by libpcp_pmda
/// (`__pmFreeInResult`: each name, `namelist`, `instlist`, the struct).
#[repr(C)]
#[derive(Debug)]
pub struct pmInResult {
    /// The instance domain.
    pub indom: pmInDom,
    /// Entries in the lists.
    pub numinst: c_int,
    /// Instance ids, or null.
    pub instlist: *mut c_int,
    /// Instance names, or null.
    pub namelist: *mut *mut c_char,
}

/// `pmAtomValue`.
#[repr(C)]
#[derive(Clone, Copy)]
pub union pmAtomValue {
    /// U32.
    pub ul: u32,
    /// 64.
    pub ll: i64,
    /// U64.
    pub ull: u64,
    /// Double.
    pub d: f64,
    /// String.
    pub cp: *const c_char,
}

/// `pmValueSet` with room for one value (`vlist[1]`, as the C type
/// declares it): what the agent's own fetch makes for a metric without
/// instance domain.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmValueSet {
    /// The metric.
    pub pmid: pmID,
    /// Values in `vlist`; 0: none; negative: a PCP error.
    pub numval: c_int,
    /// `PM_VAL_INSITU` (`lval`) or `PM_VAL_DPTR` (`pval`).
    pub valfmt: c_int,
    /// The values.
    pub vlist: [pmValue; 1],
}

/// `pmValue`.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct pmValue {
    /// Instance id (`PM_IN_NULL` for a metric without instance domain).
    pub inst: c_int,
    /// The value, or where it is.
    pub value: pmValueUnion,
}

/// `pmValue`'s union.
#[repr(C)]
#[derive(Clone, Copy)]
pub union pmValueUnion {
    /// A `pmValueBlock`: 4 bytes of header ([`value_block_header`]), then
    /// the value's bytes.
    pub pval: *mut c_void,
    /// A 32-bit value in place.
    pub lval: c_int,
}

/// `valfmt`: the value is `lval`.
pub const PM_VAL_INSITU: c_int = 0;
/// `valfmt`: the value is in `*pval` (as `pmdaFetch` sends it).
pub const PM_VAL_DPTR: c_int = 1;
/// `PM_VAL_HDR_SIZE`: bytes of a value block's header.
pub const PM_VAL_HDR_SIZE: usize = 4;
/// `PM_ERR_TYPE`: a value of an unknown type.
pub const PM_ERR_TYPE: c_int = -PM_ERR_BASE - 52;
/// Where `pmResult.vset` starts: after a `struct timeval` and the `int`
/// `numpmid` (padded to a pointer).
pub const PM_RESULT_VSET_OFFSET: usize = 24;

/// The header word of a `pmValueBlock` of `vlen` bytes (header included)
/// of type `vtype`: `vlen:24` then `vtype:8` (`HAVE_BITFIELDS_LTOR` is
/// unset on x86_64).
pub const fn value_block_header(vlen: usize, vtype: c_int) -> u32 {
    (vlen as u32 & 0x00ff_ffff) | (vtype as u32) << 24
}

/// `pmdaExt` (PCP 6, `PMDA_INTERFACE_7`). libpcp_pmda owns it; the agent
/// only points it at a new instance domain table (`e_indoms`,
/// `e_nindoms`), as PCP's own dynamic agents (mmv) do, and reads the
/// result callback it set up. Never made in Rust.
#[repr(C)]
pub struct pmdaExt {
    e_flags: c_uint,
    e_ext: *mut c_void,
    e_sockname: *mut c_char,
    e_name: *const c_char,
    e_logfile: *const c_char,
    e_helptext: *const c_char,
    e_status: c_int,
    e_infd: c_int,
    e_outfd: c_int,
    e_port: c_int,
    e_singular: c_int,
    e_ordinal: c_int,
    e_direct: c_int,
    e_domain: c_int,
    e_nmetrics: c_int,
    /// Number of instance domains in `e_indoms`.
    pub e_nindoms: c_int,
    e_help: c_int,
    e_prof: *mut c_void,
    e_io: c_int,
    /// The instance domain table libpcp_pmda searches.
    pub e_indoms: *mut pmdaIndom,
    e_idp: *mut pmdaIndom,
    e_metrics: *mut pmdaMetric,
    /// What frees a fetch's result once sent (`__pmFreeResultValues`
    /// unless set otherwise).
    pub e_resultCallBack: Option<ResultCallBack>,
    e_fetchCallBack: *mut c_void,
    e_checkCallBack: *mut c_void,
    e_doneCallBack: *mut c_void,
    e_context: c_int,
    e_endCallBack: *mut c_void,
    e_labelCallBack: *mut c_void,
}
/// `pmResult`, `pmProfile`, `pmInResult`: opaque, passed through.
pub type Opaque = c_void;

/// `pmdaInterface` with the `seven` member of its version union (its
/// largest: version 4's 10 pointers, then `attribute` and `label`).
#[repr(C)]
pub struct pmdaInterface {
    /// Domain.
    pub domain: c_int,
    /// `comm` bit-fields.
    pub comm: c_uint,
    /// Status.
    pub status: c_int,
    /// The union's first members, as version 4 names them.
    pub four: Four,
    /// Attribute callback (version 6; pmdaDaemon sets `pmdaAttribute`).
    pub attribute:
        Option<unsafe extern "C" fn(c_int, c_int, *const c_char, c_int, *mut pmdaExt) -> c_int>,
    /// Label callback (version 7; pmdaDaemon sets `pmdaLabel`).
    pub label: Option<LabelFn>,
}

/// The `four` member: the callbacks of a version 4 agent.
#[repr(C)]
pub struct Four {
    /// The agent's pmdaExt.
    pub ext: *mut pmdaExt,
    /// Profile.
    pub profile: Option<unsafe extern "C" fn(*mut Opaque, *mut pmdaExt) -> c_int>,
    /// Fetch.
    pub fetch: Option<FetchFn>,
    /// Descriptor.
    pub desc: Option<unsafe extern "C" fn(pmID, *mut pmDesc, *mut pmdaExt) -> c_int>,
    /// Instances.
    pub instance: Option<InstanceFn>,
    /// Help text.
    pub text: Option<TextFn>,
    /// Store.
    pub store: Option<unsafe extern "C" fn(*mut Opaque, *mut pmdaExt) -> c_int>,
    /// Name to pmID.
    pub pmid: Option<unsafe extern "C" fn(*const c_char, *mut pmID, *mut pmdaExt) -> c_int>,
    /// pmID to names.
    pub name: Option<unsafe extern "C" fn(pmID, *mut *mut *mut c_char, *mut pmdaExt) -> c_int>,
    /// Children of a name.
    pub children: Option<ChildrenFn>,
}

/// The fetch entry point.
pub type FetchFn = unsafe extern "C" fn(c_int, *mut pmID, *mut *mut Opaque, *mut pmdaExt) -> c_int;
/// The instance entry point.
pub type InstanceFn =
    unsafe extern "C" fn(pmInDom, c_int, *mut c_char, *mut *mut Opaque, *mut pmdaExt) -> c_int;
/// The help text entry point.
pub type TextFn = unsafe extern "C" fn(c_int, c_int, *mut *mut c_char, *mut pmdaExt) -> c_int;
/// The children entry point.
pub type ChildrenFn = unsafe extern "C" fn(
    *const c_char,
    c_int,
    *mut *mut *mut c_char,
    *mut *mut c_int,
    *mut pmdaExt,
) -> c_int;
/// The label entry point: `(ident, type, pmLabelSet **, pmdaExt *)`.
pub type LabelFn = unsafe extern "C" fn(c_int, c_int, *mut *mut Opaque, *mut pmdaExt) -> c_int;
/// The per-instance label callback of `pmdaLabel`: `(indom, inst,
/// pmLabelSet **)`, returning the number of labels in the set.
pub type LabelCallBack = unsafe extern "C" fn(pmInDom, c_uint, *mut *mut Opaque) -> c_int;
/// The per-value fetch callback.
pub type FetchCallBack = unsafe extern "C" fn(*mut pmdaMetric, c_uint, *mut pmAtomValue) -> c_int;
/// The callback that frees a fetch's `pmResult` once it was sent.
pub type ResultCallBack = unsafe extern "C" fn(*mut Opaque);
/// The per-PDU check callback.
pub type CheckCallBack = unsafe extern "C" fn() -> c_int;

/// libpcp_pmda (and libpcp), loaded: the functions this agent calls.
///
/// # Safety
/// Each field is the C function it is named after, looked up by
/// [`Pcp::load`] (the only way to make a `Pcp`) in a library that is never
/// closed, so it stays callable for the whole process. The fields are
/// private to this module: only its safe methods, and those of the types
/// in [`daemon`] and [`cnames`], call them, each with the arguments its C
/// function requires.
///
/// libpcp_pmda keeps its state (instance caches, dispatch table, log) in
/// process globals without locks, so calls must not overlap: the agent
/// makes them all from the thread that runs `pmdaMain`, and the unit tests
/// that use the caches take turns. Nothing in this type enforces that (it
/// is `Sync`, holding only function pointers); it is a rule of this crate.
pub struct Pcp {
    pmSetProgname: unsafe extern "C" fn(*const c_char),
    pmNotifyErr: unsafe extern "C" fn(c_int, *const c_char, ...),
    pmErrStr_r: unsafe extern "C" fn(c_int, *mut c_char, c_int) -> *mut c_char,
    pmdaDaemon: unsafe extern "C" fn(
        *mut pmdaInterface,
        c_int,
        *const c_char,
        c_int,
        *const c_char,
        *const c_char,
    ),
    pmdaOpenLog: unsafe extern "C" fn(*mut pmdaInterface),
    pmdaSetFlags: unsafe extern "C" fn(*mut pmdaInterface, c_int),
    pmdaInit:
        unsafe extern "C" fn(*mut pmdaInterface, *mut pmdaIndom, c_int, *mut pmdaMetric, c_int),
    pmdaConnect: unsafe extern "C" fn(*mut pmdaInterface),
    pmdaMain: unsafe extern "C" fn(*mut pmdaInterface),
    pmdaFetch: FetchFn,
    pmdaSetFetchCallBack: unsafe extern "C" fn(*mut pmdaInterface, FetchCallBack),
    pmdaSetCheckCallBack: unsafe extern "C" fn(*mut pmdaInterface, CheckCallBack),
    pmdaSetResultCallBack: unsafe extern "C" fn(*mut pmdaInterface, ResultCallBack),
    pmdaRehash: unsafe extern "C" fn(*mut pmdaExt, *mut pmdaMetric, c_int),
    pmGetOptionalConfig: unsafe extern "C" fn(*const c_char) -> *mut c_char,
    pmdaCacheOp: unsafe extern "C" fn(pmInDom, c_int) -> c_int,
    pmdaCacheLookup:
        unsafe extern "C" fn(pmInDom, c_int, *mut *mut c_char, *mut *mut c_void) -> c_int,
    pmdaCacheStore: unsafe extern "C" fn(pmInDom, c_int, *const c_char, *mut c_void) -> c_int,
    pmdaInstance: InstanceFn,
    pmdaSetLabelCallBack: unsafe extern "C" fn(*mut pmdaInterface, LabelCallBack),
    pmdaLabel: LabelFn,
    pmdaAddLabels: unsafe extern "C" fn(*mut *mut Opaque, *const c_char, ...) -> c_int,
}

/// The library file loaded (it pulls in libpcp.so.3); the environment
/// variable `PERFABI_PCP_LIBRARY` names another.
pub const LIBRARY: &str = "libpcp_pmda.so.3";

impl Pcp {
    /// Loads libpcp_pmda (and with it libpcp) and looks every function up.
    pub fn load() -> Result<Pcp, String> {
        let file = std::env::var("PERFABI_PCP_LIBRARY").unwrap_or_else(|_| LIBRARY.into());
        let name = std::ffi::CString::new(file.clone())
            .map_err(|_| "PERFABI_PCP_LIBRARY contains a NUL byte".to_string())?;
        // SAFETY: dlopen with a valid C string; the handle is never closed,
        // so the function pointers below stay valid for the process.
        let h = unsafe { libc::dlopen(name.as_ptr(), libc::RTLD_NOW | libc::RTLD_GLOBAL) };
        if h.is_null() {
            return Err(format!(
                "cannot load {file} ({}): install PCP's agent library (Debian: apt-get install libpcp-pmda3)",
                dlerror()
            ));
        }
        macro_rules! sym {
            ($name:ident) => {{
                let s = concat!(stringify!($name), "\0");
                // SAFETY: s is NUL-terminated; h is a live handle.
                let p = unsafe { libc::dlsym(h, s.as_ptr().cast()) };
                if p.is_null() {
                    return Err(format!(
                        "{LIBRARY} has no {}: this PCP is too old (PCP 4 or later is needed)",
                        stringify!($name)
                    ));
                }
                // SAFETY: the symbol is the C function declared in pmda.h or
                // pmapi.h with exactly the signature of the field it fills.
                unsafe { fn_from_symbol(p) }
            }};
        }
        Ok(Pcp {
            pmSetProgname: sym!(pmSetProgname),
            pmNotifyErr: sym!(pmNotifyErr),
            pmErrStr_r: sym!(pmErrStr_r),
            pmdaDaemon: sym!(pmdaDaemon),
            pmdaOpenLog: sym!(pmdaOpenLog),
            pmdaSetFlags: sym!(pmdaSetFlags),
            pmdaInit: sym!(pmdaInit),
            pmdaConnect: sym!(pmdaConnect),
            pmdaMain: sym!(pmdaMain),
            pmdaFetch: sym!(pmdaFetch),
            pmdaSetFetchCallBack: sym!(pmdaSetFetchCallBack),
            pmdaSetCheckCallBack: sym!(pmdaSetCheckCallBack),
            pmdaSetResultCallBack: sym!(pmdaSetResultCallBack),
            pmdaRehash: sym!(pmdaRehash),
            pmGetOptionalConfig: sym!(pmGetOptionalConfig),
            pmdaCacheOp: sym!(pmdaCacheOp),
            pmdaCacheLookup: sym!(pmdaCacheLookup),
            pmdaCacheStore: sym!(pmdaCacheStore),
            pmdaInstance: sym!(pmdaInstance),
            pmdaSetLabelCallBack: sym!(pmdaSetLabelCallBack),
            pmdaLabel: sym!(pmdaLabel),
            pmdaAddLabels: sym!(pmdaAddLabels),
        })
    }

    /// A PCP configuration value (`PCP_VAR_DIR`, …): the environment's,
    /// else `/etc/pcp.conf`'s; `None` if neither has it.
    pub fn config(&self, name: &str) -> Option<String> {
        let n = std::ffi::CString::new(name).ok()?;
        // SAFETY: a valid C string; the result is NULL or a string libpcp
        // keeps (the environment's), copied at once.
        let p = unsafe { (self.pmGetOptionalConfig)(n.as_ptr()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-null, NUL-terminated (above).
        // not raw: a conversion of libpcp's configuration text, not a message
        Some(unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    }

    /// Makes the process run as `user` (its uid, gid and groups), as
    /// PCP's agents do once their log is open: libpcp's
    /// `pmSetProcessIdentity` (`__pmSetProcessIdentity` before PCP 5),
    /// which logs why and exits if a step fails. A user that does not exist
    /// is an error here, before anything changes.
    pub fn set_process_identity(&self, user: &str) -> Result<(), String> {
        let name = CString::new(user).map_err(|_| format!("-U {user:?}: not a user name"))?;
        let Some(uid) = user_id(&name) else {
            return Err(format!(
                "-U {user:?}: no such user (PCP's is PCP_USER in pcp.conf, `pcp` on Debian)"
            ));
        };
        type SetIdentity = unsafe extern "C" fn(*const c_char) -> c_int;
        let symbol = [c"pmSetProcessIdentity", c"__pmSetProcessIdentity"]
            .into_iter()
            // SAFETY: RTLD_DEFAULT with a NUL-terminated name: a lookup in
            // the libraries loaded so far (libpcp, by Pcp::load, global).
            .map(|s| unsafe { libc::dlsym(libc::RTLD_DEFAULT, s.as_ptr()) })
            .find(|p| !p.is_null())
            .ok_or_else(|| "libpcp has no pmSetProcessIdentity: this PCP is too old".to_string())?;
        // SAFETY: the symbol is libpcp's `int pmSetProcessIdentity(const
        // char *name)` (or its older name, the same function).
        let set: SetIdentity = unsafe { fn_from_symbol(symbol) };
        // SAFETY: a valid C string, read during the call only.
        let rc = unsafe { set(name.as_ptr()) };
        // SAFETY: plain system calls without arguments.
        let (ruid, euid) = unsafe { (libc::getuid(), libc::geteuid()) };
        if rc < 0 {
            return Err(format!("-U {user:?}: {}", self.err_str(rc)));
        }
        if ruid != uid || euid != uid {
            return Err(format!(
                "-U {user:?}: still running as uid {euid}, not {uid}"
            ));
        }
        Ok(())
    }

    /// Sets the program name libpcp puts in its messages
    /// (`pmSetProgname`); libpcp keeps the pointer, hence `'static`.
    pub fn set_progname(&self, name: &'static CStr) {
        // SAFETY: a valid C string that outlives every use libpcp makes of
        // it (it keeps the pointer).
        unsafe { (self.pmSetProgname)(name.as_ptr()) };
    }

    /// Writes `msg` to the agent's log at `level` (`LOG_ERR`, `LOG_INFO`),
    /// with `pmNotifyErr`; NUL bytes in `msg` become spaces.
    pub fn notify(&self, level: c_int, msg: &str) {
        let m = CString::new(msg.replace('\0', " ")).expect("NULs replaced");
        // SAFETY: a "%s" format with one valid C string argument.
        unsafe { (self.pmNotifyErr)(level, c"%s".as_ptr(), m.as_ptr()) };
    }

    /// PCP's text for an error code.
    pub fn err_str(&self, code: c_int) -> String {
        let mut buf = [0 as c_char; 256];
        // SAFETY: pmErrStr_r writes at most the given length, NUL included.
        let p = unsafe { (self.pmErrStr_r)(code, buf.as_mut_ptr(), buf.len() as c_int) };
        if p.is_null() {
            return format!("PCP error {code}");
        }
        // SAFETY: p points at buf, NUL-terminated by pmErrStr_r.
        // not raw: libpcp's own fixed error text
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// The `pmdaCacheOp(3)` operations this agent uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheOp {
    /// `PMDA_CACHE_LOAD`: read the saved instances.
    Load,
    /// `PMDA_CACHE_SAVE`: save the instances if some were added or culled.
    Save,
    /// `PMDA_CACHE_ACTIVE`: mark every instance active.
    Active,
    /// `PMDA_CACHE_INACTIVE`: mark every instance inactive.
    Inactive,
    /// `PMDA_CACHE_WALK_REWIND`: start a walk over the active instances.
    WalkRewind,
    /// `PMDA_CACHE_WALK_NEXT`: the next active instance of the walk, or -1.
    WalkNext,
}

impl CacheOp {
    const fn code(self) -> c_int {
        match self {
            CacheOp::Load => PMDA_CACHE_LOAD,
            CacheOp::Save => PMDA_CACHE_SAVE,
            CacheOp::Active => PMDA_CACHE_ACTIVE,
            CacheOp::Inactive => PMDA_CACHE_INACTIVE,
            CacheOp::WalkRewind => PMDA_CACHE_WALK_REWIND,
            CacheOp::WalkNext => PMDA_CACHE_WALK_NEXT,
        }
    }
}

/// The `pmdaCacheStore(3)` operations this agent uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheStore {
    /// `PMDA_CACHE_ADD`: add (or make active) an instance.
    Add,
    /// `PMDA_CACHE_CULL`: forget an instance (it is no longer saved).
    Cull,
}

impl CacheStore {
    const fn code(self) -> c_int {
        match self {
            CacheStore::Add => PMDA_CACHE_ADD,
            CacheStore::Cull => PMDA_CACHE_CULL,
        }
    }
}

/// libpcp_pmda's instance cache (`pmdaCache(3)`).
impl Pcp {
    /// `pmdaCacheOp(indom, op)`, on the cache of `indom` (made if there is
    /// none yet): for [`CacheOp::WalkNext`] the next instance or -1, else a
    /// count or 0; a negative PCP error.
    pub fn cache_op(&self, indom: pmInDom, op: CacheOp) -> c_int {
        // SAFETY: plain values; libpcp_pmda finds or makes the cache
        // itself (and for Load and Save reads or writes its own file).
        unsafe { (self.pmdaCacheOp)(indom, op.code()) }
    }

    /// `pmdaCacheStore(indom, op, name, NULL)`: for [`CacheStore::Add`] the
    /// instance's id (its old one if the cache has the name); a negative
    /// PCP error.
    pub fn cache_store(&self, indom: pmInDom, op: CacheStore, name: &CStr) -> c_int {
        // SAFETY: a valid C string, which the cache copies (strdup); no
        // private data.
        unsafe { (self.pmdaCacheStore)(indom, op.code(), name.as_ptr(), std::ptr::null_mut()) }
    }

    /// The name of instance `inst` in the cache of `indom`
    /// (`pmdaCacheLookup`), copied; `None` if the cache has no such
    /// instance (or it has no name).
    pub fn cache_name(&self, indom: pmInDom, inst: c_int) -> Option<String> {
        let mut name: *mut c_char = std::ptr::null_mut();
        // SAFETY: the out pointer is valid for the call; no private data
        // is asked for.
        let st = unsafe { (self.pmdaCacheLookup)(indom, inst, &mut name, std::ptr::null_mut()) };
        if st < 0 || name.is_null() {
            return None;
        }
        // SAFETY: non-null and NUL-terminated: the cache's own copy, which
        // stays until the cache changes; copied at once.
        Some(
            unsafe { CStr::from_ptr(name) }
                // not raw: a conversion of the cache's name, not a message
                .to_string_lossy()
                .into_owned(),
        )
    }
}

/// A function pointer of type `F` from a symbol's address.
///
/// # Safety
/// `p` must be the address of a function whose C signature is `F`'s.
unsafe fn fn_from_symbol<F: Copy>(p: *mut c_void) -> F {
    assert_eq!(std::mem::size_of::<F>(), std::mem::size_of::<*mut c_void>());
    // SAFETY: same size (checked); the caller vouches for the signature.
    unsafe { std::mem::transmute_copy(&p) }
}

/// The uid of user `name` (`getpwnam_r`), `None` if there is no such
/// user (or the user database cannot be read).
fn user_id(name: &CStr) -> Option<libc::uid_t> {
    // SAFETY: passwd is plain C data; all zero is a valid value to fill.
    let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
    let mut buf = vec![0 as c_char; 16 << 10];
    let mut found: *mut libc::passwd = std::ptr::null_mut();
    // SAFETY: every pointer is valid for the call, buf for buf.len() bytes;
    // the strings it sets point into buf, which outlives their (no) use.
    let rc = unsafe {
        libc::getpwnam_r(
            name.as_ptr(),
            &mut pwd,
            buf.as_mut_ptr(),
            buf.len(),
            &mut found,
        )
    };
    (rc == 0 && !found.is_null()).then_some(pwd.pw_uid)
}

fn dlerror() -> String {
    // SAFETY: dlerror returns NULL or a thread-local NUL-terminated string.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        return "unknown error".into();
    }
    // SAFETY: non-null, NUL-terminated (above).
    // not raw: the C library's text about the PCP library it loads
    unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
}

/// `pmID_build(domain, cluster, item)`.
pub const fn pmid(domain: u32, cluster: u32, item: u32) -> pmID {
    (domain & 0x1ff) << 22 | (cluster & 0xfff) << 10 | (item & 0x3ff)
}

/// `pmInDom_build(domain, serial)`.
pub const fn indom(domain: u32, serial: u32) -> pmInDom {
    (domain & 0x1ff) << 22 | (serial & 0x3f_ffff)
}
