//! The agent behind libpcp_pmda's callbacks. libpcp_pmda runs the protocol
//! with pmcd (`pmdaMain`) and calls back into the agent through
//! [`ffi::daemon`](crate::ffi::daemon) ([`Callbacks`]); this module keeps
//! the tables it reads (metrics, instance domains) and the agent's own
//! namespace ([`Namespace`]) in step with the segment, and answers for
//! values, help text and labels.

use std::collections::HashMap;
use std::ffi::{c_int, c_uint, CStr, CString};
use std::path::{Path, PathBuf};
use std::time::Instant;

use perfabi_reader::Trust;
use perfabi_shm::safe_open::escape_path;

use crate::catalog::{self, Indom, Kind, Metric, Part, INDOMS};
use crate::counter_names::{self, CounterNames};
use crate::damon_instances::{DamonInstances, FORGET_AFTER};
use crate::dir_source::DirSource;
use crate::family_metrics::{self, InstanceIds, Role, Series, MAX_FAMILY_INSTANCES};
use crate::ffi::daemon::{Callbacks, Daemon, Tables, Value};
use crate::ffi::*;
use crate::indom_cache::CachedIndom;
use crate::namespace::{Child, Namespace};
use crate::source::{Source, Values};
use crate::state_dir::{self, StateDir};

/// The agent's state; the tables libpcp_pmda reads are lent to it in
/// [`Callbacks::refresh`] (metric `i` of the table is `metrics[i]`).
pub struct Agent {
    pcp: &'static Pcp,
    domain: u32,
    source: Source,
    /// The directory served instead of `source`'s segment, if the agent
    /// serves one (`--directory`).
    dir: Option<DirSource>,
    metrics: Vec<Metric>,
    /// PMID → index into `metrics`.
    by_pmid: HashMap<pmID, usize>,
    /// Every metric name below `perfabi`.
    namespace: Namespace,
    damon: DamonInstances,
    /// The help text last handed out (libpcp_pmda copies it at once).
    text: CString,
    indom_texts: Vec<(CString, CString)>,
    names: CounterNames,
    /// Instance ids of the family instance domains.
    ids: InstanceIds,
    /// The family instance domains, by serial number.
    family_indoms: HashMap<u32, FamilyIndom>,
    /// The families left out, as last logged.
    left_out: Vec<String>,
    /// Where the family numbers are saved, if anywhere.
    state: Option<StateDir>,
    key: Option<(u64, u64, usize)>,
    /// Rebuilds of the metric table so far: what a [`FetchPlan`] was made
    /// for.
    table_serial: u64,
    /// What recent fetches read, by the PMIDs they asked for.
    plans: Vec<FetchPlan>,
    /// The plan [`Agent::plan_for`] replaces next when all are current.
    next_plan: usize,
    /// The plan of the fetch last prepared.
    current_plan: Option<usize>,
    /// The CPUs the CPU instance domain lists.
    cpus_listed: Option<usize>,
    /// Each DAMON stream's (monitor, target, regions) the DAMON instance
    /// domains were made from.
    damon_key: Option<Vec<(u64, u64, usize)>>,
    /// The DAMON regions were read for the current request.
    damon_read: bool,
    /// The family values of the current fetch could be read at the
    /// generation of the metric table (else they answer "try again").
    values_ok: bool,
    /// The last problem logged about instances or saved state (logged
    /// once, not at every request).
    last_state_problem: Option<String>,
    abi: CString,
    path: CString,
    /// A directory's problems, `; ` between two (`perfabi.segment.problems`).
    problems: CString,
}

/// What a fetch of some PMIDs reads, worked out once per metric table
/// and list of PMIDs (pmcd sends a client's list unchanged at every
/// fetch): the runs of value slots of the families served, and whether a
/// DAMON metric is among them.
#[derive(Default)]
struct FetchPlan {
    /// The metric table it was made for ([`Agent::table_serial`]).
    serial: u64,
    pmids: Vec<pmID>,
    /// The metric of each PMID (its index in `metrics`).
    metrics: Vec<Option<usize>>,
    /// How each PMID's value is made, for the agent's own answer.
    recipes: Vec<Recipe>,
    /// `(first slot, slots)`, sorted, merged where they touch.
    runs: Vec<(usize, usize)>,
    damon: bool,
}

/// How the value of a fetched PMID is made: for the total of a family
/// without dimension (the most common metric by far), straight from a
/// column of the values, without the metric, family and member it
/// describes (three cache lines a value, from a cold agent); else by
/// [`Agent::value`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Recipe {
    /// Value slot `slot` summed over CPUs, or their maximum for a peak
    /// (`signed`: of i64 values).
    Column { slot: u32, max: bool, signed: bool },
    /// No value (a family without member, a part outside its words).
    NoValue,
    /// Ask [`Agent::value`].
    Call,
}

