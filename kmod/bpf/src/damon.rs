//! DAMON regions from `damon:damon_aggregated` (`src/bpf/damon.bpf.h`):
//! which form of the tracepoint this kernel has, read from its BTF, so
//! that the loader loads the programs that match (or none).

use libbpf_rs::btf::types::{FuncProto, Typedef};
use libbpf_rs::btf::Btf;
use libbpf_rs::ReferencesType;

/// The forms of `damon_aggregated`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tracepoint {
    /// Linux 6.7 and later: `(target_id, region, nr_regions)`; programs
    /// `tp_damon` / `raw_damon`.
    Since6_7,
    /// Before: `(target, target_id, region, nr_regions)`; programs
    /// `tp_damon_pre_6_7` / `raw_damon_pre_6_7`.
    Before6_7,
}

impl Tracepoint {
    /// Whether the program named `name` (a DAMON one) is of this form.
    pub fn matches(self, name: &str) -> bool {
        name.ends_with("_pre_6_7") == (self == Tracepoint::Before6_7)
    }
}

/// Whether program `name` is one of the DAMON programs.
pub fn is_damon_program(name: &str) -> bool {
    name.contains("_damon")
}

/// The form of `damon_aggregated` in the running kernel, from its BTF
/// (`btf_trace_damon_aggregated`: the probe's prototype, its first
/// parameter the probe's data); `None` if it has none (no DAMON, or no
/// BTF).
pub fn tracepoint(btf: Option<&Btf<'_>>) -> Option<Tracepoint> {
    let td: Typedef<'_> = btf?.type_by_name("btf_trace_damon_aggregated")?;
    let proto = FuncProto::try_from(td.referenced_type().next_type()?.skip_mods_and_typedefs())
        .ok()
        .or_else(|| FuncProto::try_from(td.referenced_type().skip_mods_and_typedefs()).ok())?;
    match proto.len() {
        4 => Some(Tracepoint::Since6_7),
        5 => Some(Tracepoint::Before6_7),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_told_apart_by_form() {
        assert!(is_damon_program("tp_damon") && is_damon_program("raw_damon_pre_6_7"));
        assert!(!is_damon_program("tp_switch"));
        assert!(Tracepoint::Since6_7.matches("tp_damon"));
        assert!(!Tracepoint::Since6_7.matches("tp_damon_pre_6_7"));
        assert!(Tracepoint::Before6_7.matches("raw_damon_pre_6_7"));
    }

    /// This kernel's form, where its BTF has one (the machine's 6.18 has
    /// the 6.7 form).
    #[test]
    fn this_kernel_has_a_form_if_it_has_the_tracepoint() {
        let Ok(btf) = Btf::from_vmlinux() else {
            return;
        };
        let has: Option<Typedef<'_>> = btf.type_by_name("btf_trace_damon_aggregated");
        assert_eq!(has.is_some(), tracepoint(Some(&btf)).is_some());
    }
}
