//! The daemon side of libpcp_pmda: the dispatch table ([`Daemon`]), the
//! tables libpcp_pmda reads ([`Tables`]), and the `extern "C"` callbacks
//! through which pmcd's requests reach the agent ([`Callbacks`]).
//!
//! Each callback turns libpcp_pmda's raw pointers into Rust values, asks
//! the agent, and writes the answer back. Every callback is wrapped so that
//! no panic unwinds into C: a panic is logged and the request fails with
//! `PM_ERR_GENERIC`.

use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};

use super::cnames::{NameList, OneName, StatusList};
use super::*;
use crate::namespace::Child;

/// What libpcp_pmda's callbacks ask of the agent. The methods run inside
/// [`Daemon::serve`] (in `pmdaMain`), on its thread, one at a time.
pub trait Callbacks {
    /// Before each request from pmcd (the check callback): brings the
    /// agent, and the `tables` libpcp_pmda reads, up to date.
    fn refresh(&mut self, tables: &mut Tables);
    /// Before libpcp_pmda's fetch of `pmids` (after [`Callbacks::refresh`]):
    /// reads what their values need; may change the `tables`, which
    /// libpcp_pmda reads only afterwards.
    fn prepare_fetch(&mut self, pmids: &[pmID], tables: &mut Tables);
    /// Before libpcp_pmda lists or walks the instances of `indom` for an
    /// instance or label request.
    fn prepare_instances(&mut self, indom: pmInDom);
    /// The value of metric `metric` (its index in the last
    /// [`Tables::set_metrics`]) for instance `inst`: `None` if it has no
    /// value, `Err` a negative PCP error.
    fn value(&self, metric: usize, inst: c_uint) -> Result<Option<Value<'_>>, c_int>;
    /// The help text of the metric or instance domain `ident` (`kind`:
    /// `PM_TEXT_PMID` or `PM_TEXT_INDOM`, with `PM_TEXT_ONELINE` or not).
    fn text(&mut self, ident: c_int, kind: c_int) -> Option<&CStr>;
    /// The PMID of the metric `name`.
    fn pmid(&self, name: &str) -> Option<pmID>;
    /// The name of the metric `pmid`.
    fn name(&self, pmid: pmID) -> Option<&str>;
    /// The children of `name` (`leaves` false) or every leaf below it
    /// (`leaves` true); `None` if there is no such name.
    fn children(&self, name: &str, leaves: bool) -> Option<Vec<Child<'_>>>;
    /// The labels of the domain, an instance domain, a cluster or a metric
    /// (`kind`: `PM_LABEL_DOMAIN`, `_INDOM`, `_CLUSTER` or `_ITEM`; `ident`
    /// the domain, `pmInDom` or `pmID`), as one JSON object; `None`: none
    /// of its own (libpcp_pmda's defaults apply).
    fn labels(&mut self, ident: c_int, kind: c_int) -> Option<String>;
    /// The labels of instance `inst` of `indom`, as one JSON object.
    fn instance_labels(&mut self, indom: pmInDom, inst: c_uint) -> Option<String>;
    /// The name instance id `inst` of `indom` was given, when libpcp_pmda
    /// no longer has it (the instance is gone). Ids are never given to
    /// another name, so a client naming the instances of a fetch after
    /// they changed (pminfo -f, while DAMON's regions change with every
    /// aggregation) still gets the right name.
    fn former_instance_name(&self, indom: pmInDom, inst: c_uint) -> Option<String>;
}

/// One value for the fetch callback. A string is handed to libpcp_pmda as
/// `PMDA_FETCH_STATIC`, so it is borrowed from the agent, not copied: it
/// stays there until the agent changes, which only a later callback does,
/// and libpcp_pmda has copied it by then.
#[derive(Clone, Copy, Debug)]
pub enum Value<'a> {
    /// `PM_TYPE_U32`.
    U32(u32),
    /// `PM_TYPE_U64` or `PM_TYPE_64` (the same 8 bytes).
    U64(u64),
    /// `PM_TYPE_DOUBLE`.
    F64(f64),
    /// `PM_TYPE_STRING`.
    Str(&'a CStr),
}

