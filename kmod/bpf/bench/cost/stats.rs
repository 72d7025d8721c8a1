//! The kernel's own statistics of BPF programs: turned on for this
//! process's life with `BPF_ENABLE_STATS`, read per program with
//! `BPF_OBJ_GET_INFO_BY_FD` (libbpf-rs's query API), and which programs
//! are the daemon's (its descriptors' `prog_id`, named by the writer's own
//! object file).
//!
//! Why `BPF_ENABLE_STATS` and not writing `kernel.bpf_stats_enabled`: both
//! switch the same counting on, but the sysctl is one shared value with
//! no count of its users, so a run that sets it to 1 and back to 0 turns it
//! off under anyone else measuring at the time (and leaves it on if the
//! run is killed). `BPF_ENABLE_STATS` takes a reference the kernel drops
//! when the descriptor closes, however this process ends; the sysctl is
//! never written, and is printed before and after to show it.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{FromRawFd, OwnedFd};

use libbpf_rs::btf::types::Typedef;
use libbpf_rs::btf::Btf;
use libbpf_rs::query::{ProgInfoIter, ProgInfoQueryOptions};
use libbpf_rs::ObjectBuilder;

use crate::{failed, Failure};

/// The writer's object, as `build.rs` compiled it (the daemon loads the
/// same bytes, through its skeleton).
const WRITER_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/perfabi.bpf.o"));

/// The length of a program's name as the kernel keeps it
/// (`BPF_OBJ_NAME_LEN` 16, with its NUL: `include/uapi/linux/bpf.h`).
const KERNEL_NAME_LEN: usize = 15;

/// BPF statistics on while this lives.
pub struct Enabled {
    _fd: OwnedFd,
}

impl Enabled {
    /// `BPF_ENABLE_STATS(BPF_STATS_RUN_TIME)`.
    pub fn new() -> Result<Self, Failure> {
        // SAFETY: bpf_enable_stats() takes a plain integer and only makes
        // the bpf(2) call; it touches no memory of ours.
        let fd = unsafe {
            libbpf_rs::libbpf_sys::bpf_enable_stats(libbpf_rs::libbpf_sys::BPF_STATS_RUN_TIME)
        };
        if fd < 0 {
            return Err(failed(format!(
                "cannot turn BPF statistics on (BPF_ENABLE_STATS): {}",
                std::io::Error::from_raw_os_error(-fd)
            )));
        }
        // SAFETY: fd is a descriptor the call above just opened for us,
        // owned by nothing else.
        let fd = unsafe { OwnedFd::from_raw_fd(fd) };
        Ok(Self { _fd: fd })
    }
}

/// `kernel.bpf_stats_enabled` as read now (`?` if unreadable).
pub fn sysctl() -> String {
    std::fs::read_to_string("/proc/sys/kernel/bpf_stats_enabled")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// A program's totals: run time (ns) and runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// `run_time_ns`.
    pub ns: u64,
    /// `run_cnt`.
    pub runs: u64,
}

/// The totals of the programs `ids`, now. A program gone is an error (the
/// daemon died, or the floors were detached).
pub fn read(ids: &[u32]) -> Result<HashMap<u32, Totals>, Failure> {
    let mut out = HashMap::new();
    for p in ProgInfoIter::with_query_opts(ProgInfoQueryOptions::default()) {
        if ids.contains(&p.id) {
            out.insert(
                p.id,
                Totals {
                    ns: p.run_time_ns,
                    runs: p.run_cnt,
                },
            );
        }
    }
    match ids.iter().find(|id| !out.contains_key(id)) {
        Some(id) => Err(failed(format!(
            "BPF program {id} is gone (the daemon stopped?)"
        ))),
        None => Ok(out),
    }
}

/// What each program did between `before` and `after`.
pub fn delta(before: &HashMap<u32, Totals>, after: &HashMap<u32, Totals>) -> HashMap<u32, Totals> {
    after
        .iter()
        .map(|(id, a)| {
            let b = before.get(id).copied().unwrap_or_default();
            (
                *id,
                Totals {
                    ns: a.ns.saturating_sub(b.ns),
                    runs: a.runs.saturating_sub(b.runs),
                },
            )
        })
        .collect()
}

/// A tracepoint program the daemon holds.
#[derive(Clone, Debug)]
pub struct Program {
    /// Its id.
    pub id: u32,
    /// Its name in the writer's object.
    pub name: String,
    /// The tracepoint it is on.
    pub tracepoint: String,
    /// A `raw_tp/` program (else `tp_btf/`).
    pub raw_tp: bool,
    /// BPF instructions after the verifier's rewriting (`xlated_prog_len`).
    pub insns: usize,
}

