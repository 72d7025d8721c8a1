//! The agent behind libpcp_pmda's callbacks. libpcp_pmda runs the protocol
//! with pmcd (`pmdaMain`) and calls back into here; this module keeps the
//! tables it reads (metrics, instance domains, the dynamic namespace) in
//! step with the segment, and answers for values and help text.
//!
//! Every callback is wrapped so that no panic unwinds into C: a panic is
//! logged and the request fails with `PM_ERR_GENERIC`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

use crate::catalog::{self, CounterNames, Indom, Kind, Metric, INDOMS};
use crate::ffi::*;
use crate::source::Source;

/// The agent's state; libpcp_pmda holds pointers into its tables.
pub struct Agent {
    pcp: &'static Pcp,
    ext: *mut pmdaExt,
    domain: u32,
    source: Source,
    metrics: Vec<Metric>,
    /// The table handed to libpcp_pmda (`m_user` = index into `metrics`).
    table: Vec<pmdaMetric>,
    indoms: Box<[pmdaIndom; 3]>,
    insts: [Vec<pmdaInstid>; 3],
    inst_names: [Vec<CString>; 3],
    /// Instance id → (aggregation, region) of the current reading.
    regions: HashMap<c_int, (usize, usize)>,
    streams: HashMap<c_int, usize>,
    stream_ids: HashMap<(u64, u64), u32>,
    tree: *mut pmdaNameSpace,
    texts: HashMap<pmID, (CString, CString)>,
    indom_texts: Vec<(CString, CString)>,
    names: CounterNames,
    key: Option<(u64, u64, usize)>,
    /// What the instance domains were built from.
    instances_key: Option<InstancesKey>,
    abi: CString,
    path: CString,
}

/// The CPU count and each DAMON stream's (monitor, target, regions).
type InstancesKey = (usize, Vec<(u64, u64, usize)>);

thread_local! {
    static AGENT: RefCell<Option<Agent>> = const { RefCell::new(None) };
}

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).expect("NULs replaced")
}

impl Agent {
    fn log(pcp: &Pcp, level: c_int, msg: &str) {
        let m = cstring(msg);
        // SAFETY: a "%s" format with one valid C string argument.
        unsafe { (pcp.pmNotifyErr)(level, c"%s".as_ptr(), m.as_ptr()) };
    }

    /// Re-reads the segment; rebuilds the tables if its contents changed.
    fn refresh(&mut self) {
        let pcp = self.pcp;
        self.source.refresh(&mut |m| Agent::log(pcp, LOG_INFO, &m));
        let r = &self.source.reading;
        let key = r.info.as_ref().map(|i| {
            (
                i.header.epoch,
                r.snapshot.generation,
                r.snapshot.instances.len(),
            )
        });
        if key != self.key || self.metrics.is_empty() {
            self.key = key;
            if let Some(i) = &self.source.reading.info {
                self.abi = cstring(&format!("{}.{}", i.header.abi_major, i.header.abi_minor));
            }
            self.rebuild_metrics();
        }
        // Instance domains change with the CPUs and the DAMON streams and
        // their region counts: rebuilt then, not at every request.
        let r = &self.source.reading;
        let instances = (
            r.info.as_ref().map_or(0, |i| i.header.nr_cpus),
            r.damon
                .iter()
                .map(|a| (a.monitor_id, a.target_id, a.regions.len()))
                .collect::<Vec<_>>(),
        );
        if self.instances_key.as_ref() != Some(&instances) {
            self.instances_key = Some(instances);
            self.rebuild_instances();
        }
    }