/// The tables libpcp_pmda reads: the metrics (`pmdaMetric`), the instance
/// domains (`pmdaIndom`) and the instances the agent lists itself.
///
/// # Safety
/// From [`Daemon::serve`] on, libpcp_pmda keeps pointers to the metric
/// table, the instance domain array and each listed instance and its name,
/// and reads them while it serves a request. So the one `Tables` it reads
/// is made by the one [`Daemon`] (others, [`Tables::detached`], never get
/// the `pmdaExt` and call nothing of libpcp_pmda), only ever lent out (there is no other to swap
/// with), kept until `pmdaMain` has returned, and changes a buffer only
/// through these methods, which point libpcp_pmda at the new one
/// (`pmdaRehash`, `it_set`) before it can read again. Every buffer is on
/// the heap, so moving a `Tables` moves no table.
pub struct Tables {
    pcp: &'static Pcp,
    /// The agent's `pmdaExt` once `pmdaInit` has run, else null: where
    /// `pmdaRehash` tells libpcp_pmda of a new metric table, and
    /// `e_indoms` of a new instance domain table.
    ext: *mut pmdaExt,
    /// `m_user` is the metric's index, passed back to [`Callbacks::value`].
    metrics: Vec<pmdaMetric>,
    /// The fixed instance domains (given to [`Daemon::new`]), then those
    /// of [`Tables::set_dynamic_indoms`].
    indoms: Vec<pmdaIndom>,
    /// How many of `indoms` are fixed.
    fixed: usize,
    /// For each instance domain, the instances the agent lists (none for
    /// those libpcp_pmda's instance cache serves) and their names.
    instances: Vec<(Vec<pmdaInstid>, Vec<CString>)>,
}

impl Tables {
    /// Tables that libpcp_pmda never reads, for the instance domains
    /// `indoms`: an agent's requests made without pmcd (its tests). Only
    /// [`Daemon::serve`] hands tables to libpcp_pmda.
    pub fn detached(pcp: &'static Pcp, indoms: impl IntoIterator<Item = pmInDom>) -> Tables {
        Tables::new(pcp, indoms)
    }

    /// The ids of the instances listed for `indom` (none for an instance
    /// domain libpcp_pmda's instance cache serves), as a fetch walks them.
    pub fn instance_ids(&self, indom: pmInDom) -> Vec<c_int> {
        let Some(k) = self.indoms.iter().position(|d| d.it_indom == indom) else {
            return Vec::new();
        };
        self.instances[k].0.iter().map(|i| i.i_inst).collect()
    }

    fn new(pcp: &'static Pcp, indoms: impl IntoIterator<Item = pmInDom>) -> Tables {
        let indoms: Vec<pmdaIndom> = indoms
            .into_iter()
            .map(|d| pmdaIndom {
                it_indom: d,
                it_numinst: 0,
                it_set: std::ptr::null_mut(),
            })
            .collect();
        Tables {
            pcp,
            ext: std::ptr::null_mut(),
            metrics: Vec::new(),
            instances: indoms.iter().map(|_| (Vec::new(), Vec::new())).collect(),
            fixed: indoms.len(),
            indoms,
        }
    }

    /// Points libpcp_pmda at the instance domain table (it may have moved).
    fn point_indoms(&mut self) {
        if !self.ext.is_null() {
            // SAFETY: ext is the agent's pmdaExt (from pmdaInit), valid for
            // the process. libpcp_pmda reads the table only while it serves
            // a request, never during this call; the table stays in self
            // until the next change, which points it anew.
            unsafe {
                (*self.ext).e_indoms = self.indoms.as_mut_ptr();
                (*self.ext).e_nindoms = self.indoms.len() as c_int;
            }
        }
    }

