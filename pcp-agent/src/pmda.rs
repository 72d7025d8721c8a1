//! The agent behind libpcp_pmda's callbacks. libpcp_pmda runs the protocol
//! with pmcd (`pmdaMain`) and calls back into here; this module keeps the
//! tables it reads (metrics, instance domains) and the agent's own
//! namespace ([`Namespace`]) in step with the segment, and answers for
//! values and help text.
//!
//! Every callback is wrapped so that no panic unwinds into C: a panic is
//! logged and the request fails with `PM_ERR_GENERIC`.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::catalog::{self, Indom, Kind, Metric, INDOMS};
use crate::cnames;
use crate::counter_names::{self, CounterNames, MAX_COUNTERS};
use crate::damon_instances::{DamonInstances, FORGET_AFTER};
use crate::ffi::*;
use crate::indom_cache::CachedIndom;
use crate::namespace::Namespace;
use crate::source::Source;
use crate::state_dir::{self, StateDir};

/// The agent's state; libpcp_pmda holds pointers into its tables.
pub struct Agent {
    pcp: &'static Pcp,
    ext: *mut pmdaExt,
    domain: u32,
    source: Source,
    metrics: Vec<Metric>,
    /// The table handed to libpcp_pmda (`m_user` = index into `metrics`).
    table: Vec<pmdaMetric>,
    /// PMID → index into `metrics`.
    by_pmid: HashMap<pmID, usize>,
    /// Every metric name below `perfabi`.
    namespace: Namespace,
    indoms: Box<[pmdaIndom; 3]>,
    /// The CPU instance domain (the others are libpcp_pmda's caches).
    cpu_insts: Vec<pmdaInstid>,
    cpu_names: Vec<CString>,
    damon: DamonInstances,
    /// The help text last handed out (libpcp_pmda copies it at once).
    text: CString,
    indom_texts: Vec<(CString, CString)>,
    names: CounterNames,
    /// Where the counter numbers are saved, if anywhere.
    state: Option<StateDir>,
    key: Option<(u64, u64, usize)>,
    /// What the instance domains were built from.
    instances_key: Option<InstancesKey>,
    /// The last problem logged about instances or saved state (logged
    /// once, not at every request).
    last_state_problem: Option<String>,
    abi: CString,
    path: CString,
}

/// The CPU count and each DAMON stream's (monitor, target, regions).
type InstancesKey = (usize, Vec<(u64, u64, usize)>);