impl Recipe {
    /// The recipe of `m`, a metric of the families `families`.
    fn of(m: &Metric, families: &[perfabi::Family]) -> Recipe {
        let Kind::Family {
            family,
            part,
            per_cpu: false,
        } = m.kind
        else {
            return Recipe::Call;
        };
        if m.indom.is_some() {
            return Recipe::Call;
        }
        let Some(f) = families.get(family) else {
            return Recipe::NoValue;
        };
        let offset = match part {
            Part::Value | Part::Count => 0,
            Part::Sum => 1,
            Part::Bucket => return Recipe::Call,
        };
        match f.members.first() {
            Some(member) if offset < member.words => Recipe::Column {
                slot: member.value_slot + offset,
                max: part == Part::Value && f.kind == perfabi::Kind::Peak,
                signed: f.value_type == perfabi::ValueType::I64,
            },
            _ => Recipe::NoValue,
        }
    }
}

/// Fetch plans kept: pmlogger fetches one list per logging interval.
const MAX_PLANS: usize = 8;

impl FetchPlan {
    /// Works the plan out for `pmids`, of the metric table `serial`.
    fn make(
        &mut self,
        pmids: &[pmID],
        serial: u64,
        by_pmid: &HashMap<pmID, usize>,
        metrics: &[Metric],
        families: &[perfabi::Family],
    ) {
        self.serial = serial;
        self.pmids.clear();
        self.pmids.extend_from_slice(pmids);
        self.runs.clear();
        self.damon = false;
        self.metrics.clear();
        self.metrics
            .extend(pmids.iter().map(|p| by_pmid.get(p).copied()));
        self.recipes.clear();
        self.recipes.extend(self.metrics.iter().map(|i| {
            i.and_then(|i| metrics.get(i))
                .map_or(Recipe::Call, |m| Recipe::of(m, families))
        }));
        for &i in self.metrics.iter().flatten() {
            let Some(m) = metrics.get(i) else {
                continue;
            };
            match m.kind {
                Kind::Family { family, .. } => {
                    if let Some(f) = families.get(family) {
                        self.runs.extend(
                            f.members
                                .iter()
                                .map(|m| (m.value_slot as usize, m.words as usize)),
                        );
                    }
                }
                k => self.damon |= k.is_damon(),
            }
        }
        self.runs.sort_unstable();
        let mut kept = 0usize;
        for k in 0..self.runs.len() {
            let (src, len) = self.runs[k];
            match kept.checked_sub(1).map(|p| &mut self.runs[p]) {
                Some(last) if src <= last.0 + last.1 => {
                    last.1 = last.1.max(src + len - last.0);
                }
                _ => {
                    self.runs[kept] = (src, len);
                    kept += 1;
                }
            }
        }
        self.runs.truncate(kept);
    }
}

/// A family instance domain, as the callbacks look it up.
struct FamilyIndom {
    /// Index of the family in the snapshot's families.
    family: usize,
    role: Role,
    /// Instance id → (member index, bucket or CPU).
    by_id: HashMap<c_int, (u32, u32)>,
}

/// The file the counter numbers are saved in, in the state folder.
fn names_file(domain: u32) -> String {
    format!("{domain}.pmids")
}

fn cstring(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).expect("NULs replaced")
}

impl Agent {
    /// The agent of `segment` (believing the owners `trust` allows) for
    /// `domain`: family numbers from `names`, saved in `state` if there is
    /// one; DAMON instance ids in libpcp_pmda's instance caches, saved in
    /// `pmda_dir` if there is one. Nothing is read before the first
    /// request ([`Callbacks::refresh`]).
    pub fn new(
        pcp: &'static Pcp,
        domain: u32,
        segment: &Path,
        trust: Trust,
        state: Option<StateDir>,
        names: CounterNames,
        pmda_dir: Option<&Path>,
    ) -> Agent {
        let cache = |d: Indom| {
            let (c, problem) = CachedIndom::open(pcp, indom(domain, d as u32), pmda_dir);
            if let Some(p) = problem {
                pcp.notify(LOG_ERR, &p);
            }
            c
        };
        let damon = DamonInstances::new(
            cache(Indom::Stream),
            cache(Indom::Region),
            FORGET_AFTER,
            Instant::now(),
        );
        Agent {
            pcp,
            domain,
            source: Source::new(segment, trust),
            dir: None,
            metrics: Vec::new(),
            by_pmid: HashMap::new(),
            namespace: Namespace::default(),
            damon,
            text: CString::default(),
            indom_texts: INDOMS
                .iter()
                .map(|d| (cstring(d.help().0), cstring(d.help().1)))
                .collect(),
            names,
            ids: InstanceIds::default(),
            family_indoms: HashMap::new(),
            left_out: Vec::new(),
            state,
            key: None,
            table_serial: 0,
            plans: Vec::new(),
            next_plan: 0,
            current_plan: None,
            cpus_listed: None,
            damon_key: None,
            damon_read: false,
            values_ok: true,
            last_state_problem: None,
            abi: cstring(""),
            problems: cstring(""),
            // not raw: the path handed to libpcp, not a message
            path: cstring(&segment.display().to_string()),
        }
    }