    /// Replaces the metric table: entry `i` describes the metric the agent
    /// knows as `i`.
    pub fn set_metrics(&mut self, descs: impl IntoIterator<Item = pmDesc>) {
        self.metrics = descs
            .into_iter()
            .enumerate()
            .map(|(i, m_desc)| pmdaMetric {
                m_user: i as *mut c_void,
                m_desc,
            })
            .collect();
        if !self.ext.is_null() {
            // SAFETY: ext is the agent's pmdaExt (from pmdaInit). The old
            // table is freed already, but libpcp_pmda reads the table only
            // while it serves a request, not before this call points it
            // at the new one, which stays in self until the next call.
            unsafe {
                (self.pcp.pmdaRehash)(
                    self.ext,
                    self.metrics.as_mut_ptr(),
                    self.metrics.len() as c_int,
                )
            };
        }
    }

    /// Lists the instances of instance domain `which` (its index in the
    /// domains given to [`Daemon::new`]): instance `i` is named `names[i]`.
    pub fn set_instances(&mut self, which: usize, names: Vec<CString>) {
        let mut insts: Vec<pmdaInstid> = names
            .iter()
            .enumerate()
            .map(|(i, n)| pmdaInstid {
                i_inst: i as c_int,
                i_name: n.as_ptr() as *mut c_char,
            })
            .collect();
        let d = &mut self.indoms[which];
        d.it_numinst = insts.len() as c_int;
        d.it_set = insts.as_mut_ptr();
        self.instances[which] = (insts, names);
        self.point_indoms();
    }

    /// Replaces the instance domains after the fixed ones: each
    /// `(indom, instances)`, an instance being its id and name.
    pub fn set_dynamic_indoms(&mut self, domains: Vec<(pmInDom, Vec<(c_int, CString)>)>) {
        self.indoms.truncate(self.fixed);
        self.instances.truncate(self.fixed);
        for (indom, list) in domains {
            let (ids, names): (Vec<c_int>, Vec<CString>) = list.into_iter().unzip();
            let mut insts: Vec<pmdaInstid> = ids
                .iter()
                .zip(&names)
                .map(|(&i, n)| pmdaInstid {
                    i_inst: i,
                    i_name: n.as_ptr() as *mut c_char,
                })
                .collect();
            self.indoms.push(pmdaIndom {
                it_indom: indom,
                it_numinst: insts.len() as c_int,
                it_set: insts.as_mut_ptr(),
            });
            // The buffers are on the heap: moving the vectors moves no
            // instance or name.
            self.instances.push((insts, names));
        }
        self.point_indoms();
    }
}

/// The agent's `pmdaInterface`, set up as a daemon PMDA (`pmdaDaemon`) with
/// its log open and this module's callbacks installed, and the [`Tables`]
/// it will serve.
///
/// # Safety
/// The interface is leaked, so libpcp_pmda's pointers to it hold for the
/// process; the names given to `pmdaDaemon` are `'static` because it keeps
/// them. libpcp_pmda's own state is process-wide, so there is at most one
/// `Daemon` per process.
pub struct Daemon {
    pcp: &'static Pcp,
    dispatch: &'static mut pmdaInterface,
    tables: Tables,
}