    fn rebuild_metrics(&mut self) {
        let mut metrics = catalog::fixed(self.domain);
        let (counters, left_out) = catalog::counters(
            self.domain,
            &self.source.reading.snapshot.instances,
            &mut self.names,
        );
        if !left_out.is_empty() {
            Agent::log(
                self.pcp,
                LOG_ERR,
                &format!(
                    "{} counters left out: the agent named {} already; restart it",
                    left_out.len(),
                    catalog::MAX_COUNTERS
                ),
            );
        }
        metrics.extend(counters);
        self.table = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| pmdaMetric {
                m_user: i as *mut c_void,
                m_desc: pmDesc {
                    pmid: m.pmid,
                    type_: m.type_,
                    indom: m
                        .indom
                        .map_or(PM_INDOM_NULL, |d| indom(self.domain, d as u32)),
                    sem: m.sem,
                    units: m.units,
                },
            })
            .collect();
        self.texts = metrics
            .iter()
            .map(|m| (m.pmid, (cstring(&m.oneline), cstring(&m.help))))
            .collect();
        // The namespace below "perfabi", built anew.
        let mut tree = std::ptr::null_mut();
        // SAFETY: pmdaTreeCreate fills `tree` with a new namespace it owns.
        if unsafe { (self.pcp.pmdaTreeCreate)(&mut tree) } >= 0 {
            for m in &metrics {
                let n = cstring(&m.name);
                // SAFETY: tree is live; n is a valid C string it copies.
                unsafe { (self.pcp.pmdaTreeInsert)(tree, m.pmid, n.as_ptr()) };
            }
            // SAFETY: tree is live and complete.
            unsafe { (self.pcp.pmdaTreeRebuildHash)(tree, metrics.len() as c_int) };
            if !self.tree.is_null() {
                // SAFETY: the old tree is no longer referenced by anyone.
                unsafe { (self.pcp.pmdaTreeRelease)(self.tree) };
            }
            self.tree = tree;
        }
        self.metrics = metrics;
        if !self.ext.is_null() {
            // SAFETY: ext is the agent's pmdaExt; the table lives in self
            // until the next rehash replaces it.
            unsafe {
                (self.pcp.pmdaRehash)(self.ext, self.table.as_mut_ptr(), self.table.len() as c_int)
            };
        }
    }

    fn rebuild_instances(&mut self) {
        let r = &self.source.reading;
        let mut sets: [Vec<(c_int, String)>; 3] = Default::default();
        let nr_cpus = r.info.as_ref().map_or(0, |i| i.header.nr_cpus);
        sets[Indom::Cpu as usize] = (0..nr_cpus)
            .map(|c| (c as c_int, format!("cpu{c}")))
            .collect();
        self.regions.clear();
        self.streams.clear();
        for (ai, a) in r.damon.iter().enumerate() {
            let next = self.stream_ids.len() as u32;
            let sid = *self
                .stream_ids
                .entry((a.monitor_id, a.target_id))
                .or_insert(next);
            let stream = format!("kdamond{}/target{}", a.monitor_id, a.target_id);
            let id = sid as c_int;
            sets[Indom::Stream as usize].push((id, stream.clone()));
            self.streams.insert(id, ai);
            for ri in 0..a.regions.len().min(1 << 20) {
                let id = ((sid & 0x7ff) << 20 | ri as u32) as c_int;
                sets[Indom::Region as usize].push((id, format!("{stream}/region{ri}")));
                self.regions.insert(id, (ai, ri));
            }
        }
        for (i, set) in sets.into_iter().enumerate() {
            self.inst_names[i] = set.iter().map(|(_, n)| cstring(n)).collect();
            self.insts[i] = set
                .iter()
                .zip(&self.inst_names[i])
                .map(|((id, _), n)| pmdaInstid {
                    i_inst: *id,
                    i_name: n.as_ptr() as *mut c_char,
                })
                .collect();
            self.indoms[i].it_numinst = self.insts[i].len() as c_int;
            self.indoms[i].it_set = self.insts[i].as_mut_ptr();
        }
    }

    /// The value of metric `idx` for instance `inst`.
    fn value(&self, idx: usize, inst: c_uint, atom: &mut pmAtomValue) -> c_int {
        let Some(m) = self.metrics.get(idx) else {
            return PM_ERR_PMID;
        };
        let r = &self.source.reading;
        let info = r.info.as_ref();
        let s = &r.snapshot;
        let slot_value = |cpu: usize, slot: u32| {
            (slot < s.slots as u32 && cpu < s.nr_cpus)
                .then(|| s.values[cpu * s.slots + slot as usize])
        };
        let region = || {
            self.regions.get(&(inst as c_int)).and_then(|&(a, i)| {
                let a = r.damon.get(a)?;
                Some((a, a.regions.get(i)?))
            })
        };
        let stream = || {
            self.streams
                .get(&(inst as c_int))
                .and_then(|&a| r.damon.get(a))
        };
        enum V {
            U32(u32),
            U64(u64),
            F64(f64),
            Str(*const c_char),
        }
        let v = match m.kind {
            Kind::Available => Some(V::U32(info.is_some() as u32)),
            Kind::Path => Some(V::Str(self.path.as_ptr())),
            Kind::BusyReads => Some(V::U64(self.source.busy)),
            Kind::StaleReads => Some(V::U64(self.source.stale)),
            Kind::Remaps => Some(V::U64(self.source.remaps)),
            _ if info.is_none() => None,
            Kind::AbiVersion => Some(V::Str(self.abi.as_ptr())),
            Kind::Epoch => info.map(|i| V::U64(i.header.epoch)),
            Kind::Generation => info.map(|i| V::U64(i.header.generation)),
            Kind::WriterAlive => info.map(|i| {
                V::U32(matches!(
                    i.liveness,
                    perfabi_reader::Liveness::Alive | perfabi_reader::Liveness::Kernel
                ) as u32)
            }),
            Kind::WriterPid => info.map(|i| V::U32(i.header.writer_pid as u32)),
            Kind::OwnerUid => info.map(|i| V::U32(i.owner)),
            Kind::NrCpus => info.map(|i| V::U32(i.header.nr_cpus as u32)),
            Kind::NrCounters => Some(V::U32(s.instances.len() as u32)),
            Kind::NrStreams => Some(V::U32(r.damon.len() as u32)),
            Kind::DroppedRegions => Some(V::U64(r.damon_dropped)),
            Kind::NrRegions => stream().map(|a| V::U32(a.regions.len() as u32)),
            Kind::Aggregation => stream().map(|a| V::U64(a.aggregation)),
            Kind::SampleUs => stream().map(|a| V::U32(a.intervals.sample_us)),
            Kind::AggrUs => stream().map(|a| V::U32(a.intervals.aggr_us)),
            Kind::RegionStart => region().map(|(_, g)| V::U64(g.start)),
            Kind::RegionEnd => region().map(|(_, g)| V::U64(g.end)),
            Kind::RegionSize => region().map(|(_, g)| V::U64(g.end.saturating_sub(g.start))),
            Kind::RegionNrAccesses => region().map(|(_, g)| V::U32(g.nr_accesses)),
            Kind::RegionAge => region().map(|(_, g)| V::U32(g.age)),
            Kind::RegionFrequency => region().map(|(a, g)| V::F64(a.frequency(g))),
            Kind::PerCpu(slot) => slot_value(inst as usize, slot).map(V::U64),
            Kind::Total(slot) => (0..s.nr_cpus)
                .map(|c| slot_value(c, slot))
                .try_fold(0u64, |t, v| v.map(|v| t.wrapping_add(v)))
                .map(V::U64),
        };
        match v {
            None => PMDA_FETCH_NOVALUES,
            Some(v) => {
                match v {
                    V::U32(x) => atom.ul = x,
                    // The 8 bytes are the same for PM_TYPE_64 and PM_TYPE_U64.
                    V::U64(x) => atom.ull = x,
                    V::F64(x) => atom.d = x,
                    V::Str(p) => atom.cp = p,
                }
                PMDA_FETCH_STATIC
            }
        }
    }

    fn text(&self, ident: c_int, kind: c_int) -> Option<*const c_char> {
        let pick = |t: &(CString, CString)| {
            if kind & PM_TEXT_ONELINE != 0 {
                t.0.as_ptr()
            } else {
                t.1.as_ptr()
            }
        };
        if kind & PM_TEXT_PMID != 0 {
            return self.texts.get(&(ident as pmID)).map(pick);
        }
        if kind & PM_TEXT_INDOM != 0 {
            let serial = (ident as u32) & 0x3f_ffff;
            return self.indom_texts.get(serial as usize).map(pick);
        }
        None
    }
}