    /// The segment as the agent reads it.
    pub fn source(&mut self) -> &mut Source {
        &mut self.source
    }

    /// Serves the directory `dir` (read as one) instead of a segment:
    /// before the first request.
    pub fn serve_directory(&mut self, dir: DirSource) {
        // not raw: the path handed to libpcp, not a message
        self.path = cstring(&dir.path().display().to_string());
        self.dir = Some(dir);
    }

    /// The families and values served: the segment's, or the directory's
    /// merged ones.
    fn snapshot(&self) -> &perfabi::Snapshot {
        match &self.dir {
            Some(d) => &d.snapshot,
            None => &self.source.reading.snapshot,
        }
    }

    /// Whether there are values to serve (a valid segment mapped, or a
    /// directory read), held or fresh.
    fn available(&self) -> bool {
        match &self.dir {
            Some(d) => d.available,
            None => self.source.reading.info.is_some(),
        }
    }

    /// The index of metric `pmid` in the metric table (what libpcp_pmda
    /// passes to [`Callbacks::value`]).
    pub fn metric_index(&self, pmid: pmID) -> Option<usize> {
        self.by_pmid.get(&pmid).copied()
    }

    /// Logs `msg` unless it is the state problem logged last.
    fn state_problem(&mut self, msg: String) {
        if self.last_state_problem.as_deref() != Some(msg.as_str()) {
            self.pcp.notify(LOG_ERR, &msg);
            self.last_state_problem = Some(msg);
        }
    }

    /// Before a request: looks at the segment; rebuilds the tables if its
    /// contents changed. Nothing else (no values, no DAMON regions: the
    /// requests that serve them read them), no allocation while the
    /// segment's metadata stays the same.
    pub fn refresh(&mut self, tables: &mut Tables) {
        let pcp = self.pcp;
        let now = Instant::now();
        match &mut self.dir {
            Some(d) => d.refresh(now, &mut |m| pcp.notify(LOG_INFO, &m)),
            None => self.source.refresh(now, &mut |m| pcp.notify(LOG_INFO, &m)),
        }
        self.damon_read = false;
        self.values_ok = true;
        self.update_tables(tables);
    }

    /// Rebuilds the metric table if the segment's tables changed, and the
    /// CPU instance domain if its CPUs did.
    fn update_tables(&mut self, tables: &mut Tables) {
        if let Some(d) = &self.dir {
            if self.problems.as_bytes() != d.problems_text().as_bytes() {
                self.problems = cstring(d.problems_text());
            }
        }
        let r = &self.source.reading;
        let key = match &self.dir {
            // Its generation moves whenever its merged families do.
            Some(d) => d
                .available
                .then_some((0, d.snapshot.generation, d.snapshot.families.len())),
            None => r.info.as_ref().map(|i| {
                (
                    i.header.epoch,
                    r.snapshot.generation,
                    r.snapshot.instances.len(),
                )
            }),
        };
        if key != self.key || self.metrics.is_empty() {
            self.key = key;
            if let Some(i) = &self.source.reading.info {
                self.abi = cstring(&format!("{}.{}", i.header.abi_major, i.header.abi_minor));
            }
            self.rebuild_metrics(tables);
        }
        let nr_cpus = self
            .source
            .reading
            .info
            .as_ref()
            .map_or(0, |i| i.header.nr_cpus);
        if self.cpus_listed != Some(nr_cpus) {
            self.cpus_listed = Some(nr_cpus);
            tables.set_instances(
                Indom::Cpu as usize,
                (0..nr_cpus).map(|c| cstring(&format!("cpu{c}"))).collect(),
            );
        }
    }