impl Daemon {
    /// Sets up the agent `name` for `domain`, logging to `logfile`, with
    /// the instance domains `indoms` (none of them listed yet); an error
    /// if it fails, or if a `Daemon` was made before in this process.
    pub fn new(
        pcp: &'static Pcp,
        name: &'static CStr,
        domain: u32,
        logfile: &'static CStr,
        indoms: impl IntoIterator<Item = pmInDom>,
    ) -> Result<Daemon, String> {
        static MADE: AtomicBool = AtomicBool::new(false);
        if MADE.swap(true, Ordering::Relaxed) {
            return Err("pmdaDaemon: called twice in one process".into());
        }
        // SAFETY: pmdaInterface is plain C data (integers, pointers and
        // optional function pointers), and all zero is what pmdaDaemon
        // expects to fill.
        let dispatch: &'static mut pmdaInterface =
            Box::leak(Box::new(unsafe { std::mem::zeroed() }));
        // SAFETY: dispatch is a valid, 'static pmdaInterface; the strings
        // are 'static (pmdaDaemon keeps them); no help file.
        unsafe {
            (pcp.pmdaDaemon)(
                dispatch,
                PMDA_INTERFACE_7,
                name.as_ptr(),
                domain as c_int,
                logfile.as_ptr(),
                std::ptr::null(),
            );
        }
        if dispatch.status < 0 {
            return Err(format!("pmdaDaemon: {}", pcp.err_str(dispatch.status)));
        }
        // SAFETY: dispatch was set up by pmdaDaemon.
        unsafe { (pcp.pmdaOpenLog)(dispatch) };
        dispatch.four.fetch = Some(fetch_pdu_cb);
        dispatch.four.text = Some(text_cb);
        dispatch.four.pmid = Some(pmid_cb);
        dispatch.four.name = Some(name_cb);
        dispatch.four.children = Some(children_cb);
        dispatch.four.instance = Some(instance_cb);
        dispatch.label = Some(label_cb);
        // SAFETY: dispatch is set up (as version 7); the callbacks are
        // 'static functions.
        unsafe {
            (pcp.pmdaSetFlags)(dispatch, PMDA_EXT_FLAG_HASHED);
            (pcp.pmdaSetFetchCallBack)(dispatch, fetch_cb);
            (pcp.pmdaSetCheckCallBack)(dispatch, check_cb);
            (pcp.pmdaSetLabelCallBack)(dispatch, instance_label_cb);
        }
        if dispatch.status < 0 {
            return Err(format!(
                "pmdaSetLabelCallBack: {}",
                pcp.err_str(dispatch.status)
            ));
        }
        Ok(Daemon {
            pcp,
            dispatch,
            tables: Tables::new(pcp, indoms),
        })
    }

    /// The tables, to fill before [`Daemon::serve`].
    pub fn tables(&mut self) -> &mut Tables {
        &mut self.tables
    }

    /// Hands the tables to libpcp_pmda (`pmdaInit`), then serves pmcd on
    /// stdin/stdout (`pmdaConnect`, `pmdaMain`), `agent` answering the
    /// callbacks; returns when pmcd closes the pipe.
    pub fn serve(self, agent: impl Callbacks + 'static) -> Result<(), String> {
        let Daemon {
            pcp,
            dispatch,
            mut tables,
        } = self;
        // SAFETY: dispatch is set up; the tables' buffers stay where they
        // are for as long as libpcp_pmda may read them (see Tables).
        unsafe {
            (pcp.pmdaInit)(
                dispatch,
                tables.indoms.as_mut_ptr(),
                tables.indoms.len() as c_int,
                tables.metrics.as_mut_ptr(),
                tables.metrics.len() as c_int,
            );
        }
        if dispatch.status < 0 {
            return Err(format!("pmdaInit: {}", pcp.err_str(dispatch.status)));
        }
        tables.ext = dispatch.four.ext;
        tables.point_indoms();
        SERVED.with(|s| {
            *s.borrow_mut() = Some(Served {
                agent: Box::new(agent),
                tables,
            })
        });
        // SAFETY: dispatch is initialised; pmdaMain serves pmcd until EOF.
        unsafe {
            (pcp.pmdaConnect)(dispatch);
            (pcp.pmdaMain)(dispatch);
        }
        Ok(())
    }
}

/// The agent and its tables, while `pmdaMain` runs.
struct Served {
    agent: Box<dyn Callbacks>,
    tables: Tables,
}

