//! A decoded entry of the ABI 1.0 instance table (`spec/PERFABI.md` §5):
//! what the view reads and the families view presents as a family of one
//! instance.

use alloc::string::String;

use crate::layout::{Semantics, ValueType};

/// A live instance as read from the instance table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// Slot index: the index of its value in every per-CPU counter array.
    pub slot: u32,
    /// Registration id (changes when the slot is reused).
    pub reg_id: u64,
    /// Name.
    pub name: String,
    /// Unit (may be empty).
    pub unit: String,
    /// Counter or instant.
    pub semantics: Semantics,
    /// Unsigned or signed.
    pub value_type: ValueType,
}