    /// Before a fetch of `pmids`: reads the values their metrics serve, in
    /// one consistent read of the families' value slots (only those), and
    /// the DAMON regions if one of them is a DAMON metric. If the
    /// generation moved since [`Agent::refresh`], the tables are rebuilt
    /// first (libpcp_pmda has not looked at them yet).
    pub fn prepare_fetch(&mut self, pmids: &[pmID], tables: &mut Tables) {
        let pcp = self.pcp;
        let mut log = |m: String| pcp.notify(LOG_INFO, &m);
        if let Some(d) = &mut self.dir {
            // One read of the whole directory, merged; the tables follow
            // it if its families changed (libpcp_pmda has not looked at
            // them yet).
            d.read(Instant::now(), &mut log);
            self.update_tables(tables);
            self.current_plan = Some(self.plan_for(pmids));
            return;
        }
        let mut plan = self.plan_for(pmids);
        for attempt in 0.. {
            let runs = &self.plans[plan].runs;
            if runs.is_empty() {
                break;
            }
            let now = Instant::now();
            if self.source.read_values(runs, now, &mut log) != Values::Moved {
                break;
            }
            if attempt == 2 {
                // The tables keep changing: no family values this time.
                self.values_ok = false;
                break;
            }
            self.source.refresh(now, &mut log);
            self.update_tables(tables);
            plan = self.plan_for(pmids);
        }
        if self.plans[plan].damon {
            self.read_damon();
        }
        self.current_plan = Some(plan);
    }