impl Served {
    /// Adds the labels of the JSON object `json` to `*lp` (a set made if
    /// it is null) with `pmdaAddLabels`: the number of labels in the set,
    /// or a negative PCP error (logged).
    ///
    /// # Safety
    /// `lp` is libpcp_pmda's label set pointer, valid for the call.
    unsafe fn add_labels(&self, lp: *mut *mut Opaque, json: &str) -> c_int {
        let pcp = self.tables.pcp;
        let Ok(text) = CString::new(json) else {
            return 0;
        };
        // SAFETY: a "%s" format with one valid C string argument (never
        // the agent's text as the format); lp as the caller promises.
        let n = unsafe { (pcp.pmdaAddLabels)(lp, c"%s".as_ptr(), text.as_ptr()) };
        if n < 0 {
            pcp.notify(
                LOG_ERR,
                &format!("labels {json} refused: {}", pcp.err_str(n)),
            );
        }
        n
    }
}

thread_local! {
    /// Set by [`Daemon::serve`] on the thread that runs `pmdaMain`, where
    /// the callbacks run.
    static SERVED: RefCell<Option<Served>> = const { RefCell::new(None) };
}

/// Runs `f` on the served agent, turning a panic into a logged
/// `PM_ERR_GENERIC`.
fn with_served(what: &str, f: impl FnOnce(&mut Served) -> c_int) -> c_int {
    let r = catch_unwind(AssertUnwindSafe(|| {
        SERVED.with(|s| match s.try_borrow_mut() {
            Ok(mut s) => s.as_mut().map_or(PM_ERR_GENERIC, f),
            Err(_) => PM_ERR_GENERIC,
        })
    }));
    r.unwrap_or_else(|_| {
        eprintln!("pmdaperfabi: internal error (panic) in {what}; the request failed");
        PM_ERR_GENERIC
    })
}

/// The instance entry point: `pmdaInstance`, and for the name of an
/// instance id it no longer has, the name the agent gave that id
/// ([`Callbacks::former_instance_name`]).
///
/// # Safety
/// libpcp_pmda passes a name (or null), an out pointer and the agent's
/// pmdaExt, valid for the call.
unsafe extern "C" fn instance_cb(
    indom: pmInDom,
    inst: c_int,
    name: *mut c_char,
    result: *mut *mut Opaque,
    ext: *mut pmdaExt,
) -> c_int {
    let mut pcp = None;
    let mut former = None;
    let st = with_served("instance", |s| {
        pcp = Some(s.tables.pcp);
        s.agent.prepare_instances(indom);
        0
    });
    let Some(pcp) = pcp else { return st };
    // SAFETY: the arguments libpcp_pmda passed, unchanged.
    let st = unsafe { (pcp.pmdaInstance)(indom, inst, name, result, ext) };
    if st != PM_ERR_INST || inst == PM_IN_NULL || !name.is_null() {
        return st;
    }
    with_served("instance", |s| {
        former = s.agent.former_instance_name(indom, inst as c_uint);
        0
    });
    match former.map(|n| OneName::new(indom, &n)) {
        Some(Ok(one)) => {
            // SAFETY: libpcp_pmda's out pointer, valid for the call; it
            // sends the result and frees it (__pmFreeInResult).
            unsafe { *result = one.into_raw().cast() };
            0
        }
        _ => st,
    }
}

/// The label entry point: the agent's own labels of the domain, an
/// instance domain, a cluster or a metric, then `pmdaLabel` (libpcp_pmda's
/// defaults and flags; for `PM_LABEL_INSTANCES` its walk over the instance
/// domain, which calls [`instance_label_cb`] for each instance).
///
/// # Safety
/// libpcp_pmda passes its label set pointer and the agent's pmdaExt, both
/// valid for the call.
unsafe extern "C" fn label_cb(
    ident: c_int,
    kind: c_int,
    lp: *mut *mut Opaque,
    ext: *mut pmdaExt,
) -> c_int {
    let mut pcp = None;
    let st = with_served("labels", |s| {
        pcp = Some(s.tables.pcp);
        if kind & PM_LABEL_INSTANCES != 0 {
            // pmdaLabel walks the instances.
            s.agent.prepare_instances(ident as pmInDom);
            return 0;
        }
        match s.agent.labels(ident, kind) {
            // SAFETY: lp as this function's contract says.
            Some(json) => unsafe { s.add_labels(lp, &json) },
            None => 0,
        }
    });
    let Some(pcp) = pcp else { return st };
    if st < 0 {
        return st;
    }
    // Outside with_served: pmdaLabel calls instance_label_cb, which takes
    // the agent again.
    // SAFETY: the arguments libpcp_pmda passed, unchanged.
    unsafe { (pcp.pmdaLabel)(ident, kind, lp, ext) }
}

