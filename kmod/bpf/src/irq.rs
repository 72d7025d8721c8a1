//! The IRQ group's instances: every IRQ that has an action, as
//! `perfabi_sources.ko` finds them (`kmod/perfabi_src_irq.c`), from
//! `/sys/kernel/irq/N/actions` (the action names, comma-joined, in the
//! order of the descriptor's list; empty for an IRQ without one), keyed by
//! the IRQ number in the BPF map `irqs` (`irq.bpf.h`). The instance
//! string is `N:names` (README.md): when an IRQ's actions change (a driver
//! bound or unbound), a scan finds the same key with a new instance string,
//! as a renamed network device is (the module makes it a new instance).

use std::io::Read;
use std::path::PathBuf;

use perfabi_families::table::Group;

use crate::error::Error;
use crate::groups::{Found, Source};

/// The folder scanned.
const SYS_IRQ: &str = "/sys/kernel/irq";

/// Bytes of an actions file read at most: an instance string keeps 63.
const ACTIONS_MAX: u64 = 4096;

/// An IRQ's key in `irqs`: its number.
pub fn irq_key(irq: u32) -> Vec<u8> {
    irq.to_ne_bytes().to_vec()
}

/// The instance string of IRQ `irq` whose actions file holds `actions`,
/// or `None` if it has no action.
pub fn irq_instance(irq: u32, actions: &[u8]) -> Option<String> {
    let names = actions.strip_suffix(b"\n").unwrap_or(actions);
    if names.is_empty() {
        return None;
    }
    let mut raw = format!("{irq}:").into_bytes();
    raw.extend_from_slice(names);
    Some(perfabi::name::instance_from(&raw))
}

/// The IRQs of a `/sys/kernel/irq` folder.
#[derive(Debug)]
pub struct Irqs {
    root: PathBuf,
    actions: Vec<u8>,
}

impl Default for Irqs {
    fn default() -> Self {
        Self {
            root: PathBuf::from(SYS_IRQ),
            actions: Vec::new(),
        }
    }
}

impl Source for Irqs {
    fn group(&self) -> Group {
        Group::Irq
    }

    fn map_name(&self) -> &'static str {
        "irqs"
    }

    fn scan(&mut self) -> Result<Vec<Found>, Error> {
        let dir = std::fs::read_dir(&self.root)
            .map_err(|e| Error::Io(format!("cannot list {}", self.root.display()), e))?;
        let mut found = Vec::new();
        for e in dir.filter_map(Result::ok) {
            let Some(irq) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            self.actions.clear();
            // Gone while listed: not an instance now.
            let Ok(f) = std::fs::File::open(e.path().join("actions")) else {
                continue;
            };
            if f.take(ACTIONS_MAX).read_to_end(&mut self.actions).is_err() {
                continue;
            }
            if let Some(instance) = irq_instance(irq, &self.actions) {
                found.push((irq, instance));
            }
        }
        found.sort_unstable();
        Ok(found
            .into_iter()
            .map(|(irq, instance)| Found {
                key: irq_key(irq),
                instance,
            })
            .collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn instance_strings_are_the_number_and_the_action_names() {
        assert_eq!(
            irq_instance(24, b"virtio0-input.0\n").as_deref(),
            Some("24:virtio0-input.0")
        );
        assert_eq!(
            irq_instance(9, b"acpi,my \"dev\"\xff\n").as_deref(),
            Some("9:acpi,my__dev__")
        );
        assert_eq!(irq_instance(27, b"\n"), None);
        assert_eq!(irq_instance(27, b""), None);
        let long = irq_instance(1000, &[b'x'; 200]).unwrap();
        assert_eq!(long.len(), 63);
        perfabi::name::check_instance(&long).unwrap();
    }

    #[test]
    fn an_irq_needs_an_action() {
        let t = tempfile::tempdir().unwrap();
        let mk = |name: &str, actions: Option<&str>| {
            let d = t.path().join(name);
            std::fs::create_dir_all(&d).unwrap();
            if let Some(a) = actions {
                std::fs::write(d.join("actions"), a).unwrap();
            }
        };
        mk("24", Some("ACPI:Ged\n"));
        mk("3", Some("\n"));
        mk("100", Some("virtio1-req.0\n"));
        mk("7", None);
        mk("x", Some("not an irq\n"));
        let mut s = Irqs {
            root: t.path().to_path_buf(),
            actions: Vec::new(),
        };
        let found = s.scan().unwrap();
        let got: Vec<(&[u8], &str)> = found
            .iter()
            .map(|f| (f.key.as_slice(), f.instance.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (&24u32.to_ne_bytes()[..], "24:ACPI:Ged"),
                (&100u32.to_ne_bytes()[..], "100:virtio1-req.0"),
            ]
        );
    }

    /// This machine's IRQs, as /proc/interrupts numbers them.
    #[test]
    fn every_irq_found_here_is_a_numbered_row_of_proc_interrupts() {
        let found = Irqs::default().scan().unwrap();
        let text = std::fs::read_to_string("/proc/interrupts").unwrap();
        for f in &found {
            let n = u32::from_ne_bytes(f.key[..].try_into().unwrap());
            assert!(
                text.lines()
                    .any(|l| l.trim_start().starts_with(&format!("{n}:"))),
                "{}",
                f.instance
            );
        }
    }
}