/// The file the counter numbers are saved in, in the state folder.
fn names_file(domain: u32) -> String {
    format!("{domain}.pmids")
}

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

    /// Logs `msg` unless it is the state problem logged last.
    fn state_problem(&mut self, msg: String) {
        if self.last_state_problem.as_deref() != Some(msg.as_str()) {
            Agent::log(self.pcp, LOG_ERR, &msg);
            self.last_state_problem = Some(msg);
        }
    }

    /// Re-reads the segment; rebuilds the tables if its contents changed.
    fn refresh(&mut self) {
        let pcp = self.pcp;
        let now = Instant::now();
        self.source
            .refresh(now, &mut |m| Agent::log(pcp, LOG_INFO, &m));
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
            self.rebuild_instances(now);
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
            let file = self.state.as_ref().map_or_else(
                || "nowhere: they are not saved".to_string(),
                |s| s.path().join(names_file(self.domain)).display().to_string(),
            );
            self.state_problem(format!(
                "{} counters left out (the first: {}): the agent has numbered {MAX_COUNTERS} \
                 counter names, the most it can, and keeps their numbers for good (saved in {file}); \
                 to number the live ones anew, stop the agent, remove that file and start it \
                 (their PMIDs then change)",
                left_out.len(),
                left_out[0]
            ));
        }
        if self.names.take_changed() {
            self.save_names();
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
        self.by_pmid = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| (m.pmid, i))
            .collect();
        // The namespace below "perfabi", sorted once.
        let (namespace, rejected) =
            Namespace::new(metrics.iter().map(|m| (m.name.clone(), m.pmid)));
        if let Some(first) = rejected.first() {
            Agent::log(
                self.pcp,
                LOG_ERR,
                &format!(
                    "{} metric names left out of the namespace (the first: {first})",
                    rejected.len()
                ),
            );
        }
        self.namespace = namespace;
        self.metrics = metrics;
        if !self.ext.is_null() {
            // SAFETY: ext is the agent's pmdaExt; the table lives in self
            // until the next rehash replaces it.
            unsafe {
                (self.pcp.pmdaRehash)(self.ext, self.table.as_mut_ptr(), self.table.len() as c_int)
            };
        }
    }

    /// Saves the counter numbers, if there is a state folder.
    fn save_names(&mut self) {
        let Some(state) = &self.state else { return };
        if let Err(e) = state.write(&names_file(self.domain), &self.names.to_text()) {
            self.state_problem(format!(
                "counter numbers not saved ({e}): PMIDs of new counters may change when the agent restarts"
            ));
        }
    }

    fn rebuild_instances(&mut self, now: Instant) {
        let r = &self.source.reading;
        let nr_cpus = r.info.as_ref().map_or(0, |i| i.header.nr_cpus);
        self.cpu_names = (0..nr_cpus).map(|c| cstring(&format!("cpu{c}"))).collect();
        self.cpu_insts = self
            .cpu_names
            .iter()
            .enumerate()
            .map(|(c, n)| pmdaInstid {
                i_inst: c as c_int,
                i_name: n.as_ptr() as *mut c_char,
            })
            .collect();
        let cpu = &mut self.indoms[Indom::Cpu as usize];
        cpu.it_numinst = self.cpu_insts.len() as c_int;
        cpu.it_set = self.cpu_insts.as_mut_ptr();
        let problems = self.damon.update(&self.source.reading.damon, now);
        if let Some(first) = problems.into_iter().next() {
            self.state_problem(format!("DAMON instances: {first}"));
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
            self.damon
                .region_of
                .get(&(inst as c_int))
                .and_then(|&(a, i)| {
                    let a = r.damon.get(a)?;
                    Some((a, a.regions.get(i)?))
                })
        };
        let stream = || {
            self.damon
                .stream_of
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
            Kind::Held => Some(V::U32(self.source.held as u32)),
            Kind::HeldReads => Some(V::U64(self.source.held_reads)),
            // No segment: "try again", not an empty answer.
            _ if info.is_none() => return PM_ERR_AGAIN,
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

    /// Help text of a metric or instance domain; the pointer is valid
    /// until the next call.
    fn text(&mut self, ident: c_int, kind: c_int) -> Option<*const c_char> {
        let oneline = kind & PM_TEXT_ONELINE != 0;
        if kind & PM_TEXT_PMID != 0 {
            let m = self.metrics.get(*self.by_pmid.get(&(ident as pmID))?)?;
            let (one, long) = m.help(&self.source.reading.snapshot.instances)?;
            self.text = cstring(if oneline { &one } else { &long });
            return Some(self.text.as_ptr());
        }
        if kind & PM_TEXT_INDOM != 0 {
            let serial = (ident as u32) & 0x3f_ffff;
            let t = self.indom_texts.get(serial as usize)?;
            return Some(if oneline { t.0.as_ptr() } else { t.1.as_ptr() });
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

unsafe extern "C" fn pmid_cb(name: *const c_char, pmid: *mut pmID, _: *mut pmdaExt) -> c_int {
    // SAFETY: libpcp_pmda passes a metric name valid for the call.
    let name = unsafe { name_arg(name) };
    with_agent("pmid", |a| {
        match name.and_then(|n| a.namespace.pmid(n)) {
            Some(p) => {
                // SAFETY: libpcp_pmda's out pointer, valid for the call.
                unsafe { *pmid = p };
                0
            }
            None => PM_ERR_NAME,
        }
    })
}

unsafe extern "C" fn name_cb(pmid: pmID, names: *mut *mut *mut c_char, _: *mut pmdaExt) -> c_int {
    with_agent("name", |a| {
        let Some(name) = a.namespace.name(pmid) else {
            return PM_ERR_PMID;
        };
        match cnames::pack(std::iter::once(name)) {
            Ok(list) => {
                // SAFETY: libpcp_pmda's out pointer, valid for the call; it
                // frees the list with one free().
                unsafe { *names = list };
                1
            }
            Err(_) => PM_ERR_GENERIC,
        }
    })
}

unsafe extern "C" fn children_cb(
    name: *const c_char,
    traverse: c_int,
    kids: *mut *mut *mut c_char,
    status: *mut *mut c_int,
    _: *mut pmdaExt,
) -> c_int {
    // SAFETY: libpcp_pmda passes a name valid for the call.
    let name = unsafe { name_arg(name) };
    with_agent("children", |a| {
        // SAFETY: libpcp_pmda's out pointers, valid for the call; they are
        // set (to null at worst) so that nothing stale is freed.
        unsafe {
            *kids = std::ptr::null_mut();
            *status = std::ptr::null_mut();
        }
        let found = name.and_then(|n| {
            if traverse == 0 {
                a.namespace.children(n)
            } else {
                a.namespace.leaves(n)
            }
        });
        let Some(found) = found else {
            return PM_ERR_NAME;
        };
        let list = match cnames::pack(found.iter().map(|c| c.name)) {
            Ok(l) => l,
            Err(_) => return PM_ERR_GENERIC,
        };
        let st = match cnames::statuses(found.iter().map(|c| c.leaf)) {
            Ok(s) => s,
            Err(_) => {
                // SAFETY: `list` came from malloc (cnames::pack).
                unsafe { libc::free(list.cast()) };
                return PM_ERR_GENERIC;
            }
        };
        // SAFETY: as above; libpcp_pmda frees both.
        unsafe {
            *kids = list;
            *status = st;
        }
        found.len() as c_int
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
    let (state, names, pmda_dir) = open_state(pcp, domain);
    let now = Instant::now();
    let cache = |d: Indom| {
        let (c, problem) = CachedIndom::open(pcp, indom(domain, d as u32), pmda_dir.as_deref());
        if let Some(p) = problem {
            Agent::log(pcp, LOG_ERR, &p);
        }
        c
    };
    let damon = DamonInstances::new(
        cache(Indom::Stream),
        cache(Indom::Region),
        FORGET_AFTER,
        now,
    );
    let mut agent = Agent {
        pcp,
        ext: std::ptr::null_mut(),
        domain,
        source: Source::new(segment, trust),
        metrics: Vec::new(),
        table: Vec::new(),
        by_pmid: HashMap::new(),
        namespace: Namespace::default(),
        indoms: Box::new(INDOMS.map(|d| pmdaIndom {
            it_indom: indom(domain, d as u32),
            it_numinst: 0,
            it_set: std::ptr::null_mut(),
        })),
        cpu_insts: Vec::new(),
        cpu_names: Vec::new(),
        damon,
        text: CString::default(),
        indom_texts: INDOMS
            .iter()
            .map(|d| (cstring(d.help().0), cstring(d.help().1)))
            .collect(),
        names,
        state,
        key: None,
        instances_key: None,
        last_state_problem: None,
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

/// The agent's state folder, the counter numbers saved in it, and the
/// folder libpcp_pmda saves instance ids in (`$PCP_VAR_DIR/config/pmda`).
/// Any problem is logged, and the agent goes on without saving (or with
/// no saved numbers): its identifiers then hold for its own life only.
fn open_state(pcp: &'static Pcp, domain: u32) -> (Option<StateDir>, CounterNames, Option<PathBuf>) {
    let log = |m: String| {
        Agent::log(
            pcp,
            LOG_ERR,
            &format!("{m}; PMIDs and instance ids will not be kept across restarts"),
        )
    };
    let Some(var) = pcp.config("PCP_VAR_DIR") else {
        log("PCP_VAR_DIR is not set (no /etc/pcp.conf?)".into());
        return (None, CounterNames::default(), None);
    };
    let var = PathBuf::from(var);
    let state = match StateDir::open(&state_dir::default_path(&var)) {
        Ok(s) => s,
        Err(e) => {
            log(format!("state folder: {e}"));
            return (None, CounterNames::default(), None);
        }
    };
    let file = names_file(domain);
    let names = match state.read(&file, counter_names::MAX_TEXT) {
        Ok(None) => CounterNames::default(),
        Ok(Some(text)) => match CounterNames::from_text(&text) {
            Ok(n) => {
                Agent::log(
                    pcp,
                    LOG_INFO,
                    &format!(
                        "{} counter numbers read from {}",
                        n.len(),
                        state.path().join(&file).display()
                    ),
                );
                n
            }
            Err(e) => {
                let kept = state
                    .set_aside(&file)
                    .map_or_else(|e| format!("not kept: {e}"), |p| format!("kept as {p}"));
                Agent::log(
                    pcp,
                    LOG_ERR,
                    &format!(
                        "{}: {e}; counters are numbered anew (the file is {kept})",
                        state.path().join(&file).display()
                    ),
                );
                CounterNames::default()
            }
        },
        Err(e) => {
            log(format!("counter numbers not read: {e}"));
            return (None, CounterNames::default(), None);
        }
    };
    (Some(state), names, Some(var.join("config/pmda")))
}