    /// The value of the `k`th PMID of the fetch last prepared, metric
    /// `idx`, which has no instance domain: [`Agent::value`]'s.
    pub fn fetch_value(&self, k: usize, idx: usize) -> Result<Option<Value<'_>>, c_int> {
        let recipe = self
            .current_plan
            .and_then(|p| self.plans.get(p))
            .and_then(|p| p.recipes.get(k).copied())
            .unwrap_or(Recipe::Call);
        if recipe == Recipe::Call {
            return self.value(idx, PM_IN_NULL as c_uint);
        }
        // As value(): no segment, or values not read at the metric table's
        // generation: "try again".
        if !self.available() || !self.values_ok {
            return Err(PM_ERR_AGAIN);
        }
        let s = self.snapshot();
        Ok(match recipe {
            Recipe::Column { slot, max, signed } => {
                column(s, slot as usize, max, signed).map(Value::U64)
            }
            Recipe::NoValue | Recipe::Call => None,
        })
    }

    /// The metric of each PMID of the fetch last prepared.
    pub fn fetch_metrics(&self) -> &[Option<usize>] {
        match self.current_plan.and_then(|p| self.plans.get(p)) {
            Some(p) => &p.metrics,
            None => &[],
        }
    }

    /// The plan of a fetch of `pmids` with the current metric table:
    /// found, or made in place of an outdated (else the oldest) one.
    fn plan_for(&mut self, pmids: &[pmID]) -> usize {
        let serial = self.table_serial;
        if let Some(i) = self
            .plans
            .iter()
            .position(|p| p.serial == serial && p.pmids == pmids)
        {
            return i;
        }
        let i = match self.plans.iter().position(|p| p.serial != serial) {
            Some(i) => i,
            None if self.plans.len() < MAX_PLANS => {
                self.plans.push(FetchPlan::default());
                self.plans.len() - 1
            }
            None => {
                self.next_plan = (self.next_plan + 1) % MAX_PLANS;
                self.next_plan
            }
        };
        let families = match &self.dir {
            Some(d) => &d.snapshot.families,
            None => &self.source.reading.snapshot.families,
        };
        self.plans[i].make(pmids, serial, &self.by_pmid, &self.metrics, families);
        i
    }

    /// Before libpcp_pmda lists or walks the instances of `indom`: the
    /// DAMON regions, if it is a DAMON instance domain.
    pub fn prepare_instances(&mut self, indom: pmInDom) {
        let serial = indom & 0x3f_ffff;
        if serial == Indom::Stream as u32 || serial == Indom::Region as u32 {
            self.read_damon();
        }
    }

    /// Reads the DAMON regions, once per request, and makes their streams
    /// and regions the DAMON instances if they changed.
    fn read_damon(&mut self) {
        if self.damon_read {
            return;
        }
        self.damon_read = true;
        let pcp = self.pcp;
        let now = Instant::now();
        self.source
            .read_damon(now, &mut |m| pcp.notify(LOG_INFO, &m));
        let damon = &self.source.reading.damon;
        let same = self.damon_key.as_ref().is_some_and(|k| {
            k.len() == damon.len()
                && k.iter()
                    .zip(damon)
                    .all(|(&k, a)| k == (a.monitor_id, a.target_id, a.regions.len()))
        });
        if same {
            return;
        }
        self.damon_key = Some(
            damon
                .iter()
                .map(|a| (a.monitor_id, a.target_id, a.regions.len()))
                .collect(),
        );
        let problems = self.damon.update(damon, now);
        if let Some(first) = problems.into_iter().next() {
            self.state_problem(format!("DAMON instances: {first}"));
        }
    }

    fn rebuild_metrics(&mut self, tables: &mut Tables) {
        let mut metrics = catalog::fixed(self.domain);
        let r = &self.source.reading;
        // A directory's merged values have no CPUs: no per-CPU metrics.
        let nr_cpus = r.info.as_ref().map_or(0, |i| i.header.nr_cpus);
        let (families, series) = match &self.dir {
            Some(d) => (
                &d.snapshot.families,
                Series::Merged {
                    writer_label: d.writer_label(),
                },
            ),
            None => (&r.snapshot.families, Series::Segment),
        };
        let built = family_metrics::build(
            self.domain,
            families,
            nr_cpus,
            &mut self.names,
            &mut self.ids,
            MAX_FAMILY_INSTANCES,
            series,
        );
        if built.left_out != self.left_out {
            // Each reason once while it lasts; at most ten lines at a time.
            let old: std::collections::HashSet<&String> = self.left_out.iter().collect();
            let new: Vec<&String> = built.left_out.iter().filter(|l| !old.contains(l)).collect();
            for line in new.iter().take(10) {
                self.pcp.notify(LOG_ERR, line);
            }
            if new.len() > 10 {
                self.pcp.notify(
                    LOG_ERR,
                    &format!("... and {} more families left out", new.len() - 10),
                );
            }
            self.left_out = built.left_out;
        }
        if self.names.take_changed() {
            self.save_names();
        }
        self.table_serial += 1;
        metrics.extend(built.metrics);
        self.by_pmid = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| (m.pmid, i))
            .collect();
        // The namespace below "perfabi", sorted once.
        let (namespace, rejected) =
            Namespace::new(metrics.iter().map(|m| (m.name.clone(), m.pmid)));
        if let Some(first) = rejected.first() {
            self.pcp.notify(
                LOG_ERR,
                &format!(
                    "{} metric names left out of the namespace (the first: {first})",
                    rejected.len()
                ),
            );
        }
        self.namespace = namespace;
        self.metrics = metrics;
        let domain = self.domain;
        let mut lists = Vec::with_capacity(built.indoms.len());
        self.family_indoms.clear();
        for d in built.indoms {
            let by_id = d
                .instances
                .iter()
                .map(|i| (i.id, (i.member, i.sub)))
                .collect();
            self.family_indoms.insert(
                d.serial,
                FamilyIndom {
                    family: d.family,
                    role: d.role,
                    by_id,
                },
            );
            lists.push((
                indom(domain, d.serial),
                d.instances
                    .into_iter()
                    .map(|i| (i.id, cstring(&i.name)))
                    .collect(),
            ));
        }
        tables.set_dynamic_indoms(lists);
        tables.set_metrics(self.metrics.iter().map(|m| pmDesc {
            pmid: m.pmid,
            type_: m.type_,
            indom: m.indom.map_or(PM_INDOM_NULL, |d| indom(domain, d)),
            sem: m.sem,
            units: m.units,
        }));
    }

    /// Saves the family numbers, if there is a state folder.
    fn save_names(&mut self) {
        let Some(state) = &self.state else { return };
        if let Err(e) = state.write(&names_file(self.domain), &self.names.to_text()) {
            self.state_problem(format!(
                "family numbers not saved ({e}): PMIDs of new families may change when the agent restarts"
            ));
        }
    }

    /// The value of metric `idx` for instance `inst`.
    pub fn value(&self, idx: usize, inst: c_uint) -> Result<Option<Value<'_>>, c_int> {
        let Some(m) = self.metrics.get(idx) else {
            return Err(PM_ERR_PMID);
        };
        let r = &self.source.reading;
        let info = r.info.as_ref();
        let s = self.snapshot();
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
        use Value as V;
        let v = match m.kind {
            Kind::Available => Some(V::U32(self.available() as u32)),
            Kind::Path => Some(V::Str(&self.path)),
            Kind::BusyReads => Some(V::U64(self.source.busy)),
            Kind::StaleReads => Some(V::U64(self.source.stale)),
            Kind::Remaps => Some(V::U64(self.source.remaps)),
            Kind::Held => Some(V::U32(match &self.dir {
                Some(d) => d.held,
                None => self.source.held,
            } as u32)),
            Kind::HeldReads => Some(V::U64(match &self.dir {
                Some(d) => d.held_reads,
                None => self.source.held_reads,
            })),
            // No segment: "try again", not an empty answer.
            _ if !self.available() => return Err(PM_ERR_AGAIN),
            Kind::NrSegments => Some(V::U32(match &self.dir {
                Some(d) => d.segments as u32,
                None => 1,
            })),
            Kind::NrProblems => Some(V::U32(
                self.dir.as_ref().map_or(0, |d| d.problems.len()) as u32
            )),
            Kind::Problems => Some(V::Str(&self.problems)),
            Kind::AbiVersion => Some(V::Str(&self.abi)),
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
            Kind::NrFamilies => Some(V::U32(s.families.len() as u32)),
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
            Kind::Family { .. } if !self.values_ok => return Err(PM_ERR_AGAIN),
            Kind::Family {
                family,
                part,
                per_cpu,
            } => self.family_value(m.indom, family, part, per_cpu, inst),
        };
        Ok(v)
    }

    /// The value of `part` of family `family` for instance `inst` of the
    /// metric's instance domain `indom`: one CPU's, or the total over CPUs
    /// (the maximum for a peak's value, else the wrapping sum).
    fn family_value(
        &self,
        indom: Option<u32>,
        family: usize,
        part: Part,
        per_cpu: bool,
        inst: c_uint,
    ) -> Option<Value<'_>> {
        let s = self.snapshot();
        let f = s.families.get(family)?;
        let (member, sub) = match indom {
            None => (0, 0),
            Some(d) if d == Indom::Cpu as u32 => (0, inst),
            Some(d) => *self.family_indoms.get(&d)?.by_id.get(&(inst as c_int))?,
        };
        let m = f.members.get(member as usize)?;
        let offset = match part {
            Part::Value | Part::Count => 0,
            Part::Sum => 1,
            Part::Bucket => 2 + sub as usize,
        };
        if offset >= m.words as usize {
            return None;
        }
        let slot = m.value_slot as usize + offset;
        if slot >= s.slots || s.nr_cpus == 0 {
            // No CPU: no value (a peak's maximum of nothing is not
            // i64::MIN).
            return None;
        }
        if per_cpu {
            let cpu = sub as usize;
            return (cpu < s.nr_cpus)
                .then(|| s.values.get(cpu * s.slots + slot))
                .flatten()
                .map(|&v| Value::U64(v));
        }
        let peak = part == Part::Value && f.kind == perfabi::Kind::Peak;
        let signed = f.value_type == perfabi::ValueType::I64;
        column(s, slot, peak, signed).map(Value::U64)
    }

    /// Help text of a metric or instance domain; it is kept until the next
    /// call.
    fn text(&mut self, ident: c_int, kind: c_int) -> Option<&CStr> {
        let oneline = kind & PM_TEXT_ONELINE != 0;
        if kind & PM_TEXT_PMID != 0 {
            let m = self.metrics.get(*self.by_pmid.get(&(ident as pmID))?)?;
            let families = &self.snapshot().families;
            let (one, mut long) = crate::family_metrics::metric_help(m, families)?;
            if let (Some(d), Kind::Family { family, .. }) = (&self.dir, m.kind) {
                let f = families.get(family)?;
                let how = match f.kind {
                    perfabi::Kind::Gauge => format!(
                        "over the live writers by the family's gauge mode, {}",
                        f.gauge_mode.as_str()
                    ),
                    perfabi::Kind::Peak => "the largest of every writer's".into(),
                    _ => "summed over every writer, live or dead".into(),
                };
                let note = format!(
                    "\nServed merged over the segments of the directory {} \
                     (spec/PERFABI.md §15.4): {how}; no per-CPU values.{}",
                    escape_path(d.path()),
                    match d.writer_label() {
                        Some(l) => format!(
                            " Each writer's series apart: instances named \
                             <instance>::<writer> (label {l}, the writer's <name>.<pid>)."
                        ),
                        None => String::new(),
                    }
                );
                long.to_mut().push_str(&note);
            }
            self.text = cstring(if oneline { &one } else { &long });
            return Some(&self.text);
        }
        if kind & PM_TEXT_INDOM != 0 {
            let serial = (ident as u32) & 0x3f_ffff;
            if let Some(t) = self.indom_texts.get(serial as usize) {
                return Some(if oneline { &t.0 } else { &t.1 });
            }
            let d = self.family_indoms.get(&serial)?;
            let f = self.snapshot().families.get(d.family)?;
            let (one, long) = family_metrics::indom_help(f, d.role);
            self.text = cstring(if oneline { &one } else { &long });
            return Some(&self.text);
        }
        None
    }

    /// A metric's labels (`PM_LABEL_ITEM`): a family's kind and more, see
    /// [`family_metrics::metric_labels`]. Nothing of its own for the
    /// domain (libpcp_pmda's `{"agent":"perfabi"}`), instance domains and
    /// clusters.
    fn labels(&self, ident: c_int, kind: c_int) -> Option<String> {
        if kind & PM_LABEL_ITEM == 0 {
            return None;
        }
        let m = self.metrics.get(*self.by_pmid.get(&(ident as pmID))?)?;
        let Kind::Family { family, part, .. } = m.kind else {
            return None;
        };
        let f = self.snapshot().families.get(family)?;
        Some(family_metrics::metric_labels(f, part))
    }

    /// The labels of an instance: a CPU's number, or a family member's
    /// dimension, labels, bucket bounds and CPU.
    fn instance_labels(&self, indom: pmInDom, inst: c_uint) -> Option<String> {
        let serial = indom & 0x3f_ffff;
        if serial == Indom::Cpu as u32 {
            return Some(family_metrics::cpu_labels(inst));
        }
        let d = self.family_indoms.get(&serial)?;
        let &(member, sub) = d.by_id.get(&(inst as c_int))?;
        let f = self.snapshot().families.get(d.family)?;
        family_metrics::instance_labels(f, d.role, member, sub)
    }
}

