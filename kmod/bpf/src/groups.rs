//! The groups of families with a dimension (block per disk, network per
//! interface, IRQ per IRQ) and how each finds its instances: a
//! [`Source`] per group, scanned at start and every
//! [`SCAN_EVERY`](crate::writer::SCAN_EVERY). The writer
//! ([`crate::writer::Running::scan`]) publishes what a scan finds new and
//! retires what it no longer finds ([`crate::tables`]).

use perfabi_families::table::Group;

use crate::error::Error;

/// An instance a source found now.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Found {
    /// Its key in the group's BPF instance map (the map's key bytes,
    /// native endian).
    pub key: Vec<u8>,
    /// Its instance string (spec §5.3): the name the module gives it.
    pub instance: String,
}

/// A group of families with a dimension, and how its instances are found.
pub trait Source: Send {
    /// The group.
    fn group(&self) -> Group;
    /// The name of the group's BPF instance map in the object: key
    /// [`Found::key`], value `struct inst` (the run's first value slot).
    fn map_name(&self) -> &'static str;
    /// The instances present now.
    fn scan(&mut self) -> Result<Vec<Found>, Error>;
}

/// Every group's source, in the order of the groups.
pub fn sources() -> Vec<Box<dyn Source>> {
    vec![
        Box::new(crate::block::Disks::default()),
        Box::new(crate::net::Interfaces::here()),
        Box::new(crate::irq::Irqs::default()),
    ]
}
