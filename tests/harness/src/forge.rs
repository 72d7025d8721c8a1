//! Changing a live segment file behind its writer's back, the way a writer
//! that died mid-update, or a broken or hostile one, leaves it.

use std::os::unix::fs::FileExt;
use std::path::Path;

use perfabi::layout::{header_from_bytes, CPU_SEQ_WORD, HEADER_SIZE_V1_0};

/// Sets CPU `cpu`'s sequence word in the segment file at `path` to `value`,
/// or, with `None`, makes it odd (a writer dead mid-update); returns what it
/// held.
pub fn set_cpu_sequence(path: &Path, cpu: u64, value: Option<u64>) -> u64 {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut h = [0u8; HEADER_SIZE_V1_0];
    f.read_exact_at(&mut h, 0).unwrap();
    let h = header_from_bytes(&h);
    let at = h.cpu_area_offset + cpu * h.cpu_block_size + CPU_SEQ_WORD as u64 * 8;
    let mut old = [0u8; 8];
    f.read_exact_at(&mut old, at).unwrap();
    let old = u64::from_ne_bytes(old);
    f.write_all_at(&value.unwrap_or(old | 1).to_ne_bytes(), at)
        .unwrap();
    old
}

/// Adds `delta` (wrapping) to value `slot` of CPU `cpu`'s counter array in
/// the segment file at `path`, as a broken or hostile writer would: behind
/// the writer's back, the CPU's sequence word left as it is (1 added to a
/// histogram member's first word, its count, makes a consistent copy
/// whose count is not its buckets' sum). Returns what the word held.
pub fn add_to_value(path: &Path, cpu: u64, slot: u64, delta: u64) -> u64 {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap();
    let mut h = [0u8; HEADER_SIZE_V1_0];
    f.read_exact_at(&mut h, 0).unwrap();
    let h = header_from_bytes(&h);
    let at = h.cpu_area_offset + cpu * h.cpu_block_size + u64::from(h.counters_offset) + slot * 8;
    let mut old = [0u8; 8];
    f.read_exact_at(&mut old, at).unwrap();
    let old = u64::from_ne_bytes(old);
    f.write_all_at(&old.wrapping_add(delta).to_ne_bytes(), at)
        .unwrap();
    old
}