impl Callbacks for Agent {
    fn refresh(&mut self, tables: &mut Tables) {
        Agent::refresh(self, tables);
    }

    fn prepare_fetch(&mut self, pmids: &[pmID], tables: &mut Tables) {
        Agent::prepare_fetch(self, pmids, tables);
    }

    fn prepare_instances(&mut self, indom: pmInDom) {
        Agent::prepare_instances(self, indom);
    }

    fn fetch_metrics(&self) -> &[Option<usize>] {
        Agent::fetch_metrics(self)
    }

    fn fetch_value(&self, k: usize, metric: usize) -> Result<Option<Value<'_>>, c_int> {
        Agent::fetch_value(self, k, metric)
    }

    fn value(&self, metric: usize, inst: c_uint) -> Result<Option<Value<'_>>, c_int> {
        Agent::value(self, metric, inst)
    }

    fn text(&mut self, ident: c_int, kind: c_int) -> Option<&CStr> {
        Agent::text(self, ident, kind)
    }

    fn pmid(&self, name: &str) -> Option<pmID> {
        self.namespace.pmid(name)
    }

    fn name(&self, pmid: pmID) -> Option<&str> {
        self.namespace.name(pmid)
    }

    fn children(&self, name: &str, leaves: bool) -> Option<Vec<Child<'_>>> {
        if leaves {
            self.namespace.leaves(name)
        } else {
            self.namespace.children(name)
        }
    }

    fn labels(&mut self, ident: c_int, kind: c_int) -> Option<String> {
        Agent::labels(self, ident, kind)
    }

    fn instance_labels(&mut self, indom: pmInDom, inst: c_uint) -> Option<String> {
        Agent::instance_labels(self, indom, inst)
    }

    fn former_instance_name(&self, indom: pmInDom, inst: c_uint) -> Option<String> {
        let serial = indom & 0x3f_ffff;
        if serial == Indom::Stream as u32 || serial == Indom::Region as u32 {
            // The instance cache keeps a gone instance's name (inactive).
            return self.pcp.cache_name(indom, inst as c_int);
        }
        self.ids.name_of(serial, inst as c_int).map(str::to_string)
    }
}