/// Runs `f` on the agent, turning a panic into a logged `PM_ERR_GENERIC`.
fn with_agent(what: &str, f: impl FnOnce(&mut Agent) -> c_int) -> c_int {
    let r = catch_unwind(AssertUnwindSafe(|| {
        AGENT.with(|a| match a.try_borrow_mut() {
            Ok(mut a) => a.as_mut().map_or(PM_ERR_GENERIC, f),
            Err(_) => PM_ERR_GENERIC,
        })
    }));
    r.unwrap_or_else(|_| {
        eprintln!("pmdaperfabi: internal error (panic) in {what}; the request failed");
        PM_ERR_GENERIC
    })
}

unsafe extern "C" fn check_cb() -> c_int {
    with_agent("refresh", |a| {
        a.refresh();
        0
    })
}

unsafe extern "C" fn fetch_cb(m: *mut pmdaMetric, inst: c_uint, atom: *mut pmAtomValue) -> c_int {
    with_agent("fetch", |a| {
        // SAFETY: libpcp_pmda passes an entry of the table it got from us
        // and an atom to fill, both valid for this call.
        let (m, atom) = unsafe { (&*m, &mut *atom) };
        a.value(m.m_user as usize, inst, atom)
    })
}

unsafe extern "C" fn text_cb(
    ident: c_int,
    kind: c_int,
    buf: *mut *mut c_char,
    _: *mut pmdaExt,
) -> c_int {
    with_agent("text", |a| match a.text(ident, kind) {
        Some(p) => {
            // SAFETY: buf is libpcp_pmda's out pointer; the text lives in the
            // agent until its next rebuild (pmdaText's contract is the same).
            unsafe { *buf = p as *mut c_char };
            0
        }
        None => PM_ERR_TEXT,
    })
}

unsafe extern "C" fn pmid_cb(name: *const c_char, pmid: *mut pmID, _: *mut pmdaExt) -> c_int {
    // SAFETY: arguments from libpcp_pmda, passed through; the tree is
    // live (and was brought up to date by the check callback).
    with_agent("pmid", |a| unsafe {
        (a.pcp.pmdaTreePMID)(a.tree, name, pmid)
    })
}

