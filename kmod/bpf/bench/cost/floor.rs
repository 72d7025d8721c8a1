//! The floor programs (`src/bpf/floor.bpf.c`, compiled by `build.rs`):
//! loaded in this process, the flavour the daemon runs (`tp_btf/` or
//! `raw_tp/`), on the tracepoints its programs are on, and attached beside
//! them. Detached when dropped.

use std::ffi::OsStr;
use std::os::fd::AsFd;

use libbpf_rs::{Link, Object, ObjectBuilder, Program};

use crate::{failed, stats, Failure};

/// The floor object, as `build.rs` compiled it.
const FLOOR_OBJECT: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/floor.bpf.o"));

/// An attached floor program.
#[derive(Clone, Debug)]
pub struct FloorProgram {
    /// Its id.
    pub id: u32,
    /// Its name.
    pub name: String,
    /// The tracepoint it is on.
    pub tracepoint: String,
    /// BPF instructions after the verifier's rewriting.
    pub insns: usize,
}

/// The floors, attached.
pub struct Floors {
    // Dropped first: detached before the object (and its programs) go.
    _links: Vec<Link>,
    _obj: Object,
    progs: Vec<FloorProgram>,
}

/// (tracepoint, raw_tp) of a section `tp_btf/X` or `raw_tp/X`.
fn placed(section: &OsStr) -> Option<(String, bool)> {
    let s = section.to_str()?;
    if let Some(tp) = s.strip_prefix("raw_tp/") {
        Some((tp.to_string(), true))
    } else {
        s.strip_prefix("tp_btf/").map(|tp| (tp.to_string(), false))
    }
}

impl Floors {
    /// Loads and attaches the floors of flavour `raw_tp` on `tracepoints`.
    /// A tracepoint without a floor gets none (the table says so).
    pub fn attach<'a>(
        raw_tp: bool,
        tracepoints: impl Iterator<Item = &'a str>,
    ) -> Result<Self, Failure> {
        let wanted: Vec<&str> = tracepoints.collect();
        let mut open = ObjectBuilder::default()
            .open_memory(FLOOR_OBJECT)
            .map_err(|e| failed(format!("cannot open the floor object: {e}")))?;
        for mut p in open.progs_mut() {
            let keep = placed(p.section())
                .is_some_and(|(tp, raw)| raw == raw_tp && wanted.contains(&tp.as_str()));
            p.set_autoload(keep);
        }
        let obj = open
            .load()
            .map_err(|e| failed(format!("cannot load the floor programs: {e}")))?;
        let mut links = Vec::new();
        let mut progs = Vec::new();
        for p in obj.progs_mut() {
            let Some((tp, raw)) = placed(p.section()) else {
                continue;
            };
            if raw != raw_tp || !wanted.contains(&tp.as_str()) {
                continue;
            }
            let name = p.name().to_string_lossy().into_owned();
            links.push(
                p.attach()
                    .map_err(|e| failed(format!("cannot attach the floor {name}: {e}")))?,
            );
            let id = Program::id_from_fd(p.as_fd())
                .map_err(|e| failed(format!("cannot get the id of the floor {name}: {e}")))?;
            progs.push(FloorProgram {
                id,
                name,
                tracepoint: tp,
                insns: stats::insns(id),
            });
        }
        Ok(Self {
            _links: links,
            _obj: obj,
            progs,
        })
    }

    /// The floors attached.
    pub fn programs(&self) -> &[FloorProgram] {
        &self.progs
    }
}