/// `pmdaLabel`'s per-instance callback: `*lp` is a set libpcp_pmda made
/// for the instance; returns the number of labels put in it.
///
/// # Safety
/// libpcp_pmda passes a label set pointer valid for the call.
unsafe extern "C" fn instance_label_cb(
    indom: pmInDom,
    inst: c_uint,
    lp: *mut *mut Opaque,
) -> c_int {
    with_served("instance labels", |s| {
        match s.agent.instance_labels(indom, inst) {
            // SAFETY: lp as this function's contract says.
            Some(json) => unsafe { s.add_labels(lp, &json) }.max(0),
            None => 0,
        }
    })
}

extern "C" fn check_cb() -> c_int {
    with_served("refresh", |s| {
        s.agent.refresh(&mut s.tables);
        0
    })
}

/// The fetch entry point: the agent reads what the values of `pmidlist`
/// need ([`Callbacks::prepare_fetch`]), then `pmdaFetch` walks the metrics
/// and their instances, calling [`fetch_cb`] for each value.
///
/// # Safety
/// libpcp_pmda passes `numpmid` PMIDs at `pmidlist`, its out pointer and
/// the agent's pmdaExt, valid for the call.
unsafe extern "C" fn fetch_pdu_cb(
    numpmid: c_int,
    pmidlist: *mut pmID,
    resp: *mut *mut Opaque,
    ext: *mut pmdaExt,
) -> c_int {
    let pmids: &[pmID] = match usize::try_from(numpmid) {
        // SAFETY: libpcp_pmda's list of numpmid PMIDs (the decoded PDU),
        // valid and unchanged for the call.
        Ok(n) if n > 0 && !pmidlist.is_null() => unsafe { std::slice::from_raw_parts(pmidlist, n) },
        _ => &[],
    };
    let mut pcp = None;
    let st = with_served("fetch", |s| {
        pcp = Some(s.tables.pcp);
        s.agent.prepare_fetch(pmids, &mut s.tables);
        0
    });
    let Some(pcp) = pcp else { return st };
    // Outside with_served: pmdaFetch calls fetch_cb, which takes the agent
    // again.
    // SAFETY: the arguments libpcp_pmda passed, unchanged.
    unsafe { (pcp.pmdaFetch)(numpmid, pmidlist, resp, ext) }
}

/// # Safety
/// libpcp_pmda passes an entry of the metric table it got from [`Tables`]
/// and an atom to fill, both valid for the call.
unsafe extern "C" fn fetch_cb(m: *mut pmdaMetric, inst: c_uint, atom: *mut pmAtomValue) -> c_int {
    with_served("fetch", |s| {
        // SAFETY: as the function's contract says.
        let (m, atom) = unsafe { (&*m, &mut *atom) };
        match s.agent.value(m.m_user as usize, inst) {
            Err(e) => e,
            Ok(None) => PMDA_FETCH_NOVALUES,
            Ok(Some(v)) => {
                match v {
                    Value::U32(x) => atom.ul = x,
                    // The 8 bytes are the same for PM_TYPE_64 and PM_TYPE_U64.
                    Value::U64(x) => atom.ull = x,
                    Value::F64(x) => atom.d = x,
                    // Static: kept by the agent (see Value).
                    Value::Str(p) => atom.cp = p.as_ptr(),
                }
                PMDA_FETCH_STATIC
            }
        }
    })
}