unsafe extern "C" fn name_cb(pmid: pmID, names: *mut *mut *mut c_char, _: *mut pmdaExt) -> c_int {
    // SAFETY: as pmid_cb.
    with_agent("name", |a| unsafe {
        (a.pcp.pmdaTreeName)(a.tree, pmid, names)
    })
}

unsafe extern "C" fn children_cb(
    name: *const c_char,
    traverse: c_int,
    kids: *mut *mut *mut c_char,
    status: *mut *mut c_int,
    _: *mut pmdaExt,
) -> c_int {
    // SAFETY: as pmid_cb.
    with_agent("children", |a| unsafe {
        (a.pcp.pmdaTreeChildren)(a.tree, name, traverse, kids, status)
    })
}

/// Runs the agent as a daemon PMDA on stdin/stdout (pmcd's pipe); returns
/// when pmcd closes the pipe.
pub fn run(
    pcp: &'static Pcp,
    domain: u32,
    logfile: &str,
    segment: &Path,
    trust: perfabi_reader::Trust,
) -> Result<(), String> {
    let name = c"pmdaperfabi";
    let log = CString::new(logfile).map_err(|_| "--logfile contains a NUL byte".to_string())?;
    // SAFETY: plain calls with valid C strings; libpcp copies them.
    unsafe { (pcp.pmSetProgname)(name.as_ptr()) };
    // SAFETY: an all-zero pmdaInterface is what pmdaDaemon expects to fill.
    let dispatch: &'static mut pmdaInterface = Box::leak(Box::new(unsafe { std::mem::zeroed() }));
    let log: &'static CStr = Box::leak(log.into_boxed_c_str());
    // SAFETY: dispatch is a valid, 'static pmdaInterface; strings are 'static.
    unsafe {
        (pcp.pmdaDaemon)(
            dispatch,
            PMDA_INTERFACE_4,
            c"perfabi".as_ptr(),
            domain as c_int,
            log.as_ptr(),
            std::ptr::null(),
        );
    }
    if dispatch.status < 0 {
        return Err(format!("pmdaDaemon: {}", pcp.err_str(dispatch.status)));
    }
    // SAFETY: dispatch was set up by pmdaDaemon.
    unsafe { (pcp.pmdaOpenLog)(dispatch) };
    dispatch.four.text = Some(text_cb);
    dispatch.four.pmid = Some(pmid_cb);
    dispatch.four.name = Some(name_cb);
    dispatch.four.children = Some(children_cb);
    // SAFETY: dispatch is set up; the callbacks are 'static functions.
    unsafe {
        (pcp.pmdaSetFlags)(dispatch, PMDA_EXT_FLAG_HASHED);
        (pcp.pmdaSetFetchCallBack)(dispatch, fetch_cb);
        (pcp.pmdaSetCheckCallBack)(dispatch, check_cb);
    }
    let mut agent = Agent {
        pcp,
        ext: std::ptr::null_mut(),
        domain,
        source: Source::new(segment, trust),
        metrics: Vec::new(),
        table: Vec::new(),
        indoms: Box::new(INDOMS.map(|d| pmdaIndom {
            it_indom: indom(domain, d as u32),
            it_numinst: 0,
            it_set: std::ptr::null_mut(),
        })),
        insts: Default::default(),
        inst_names: Default::default(),
        regions: HashMap::new(),
        streams: HashMap::new(),
        stream_ids: HashMap::new(),
        tree: std::ptr::null_mut(),
        texts: HashMap::new(),
        indom_texts: INDOMS
            .iter()
            .map(|d| (cstring(d.help().0), cstring(d.help().1)))
            .collect(),
        names: CounterNames::default(),
        key: None,
        instances_key: None,
        abi: cstring(""),
        path: cstring(&segment.display().to_string()),
    };
    agent.refresh();
    Agent::log(
        pcp,
        LOG_INFO,
        &format!("serving {} (domain {domain})", segment.display()),
    );
    // SAFETY: the tables live in the agent, which lives (in AGENT) for the
    // rest of the process; pmdaInit keeps pointers to them.
    unsafe {
        (pcp.pmdaInit)(
            dispatch,
            agent.indoms.as_mut_ptr(),
            3,
            agent.table.as_mut_ptr(),
            agent.table.len() as c_int,
        );
    }
    if dispatch.status < 0 {
        return Err(format!("pmdaInit: {}", pcp.err_str(dispatch.status)));
    }
    agent.ext = dispatch.four.ext;
    AGENT.with(|a| *a.borrow_mut() = Some(agent));
    // SAFETY: dispatch is initialised; pmdaMain serves pmcd until EOF.
    unsafe {
        (pcp.pmdaConnect)(dispatch);
        (pcp.pmdaMain)(dispatch);
    }
    Ok(())
}
