//! A hostile file: 12 KiB on disk, the largest legal geometry in its header.

use std::path::Path;

use perfabi::{Geometry, WriterIdentity};

/// Writes at `path` a file with the largest legal geometry — 8,192 CPUs,
/// 65,536 instance slots (all claimed used), 1,048,576 DAMON slots per CPU,
/// a segment of about 516 GiB — that is all holes but its first three pages
/// (the header page, the first page of the table and of CPU 0's block).
/// The writer it names is the calling process. Returns the segment size.
pub fn sparse_giant(path: &Path) -> u64 {
    use std::os::unix::fs::FileExt;
    let g = Geometry {
        page_size: 4096,
        nr_cpus: perfabi::layout::MAX_CPUS,
        max_instances: perfabi::layout::MAX_INSTANCES,
        damon_capacity: perfabi::layout::MAX_DAMON_CAPACITY,
        max_families: 0,
        max_members: 0,
    };
    let mut h = g
        .header(&WriterIdentity {
            epoch: 9,
            pid: u64::from(std::process::id()),
            start_ns: perfabi_shm::host::process_start_ns(None).unwrap(),
            heartbeat_interval_ns: 0,
            first_heartbeat_ns: perfabi_shm::host::boottime_ns(),
        })
        .unwrap();
    h.instances_used = u64::from(perfabi::layout::MAX_INSTANCES);
    let f = std::fs::File::create(path).unwrap();
    f.set_len(h.segment_size).unwrap();
    let page = [0u8; 4096];
    f.write_all_at(bytemuck::bytes_of(&h), 0).unwrap();
    f.write_all_at(&page, h.instances_offset).unwrap();
    f.write_all_at(&page, h.cpu_area_offset).unwrap();
    h.segment_size
}