/// The tracepoint programs of process `pid`: the `prog_id` of every
/// descriptor of it (`/proc/PID/fdinfo`: programs and links), named by the
/// kernel, placed by the section of the program of that name in the
/// writer's object. Others (`control`) are left out.
pub fn writer_programs(pid: u32) -> Result<Vec<Program>, Failure> {
    let ids = prog_ids(pid)?;
    let sections = writer_sections()?;
    let opts = ProgInfoQueryOptions::default().include_xlated_prog_insns(true);
    let mut out = Vec::new();
    for p in ProgInfoIter::with_query_opts(opts) {
        if !ids.contains(&p.id) {
            continue;
        }
        let kname = p.name.to_string_lossy().into_owned();
        let Some((name, section)) = sections.iter().find(|(n, _)| truncated(n) == kname) else {
            continue;
        };
        let (raw_tp, tp) = if let Some(tp) = section.strip_prefix("raw_tp/") {
            (true, tp)
        } else if let Some(tp) = section.strip_prefix("tp_btf/") {
            (false, tp)
        } else {
            continue;
        };
        out.push(Program {
            id: p.id,
            name: name.clone(),
            tracepoint: tp.to_string(),
            raw_tp,
            insns: p.xlated_prog_insns.len() / 8,
        });
    }
    out.sort_by(|a, b| (&a.tracepoint, &a.name).cmp(&(&b.tracepoint, &b.name)));
    Ok(out)
}

/// The BPF instructions of program `id` after the verifier (0 if gone).
pub fn insns(id: u32) -> usize {
    let opts = ProgInfoQueryOptions::default().include_xlated_prog_insns(true);
    ProgInfoIter::with_query_opts(opts)
        .find(|p| p.id == id)
        .map_or(0, |p| p.xlated_prog_insns.len() / 8)
}

/// The tracepoints of the writer's object's programs of flavour `raw_tp`
/// that this kernel has (`btf_trace_<name>` in its BTF: a kernel without
/// DAMON has no `damon_aggregated`, and the writer loads no program there).
pub fn object_tracepoints(raw_tp: bool) -> Result<Vec<String>, Failure> {
    let prefix = if raw_tp { "raw_tp/" } else { "tp_btf/" };
    let btf =
        Btf::from_vmlinux().map_err(|e| failed(format!("cannot read the kernel's BTF: {e}")))?;
    let mut tps: Vec<String> = writer_sections()?
        .into_iter()
        .filter_map(|(_, s)| s.strip_prefix(prefix).map(str::to_string))
        .filter(|tp| {
            let td: Option<Typedef<'_>> = btf.type_by_name(&format!("btf_trace_{tp}"));
            td.is_some()
        })
        .collect();
    tps.sort();
    tps.dedup();
    Ok(tps)
}

/// A name as the kernel keeps it.
fn truncated(name: &str) -> &str {
    let mut end = name.len().min(KERNEL_NAME_LEN);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    &name[..end]
}

/// (name, section) of each program of the writer's object.
fn writer_sections() -> Result<Vec<(String, String)>, Failure> {
    let obj = ObjectBuilder::default()
        .open_memory(WRITER_OBJECT)
        .map_err(|e| failed(format!("cannot open the writer's BPF object: {e}")))?;
    let s = |o: &OsStr| o.to_string_lossy().into_owned();
    Ok(obj.progs().map(|p| (s(p.name()), s(p.section()))).collect())
}

/// The `prog_id` of every descriptor of process `pid`.
fn prog_ids(pid: u32) -> Result<Vec<u32>, Failure> {
    let dir = format!("/proc/{pid}/fdinfo");
    let entries = std::fs::read_dir(&dir).map_err(|e| failed(format!("cannot list {dir}: {e}")))?;
    let mut ids = Vec::new();
    for e in entries.flatten() {
        // A descriptor closed meanwhile is no program of its.
        let Ok(text) = std::fs::read_to_string(e.path()) else {
            continue;
        };
        for l in text.lines() {
            if let Some(id) = l
                .strip_prefix("prog_id:")
                .and_then(|v| v.trim().parse().ok())
            {
                if !ids.contains(&id) {
                    ids.push(id);
                }
            }
        }
    }
    Ok(ids)
}
