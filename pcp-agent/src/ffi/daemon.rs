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
    /// The index of each metric of the fetch last prepared (of its PMIDs,
    /// in order): what [`Callbacks::value`] takes; `None` for a PMID that
    /// is no metric.
    fn fetch_metrics(&self) -> &[Option<usize>];
    /// The value of the `k`th PMID of the fetch last prepared, metric
    /// `metric`, which has no instance domain: [`Callbacks::value`]'s for
    /// `PM_IN_NULL` (an agent may make it faster).
    fn fetch_value(&self, k: usize, metric: usize) -> Result<Option<Value<'_>>, c_int> {
        let _ = k;
        self.value(metric, PM_IN_NULL as c_uint)
    }
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
#[derive(Clone, Copy, Debug, PartialEq)]
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

impl Value<'_> {
    /// The atom a fetch callback fills with the value (a string by
    /// pointer). A number sets all 8 bytes (a `U32` zero-extended: its `ul`, the
    /// low 4 on little-endian x86_64, is the value), so libpcp reading the
    /// atom by the metric's type never reads uninitialised bytes.
    pub fn atom(self) -> pmAtomValue {
        const _: () = assert!(cfg!(target_endian = "little"));
        match self {
            Value::Str(p) => pmAtomValue { cp: p.as_ptr() },
            // The 8 bytes are the same for PM_TYPE_64 and PM_TYPE_U64, and
            // a double's bits.
            Value::U32(_) | Value::U64(_) | Value::F64(_) => pmAtomValue {
                ull: self.bits().unwrap_or_default(),
            },
        }
    }

    /// The value's 8 bytes as a number (a `U32` zero-extended, an `F64`'s
    /// bits), which [`FetchResult`] stores by the metric's type without
    /// reading a union. `None` for a string.
    fn bits(self) -> Option<u64> {
        match self {
            Value::U32(x) => Some(u64::from(x)),
            Value::U64(x) => Some(x),
            Value::F64(x) => Some(x.to_bits()),
            Value::Str(_) => None,
        }
    }
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

    /// The metric table: entry `i` describes the metric the agent knows
    /// as `i`.
    pub fn metrics(&self) -> &[pmdaMetric] {
        &self.metrics
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
        // SAFETY: ext is the agent's pmdaExt, set up by pmdaInit.
        let free_result = unsafe { (*tables.ext).e_resultCallBack };
        // SAFETY: dispatch is initialised; result_cb is a 'static function.
        unsafe { (pcp.pmdaSetResultCallBack)(dispatch, result_cb) };
        SERVED.with(|s| {
            *s.borrow_mut() = Some(Served {
                agent: Box::new(agent),
                tables,
                fetch: FetchResult::default(),
                free_result,
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
    /// The answer to the last fetch.
    fetch: FetchResult,
    /// libpcp_pmda's own result callback (`__pmFreeResultValues`): frees
    /// what `pmdaFetch` made.
    free_result: Option<ResultCallBack>,
}

/// Where a fetched PMID's value set is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Place {
    /// `FetchResult::sets[k]`: made by the agent.
    Own(usize),
    /// The `k`th of `FetchResult::walk`: made by `pmdaFetch`.
    Walked(usize),
}

/// The answer to a fetch, made by the agent itself for the metrics without
/// instance domain: the `pmResult`, the value sets and the value blocks
/// each in one buffer, reused from fetch to fetch, so that a fetch
/// allocates nothing once the buffers have held as many values. It is the
/// answer `pmdaFetch` would give (value formats, errors, value blocks as
/// `__pmStuffValue` makes them) without its two `malloc`s and `free`s per
/// value, its look-up of every PMID, and a callback per value. Metrics
/// with an instance domain are left to `pmdaFetch`, which walks their
/// instances as the client's profile says; their value sets are taken
/// into the answer, and freed by libpcp_pmda's own callback once it was
/// sent (by the agent's result callback).
#[derive(Default)]
pub struct FetchResult {
    /// `pmResult`: `struct timeval` (2 words), `numpmid` (1 word), then a
    /// value set pointer per PMID.
    result: Vec<u64>,
    /// The value sets made here.
    sets: Vec<pmValueSet>,
    /// Per set, where its value block starts in `blocks` (`usize::MAX`:
    /// none, the value is in place or there is none).
    block_at: Vec<usize>,
    /// The value blocks, 8-byte aligned (a 64-bit value: 2 words).
    blocks: Vec<u64>,
    /// Per PMID of the fetch, where its value set is.
    places: Vec<Place>,
    /// The PMIDs left to `pmdaFetch`.
    walk: Vec<pmID>,
    /// `pmdaFetch`'s result for `walk` while the answer is being sent.
    walked: Option<*mut Opaque>,
}

impl FetchResult {
    /// Makes the value sets of `pmids` whose metrics (`index[k]` is the
    /// metric of `pmids[k]` in `metrics`, the table libpcp_pmda has) have
    /// no instance domain, asking `agent` for their values; lists the
    /// others in `walk`, for `pmdaFetch` (true if there are any).
    pub fn build(
        &mut self,
        pmids: &[pmID],
        index: &[Option<usize>],
        agent: &dyn Callbacks,
        metrics: &[pmdaMetric],
    ) -> bool {
        // The pmResult of an earlier finish points into the buffers
        // cleared here: it is void from now on.
        self.result.clear();
        self.sets.clear();
        self.block_at.clear();
        self.blocks.clear();
        self.places.clear();
        self.walk.clear();
        self.walked = None;
        for (k, &pmid) in pmids.iter().enumerate() {
            let desc = index
                .get(k)
                .copied()
                .flatten()
                .and_then(|i| Some((i, metrics.get(i)?.m_desc)));
            let (numval, valfmt, lval, block) = match desc {
                None => (PM_ERR_PMID, PM_VAL_INSITU, 0, usize::MAX),
                Some((_, d)) if d.indom != PM_INDOM_NULL => {
                    self.places.push(Place::Walked(self.walk.len()));
                    self.walk.push(pmid);
                    continue;
                }
                Some((i, d)) => match agent.fetch_value(k, i) {
                    Err(e) => (e, PM_VAL_INSITU, 0, usize::MAX),
                    Ok(None) => (0, PM_VAL_INSITU, 0, usize::MAX),
                    Ok(Some(v)) => match self.stuff(v, d.type_) {
                        Ok((valfmt, lval, block)) => (1, valfmt, lval, block),
                        Err(e) => (e, PM_VAL_INSITU, 0, usize::MAX),
                    },
                },
            };
            self.places.push(Place::Own(self.sets.len()));
            self.block_at.push(block);
            self.sets.push(pmValueSet {
                pmid,
                numval,
                valfmt,
                vlist: [pmValue {
                    inst: PM_IN_NULL,
                    value: pmValueUnion { lval },
                }],
            });
        }
        !self.walk.is_empty()
    }

    /// `v` as `__pmStuffValue` stores a value of type `type_` (reading the
    /// atom `v` fills as the fetch callback does): in place, or in a value
    /// block appended to `blocks`. Returns (valfmt, lval, block start).
    fn stuff(&mut self, v: Value<'_>, type_: c_int) -> Result<(c_int, c_int, usize), c_int> {
        let body: &[u8] = match type_ {
            PM_TYPE_32 | PM_TYPE_U32 => {
                // The low 4 bytes, as C reads the atom's `ul` (x86_64 is
                // little-endian).
                let ul = v.bits().ok_or(PM_ERR_TYPE)? as u32;
                return Ok((PM_VAL_INSITU, ul as c_int, usize::MAX));
            }
            PM_TYPE_64 | PM_TYPE_U64 | PM_TYPE_DOUBLE => {
                let v = v.bits().ok_or(PM_ERR_TYPE)?;
                // The block's bytes in two words, without a byte copy: the
                // 4 header bytes, the value's 8, 4 of padding (x86_64 is
                // little-endian: a word's first bytes are its low bits).
                const _: () = assert!(cfg!(target_endian = "little"));
                let head = u64::from(value_block_header(PM_VAL_HDR_SIZE + 8, type_));
                let at = self.blocks.len();
                self.blocks.extend([head | v << 32, v >> 32]);
                return Ok((PM_VAL_DPTR, 0, at));
            }
            // The string itself, not the atom's pointer.
            PM_TYPE_STRING => match v {
                Value::Str(s) => s.to_bytes_with_nul(),
                _ => return Err(PM_ERR_TYPE),
            },
            _ => return Err(PM_ERR_TYPE),
        };
        // The header, then the body, in whole words (zero padded).
        let vlen = PM_VAL_HDR_SIZE + body.len();
        let at = self.blocks.len();
        let mut word = [0u8; 8];
        word[..PM_VAL_HDR_SIZE].copy_from_slice(&value_block_header(vlen, type_).to_ne_bytes());
        let first = body.len().min(8 - PM_VAL_HDR_SIZE);
        word[PM_VAL_HDR_SIZE..PM_VAL_HDR_SIZE + first].copy_from_slice(&body[..first]);
        self.blocks.push(u64::from_ne_bytes(word));
        for chunk in body[first..].chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.blocks.push(u64::from_ne_bytes(word));
        }
        Ok((PM_VAL_DPTR, 0, at))
    }

    /// The `pmResult` of the fetch built, with `walked` (`pmdaFetch`'s
    /// result for `walk`, if it was asked) taken in; kept
    /// (and `walked` with it) until libpcp_pmda has sent it.
    ///
    /// # Safety
    /// `walked` is null or the `pmResult` `pmdaFetch` returned for exactly
    /// the PMIDs of `walk`, not yet freed.
    pub unsafe fn finish(&mut self, walked: *mut Opaque) -> *mut Opaque {
        // The blocks no longer move: point the sets at them.
        let base = self.blocks.as_mut_ptr();
        for (set, &at) in self.sets.iter_mut().zip(&self.block_at) {
            if at != usize::MAX {
                // SAFETY: `at` is the start of a block stuff() pushed into
                // `blocks`, so inside it.
                set.vlist[0].value.pval = unsafe { base.add(at) }.cast();
            }
        }
        let theirs = (!walked.is_null()).then(|| {
            // SAFETY: a pmResult (the caller's promise), whose vset array
            // starts at PM_RESULT_VSET_OFFSET (checked against the C
            // header by tests/ffi_layout.rs).
            unsafe { walked.cast::<u8>().add(PM_RESULT_VSET_OFFSET) }.cast::<*mut pmValueSet>()
        });
        self.walked = theirs.map(|_| walked);
        self.result.clear();
        self.result.extend([0, 0, self.places.len() as u64]);
        let sets = self.sets.as_mut_ptr();
        for &p in &self.places {
            let set = match (p, theirs) {
                // SAFETY: k indexes `sets` (build pushed it).
                (Place::Own(k), _) => unsafe { sets.add(k) },
                // SAFETY: pmdaFetch made one value set per PMID of `walk`,
                // in order, and k indexes `walk`.
                (Place::Walked(k), Some(v)) => unsafe { *v.add(k) },
                // pmdaFetch was not asked (build found nothing to walk).
                (Place::Walked(_), None) => std::ptr::null_mut(),
            };
            self.result.push(set as u64);
        }
        self.result.as_mut_ptr().cast()
    }

    /// After libpcp_pmda sent `result`: `pmdaFetch`'s part to free, if
    /// `result` is this answer (else `result` itself, not the agent's).
    fn sent(&mut self, result: *mut Opaque) -> Option<*mut Opaque> {
        if result.cast::<u64>() == self.result.as_mut_ptr() {
            self.walked.take()
        } else {
            Some(result)
        }
    }

    /// [`finish`](Self::finish) of an answer made here alone, with no
    /// `pmResult` of `pmdaFetch` to merge: the `pmResult` to send.
    pub fn finish_own(&mut self) -> *mut Opaque {
        // SAFETY: a null `walked` is always allowed (finish's contract).
        unsafe { self.finish(std::ptr::null_mut()) }
    }

    /// The values of the `pmResult` the last [`finish_own`](Self::finish_own)
    /// made, read through its pointers as libpcp_pmda sends them, one per
    /// PMID: `Ok(value)` of a 64-bit value, `Err(numval)` of a value set
    /// without one (or with another kind of value). Empty if there is no
    /// such `pmResult` (none made since the last build, or one holding
    /// `pmdaFetch`'s sets). For tests: it allocates only to grow `out`.
    pub fn sent_values(&self, out: &mut Vec<Result<u64, c_int>>) {
        out.clear();
        if self.walked.is_some() || self.result.len() < 3 {
            return;
        }
        let n = self.result[2] as usize;
        for &p in self.result.iter().skip(3).take(n) {
            // SAFETY: `result` was made by finish since the last build
            // (build clears it) and `self` is borrowed, so each pointer is
            // one of `sets`, which have not moved since.
            let set = unsafe { &*(p as *const pmValueSet) };
            if set.numval != 1 || set.valfmt != PM_VAL_DPTR {
                out.push(Err(set.numval));
                continue;
            }
            // SAFETY: as above, a PM_VAL_DPTR set made here points into
            // `blocks`, at a block of whole words, header first.
            let header = unsafe { set.vlist[0].value.pval.cast::<u32>().read() };
            if header != value_block_header(12, PM_TYPE_U64) {
                out.push(Err(set.numval));
                continue;
            }
            // SAFETY: a 64-bit value's block: 12 bytes padded to 16, the
            // value at byte 4 (not 8-byte aligned, so read unaligned).
            let v = unsafe {
                set.vlist[0]
                    .value
                    .pval
                    .cast::<u8>()
                    .add(4)
                    .cast::<u64>()
                    .read_unaligned()
            };
            out.push(Ok(v));
        }
    }

    /// The value `lval` of the `k`th PMID's value set if the agent made it
    /// with the value in place (`PM_VAL_INSITU`), for tests.
    pub fn insitu_of(&self, k: usize) -> Option<c_int> {
        let Place::Own(set) = *self.places.get(k)? else {
            return None;
        };
        let set = self.sets.get(set)?;
        // SAFETY: an in-place value: `lval` is the union's field in use.
        (set.valfmt == PM_VAL_INSITU && set.numval == 1).then(|| unsafe { set.vlist[0].value.lval })
    }

    /// The value sets of the PMIDs, in order (`None` for one left to
    /// `pmdaFetch`), for tests of [`FetchResult::build`].
    pub fn own_sets(&self) -> impl Iterator<Item = Option<&pmValueSet>> + '_ {
        self.places.iter().map(|p| match *p {
            Place::Own(k) => self.sets.get(k),
            Place::Walked(_) => None,
        })
    }

    /// The bytes of the value block of the `k`th PMID's value set (if the
    /// agent made it, with a block), header included, as
    /// [`FetchResult::finish`] points the set at them.
    pub fn block_of(&self, k: usize) -> Option<Vec<u8>> {
        let Place::Own(set) = *self.places.get(k)? else {
            return None;
        };
        let at = *self.block_at.get(set).filter(|&&a| a != usize::MAX)?;
        let bytes: Vec<u8> = self.blocks[at..]
            .iter()
            .flat_map(|w| w.to_ne_bytes())
            .collect();
        let vlen = u32::from_ne_bytes(bytes[..4].try_into().ok()?) as usize & 0x00ff_ffff;
        Some(bytes[..vlen].to_vec())
    }
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
/// need ([`Callbacks::prepare_fetch`]) and answers itself for the metrics
/// without instance domain ([`FetchResult`]); `pmdaFetch` walks the
/// instances of the others, calling [`fetch_cb`] for each value.
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
    let mut walk = None;
    let st = with_served("fetch", |s| {
        s.agent.prepare_fetch(pmids, &mut s.tables);
        let index = s.agent.fetch_metrics();
        if s.fetch.build(pmids, index, &*s.agent, &s.tables.metrics) {
            walk = Some((
                s.tables.pcp,
                s.fetch.walk.as_mut_ptr(),
                s.fetch.walk.len() as c_int,
            ));
        }
        0
    });
    if st < 0 {
        return st;
    }
    let mut walked: *mut Opaque = std::ptr::null_mut();
    if let Some((pcp, list, n)) = walk {
        // Outside with_served: pmdaFetch calls fetch_cb, which takes the
        // agent again. It does not change `walk`, which the list points
        // into.
        // SAFETY: n PMIDs at list; libpcp_pmda's out pointer and pmdaExt.
        let st = unsafe { (pcp.pmdaFetch)(n, list, &mut walked, ext) };
        if st < 0 {
            return st;
        }
    }
    with_served("fetch", |s| {
        // SAFETY: walked is null or pmdaFetch's result for s.fetch.walk,
        // just made; resp is libpcp_pmda's out pointer, and the answer
        // stays in s.fetch until result_cb is called for it.
        unsafe { *resp = s.fetch.finish(walked) };
        0
    })
}

/// libpcp_pmda's result callback: called with the answer to a fetch once
/// it was sent. The agent's own answer is kept for the next fetch; what
/// `pmdaFetch` made (taken into it, or any other result) is freed by
/// libpcp_pmda's own callback.
///
/// # Safety
/// `result` is the result a fetch returned to libpcp_pmda, sent and no
/// longer used by it.
unsafe extern "C" fn result_cb(result: *mut Opaque) {
    let mut free = None;
    with_served("fetch result", |s| {
        free = s.fetch.sent(result).zip(s.free_result);
        0
    });
    if let Some((theirs, f)) = free {
        // SAFETY: a result pmdaFetch made, sent, freed once (sent() hands
        // each out once), by the callback libpcp_pmda set for it.
        unsafe { f(theirs) };
    }
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
                // A string is static: kept by the agent (see Value).
                *atom = v.atom();
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A value handed over in a narrower or other form than the metric's
    /// type is stored from its whole number, never from bytes of the atom
    /// it did not set: a `U32` for a 64-bit metric is zero-extended, a
    /// `U64` for a 32-bit one keeps its low 4 bytes.
    #[test]
    fn values_are_stored_by_the_metric_s_type_from_all_their_bytes() {
        let mut f = FetchResult::default();
        let (fmt, _, at) = f.stuff(Value::U32(0xdead_beef), PM_TYPE_U64).unwrap();
        assert_eq!(fmt, PM_VAL_DPTR);
        let word = |f: &FetchResult, at: usize| (f.blocks[at] >> 32) | (f.blocks[at + 1] << 32);
        assert_eq!(word(&f, at), 0xdead_beef);
        let (_, _, at) = f.stuff(Value::F64(1.5), PM_TYPE_DOUBLE).unwrap();
        assert_eq!(word(&f, at), 1.5f64.to_bits());
        let (fmt, lval, _) = f.stuff(Value::U64(0x1_0000_0007), PM_TYPE_U32).unwrap();
        assert_eq!((fmt, lval), (PM_VAL_INSITU, 7));
        assert_eq!(f.stuff(Value::Str(c"x"), PM_TYPE_U64), Err(PM_ERR_TYPE));
        // SAFETY: `ull` is the field atom() sets for a number, all 8 bytes.
        assert_eq!(unsafe { Value::U32(9).atom().ull }, 9);
    }
}