/// # Safety
/// `buf` is libpcp_pmda's out pointer, valid for the call.
unsafe extern "C" fn text_cb(
    ident: c_int,
    kind: c_int,
    buf: *mut *mut c_char,
    _: *mut pmdaExt,
) -> c_int {
    with_served("text", |s| match s.agent.text(ident, kind) {
        Some(t) => {
            // SAFETY: buf is valid for the call (the function's contract);
            // the text lives in the agent until its next change, which only
            // a later callback makes, and libpcp_pmda sends it before that
            // (pmdaText's contract is the same).
            unsafe { *buf = t.as_ptr() as *mut c_char };
            0
        }
        None => PM_ERR_TEXT,
    })
}

/// The name libpcp_pmda passed, as text; `None` for a null or non-UTF-8
/// one (no metric has such a name).
///
/// # Safety
/// `name` is null or a NUL-terminated string valid for the call.
unsafe fn name_arg<'a>(name: *const c_char) -> Option<&'a str> {
    if name.is_null() {
        return None;
    }
    // SAFETY: non-null and NUL-terminated (the caller's promise).
    unsafe { CStr::from_ptr(name) }.to_str().ok()
}

/// # Safety
/// libpcp_pmda passes a metric name and an out pointer, valid for the call.
unsafe extern "C" fn pmid_cb(name: *const c_char, pmid: *mut pmID, _: *mut pmdaExt) -> c_int {
    // SAFETY: libpcp_pmda passes a metric name valid for the call.
    let name = unsafe { name_arg(name) };
    with_served("pmid", |s| {
        match name.and_then(|n| s.agent.pmid(n)) {
            Some(p) => {
                // SAFETY: libpcp_pmda's out pointer, valid for the call.
                unsafe { *pmid = p };
                0
            }
            None => PM_ERR_NAME,
        }
    })
}

/// # Safety
/// `names` is libpcp_pmda's out pointer, valid for the call.
unsafe extern "C" fn name_cb(pmid: pmID, names: *mut *mut *mut c_char, _: *mut pmdaExt) -> c_int {
    with_served("name", |s| {
        let Some(name) = s.agent.name(pmid) else {
            return PM_ERR_PMID;
        };
        match NameList::new([name]) {
            Ok(list) => {
                // SAFETY: libpcp_pmda's out pointer, valid for the call; it
                // frees the list with one free().
                unsafe { *names = list.into_raw() };
                1
            }
            Err(_) => PM_ERR_GENERIC,
        }
    })
}

/// # Safety
/// libpcp_pmda passes a name and two out pointers, valid for the call.
unsafe extern "C" fn children_cb(
    name: *const c_char,
    traverse: c_int,
    kids: *mut *mut *mut c_char,
    status: *mut *mut c_int,
    _: *mut pmdaExt,
) -> c_int {
    // SAFETY: libpcp_pmda passes a name valid for the call.
    let name = unsafe { name_arg(name) };
    with_served("children", |s| {
        // SAFETY: libpcp_pmda's out pointers, valid for the call; they are
        // set (to null at worst) so that nothing stale is freed.
        unsafe {
            *kids = std::ptr::null_mut();
            *status = std::ptr::null_mut();
        }
        let Some(found) = name.and_then(|n| s.agent.children(n, traverse != 0)) else {
            return PM_ERR_NAME;
        };
        let list = match NameList::new(found.iter().map(|c| c.name)) {
            Ok(l) => l,
            Err(_) => return PM_ERR_GENERIC,
        };
        // On an error, `list` is dropped, which frees it.
        let st = match StatusList::new(found.iter().map(|c| c.leaf)) {
            Ok(s) => s,
            Err(_) => return PM_ERR_GENERIC,
        };
        // SAFETY: as above; libpcp_pmda frees both.
        unsafe {
            *kids = list.into_raw();
            *status = st.into_raw();
        }
        found.len() as c_int
    })
}