/// The total over CPUs of value slot `slot` of `s` (its column,
/// `values[cpu * slots + slot]`): the wrapping sum, or the maximum (`max`,
/// a peak's; of i64 values if `signed`); `None` without such a slot or
/// without CPUs (a peak's maximum of nothing is not `i64::MIN`).
fn column(s: &perfabi::Snapshot, slot: usize, max: bool, signed: bool) -> Option<u64> {
    if slot >= s.slots || s.nr_cpus == 0 {
        return None;
    }
    let mut words = s
        .values
        .get(slot..)?
        .iter()
        .step_by(s.slots)
        .take(s.nr_cpus)
        .copied();
    match (max, signed) {
        (true, true) => words.map(|v| v as i64).max().map(|v| v as u64),
        (true, false) => words.max(),
        (false, _) => Some(words.by_ref().fold(0u64, u64::wrapping_add)),
    }
}

/// How the agent starts: its domain, its log file, and the user it runs
/// as once the log is open (`-U`).
pub struct Start<'a> {
    /// The performance metrics domain.
    pub domain: u32,
    /// The log file (relative: in pmcd's log folder).
    pub logfile: &'a str,
    /// Run as this user once the log is open (PCP's `-U`); `None`: keep
    /// the user the agent was started as.
    pub user: Option<&'a str>,
}

/// Runs the agent: connects to pmcd (as a pipe daemon), opens its log,
/// becomes `start.user` if given (before any state file is read or
/// written, so they are that user's), and answers until pmcd closes the
/// pipe.
pub fn run(
    pcp: &'static Pcp,
    start: Start<'_>,
    segment: &Path,
    trust: Trust,
    directory: Option<DirSource>,
) -> Result<(), String> {
    let domain = start.domain;
    let log =
        CString::new(start.logfile).map_err(|_| "--logfile contains a NUL byte".to_string())?;
    pcp.set_progname(c"pmdaperfabi");
    let log: &'static CStr = Box::leak(log.into_boxed_c_str());
    let mut daemon = Daemon::new(
        pcp,
        c"perfabi",
        domain,
        log,
        INDOMS.map(|d| indom(domain, d as u32)),
    )?;
    if let Some(user) = start.user {
        pcp.set_process_identity(user)?;
        pcp.notify(LOG_INFO, &format!("running as user {user}"));
    }
    let (state, names, pmda_dir) = open_state(pcp, domain);
    let mut agent = Agent::new(
        pcp,
        domain,
        segment,
        trust,
        state,
        names,
        pmda_dir.as_deref(),
    );
    let served = match directory {
        Some(d) => {
            let what = format!("the segment directory {}", escape_path(d.path()));
            agent.serve_directory(d);
            what
        }
        None => escape_path(segment).to_string(),
    };
    agent.refresh(daemon.tables());
    pcp.notify(LOG_INFO, &format!("serving {served} (domain {domain})"));
    daemon.serve(agent)
}

/// The agent's state folder, the counter numbers saved in it, and the
/// folder libpcp_pmda saves instance ids in (`$PCP_VAR_DIR/config/pmda`).
/// Any problem is logged, and the agent goes on without saving (or with
/// no saved numbers): its identifiers then hold for its own life only.
fn open_state(pcp: &'static Pcp, domain: u32) -> (Option<StateDir>, CounterNames, Option<PathBuf>) {
    let log = |m: String| {
        pcp.notify(
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
                pcp.notify(
                    LOG_INFO,
                    &format!(
                        "{} counter numbers read from {}",
                        n.len(),
                        escape_path(&state.path().join(&file))
                    ),
                );
                n
            }
            Err(e) => {
                let kept = state
                    .set_aside(&file)
                    .map_or_else(|e| format!("not kept: {e}"), |p| format!("kept as {p}"));
                pcp.notify(
                    LOG_ERR,
                    &format!(
                        "{}: {e}; counters are numbered anew (the file is {kept})",
                        escape_path(&state.path().join(&file))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Text;

    /// A family metric of family `family`, PMID `item`.
    fn metric(item: u32, kind: Kind) -> Metric {
        Metric {
            name: format!("m{item}"),
            pmid: pmid(502, 2048, item),
            type_: PM_TYPE_U64,
            indom: None,
            sem: PM_SEM_COUNTER,
            units: pmUnits::default(),
            text: Text::Family,
            kind,
        }
    }

    /// A fetch reads each family's value slots once, in runs merged where
    /// they touch or overlap, and the DAMON regions only for a DAMON
    /// metric; unknown PMIDs read nothing.
    #[test]
    fn a_fetch_plan_reads_each_slot_of_its_families_once() {
        let family = |slots: &[(u32, u32)]| {
            let mut f = perfabi::Family::from_entry(&perfabi::Instance {
                slot: 0,
                reg_id: 1,
                name: "f".into(),
                unit: String::new(),
                semantics: perfabi::Semantics::Counter,
                value_type: perfabi::ValueType::U64,
            });
            let m = f.members[0].clone();
            f.members = slots
                .iter()
                .map(|&(value_slot, words)| perfabi::Member {
                    value_slot,
                    words,
                    ..m.clone()
                })
                .collect();
            f
        };
        // Family 0: slots 10..13 and 4; family 1: slot 3; family 2: 12..16.
        let families = [
            family(&[(10, 3), (4, 1)]),
            family(&[(3, 1)]),
            family(&[(12, 4)]),
        ];
        let fam = |family| Kind::Family {
            family,
            part: Part::Value,
            per_cpu: false,
        };
        let metrics = vec![
            metric(0, fam(0)),
            metric(1, fam(1)),
            metric(2, fam(2)),
            metric(3, Kind::Epoch),
            metric(4, Kind::RegionStart),
            metric(5, fam(7)),
        ];
        let by_pmid = metrics
            .iter()
            .enumerate()
            .map(|(i, m)| (m.pmid, i))
            .collect();
        let mut plan = FetchPlan::default();
        let ids = |items: &[u32]| {
            items
                .iter()
                .map(|&i| pmid(502, 2048, i))
                .collect::<Vec<_>>()
        };
        plan.make(
            &ids(&[0, 1, 2, 0, 3, 9, 5]),
            1,
            &by_pmid,
            &metrics,
            &families,
        );
        assert_eq!(plan.runs, [(3, 2), (10, 6)]);
        assert!(!plan.damon);
        plan.make(&ids(&[1, 4]), 2, &by_pmid, &metrics, &families);
        assert_eq!(
            (plan.runs.as_slice(), plan.damon, plan.serial),
            (&[(3, 1)][..], true, 2)
        );
        plan.make(&ids(&[3]), 2, &by_pmid, &metrics, &families);
        assert!(plan.runs.is_empty() && !plan.damon);
    }
}
