//! What the spec oracles (`spec_oracle.rs`, `spec_oracle_families.rs`)
//! share: byte access to an image, the naming rules of `spec/PERFABI.md`
//! §2 and §5 written from the text (not from the reader's code), and the
//! proptest set-up. Each oracle uses what it needs.
#![allow(dead_code)]

use std::sync::atomic::AtomicU64;

use proptest::prelude::*;

/// Proptest cases: `default`, or `PERFABI_FUZZ_CASES`.
pub fn cases(default: u32) -> ProptestConfig {
    ProptestConfig {
        cases: std::env::var("PERFABI_FUZZ_CASES")
            .ok()
            .and_then(|c| c.parse().ok())
            .unwrap_or(default),
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

/// A native `u16` at byte `at`.
pub fn u16_at(b: &[u8], at: usize) -> u64 {
    u64::from(u16::from_ne_bytes(b[at..at + 2].try_into().unwrap()))
}
/// A native `u32` at byte `at`.
pub fn u32_at(b: &[u8], at: usize) -> u64 {
    u64::from(u32::from_ne_bytes(b[at..at + 4].try_into().unwrap()))
}
/// A native `u64` at byte `at`.
pub fn u64_at(b: &[u8], at: usize) -> u64 {
    u64::from_ne_bytes(b[at..at + 8].try_into().unwrap())
}
/// Stores the low `size` bytes of `v` at byte `at`.
pub fn put(b: &mut [u8], at: usize, size: usize, v: u64) {
    b[at..at + size].copy_from_slice(&v.to_ne_bytes()[..size]);
}

/// An image as the shared words a reader reads.
pub fn view_of(b: &[u8]) -> Vec<AtomicU64> {
    b.chunks_exact(8)
        .map(|c| AtomicU64::new(u64::from_ne_bytes(c.try_into().unwrap())))
        .collect()
}

/// §2: the bytes before the first NUL; `None` without a NUL.
pub fn cstr(field: &[u8]) -> Option<&[u8]> {
    field.iter().position(|&c| c == 0).map(|n| &field[..n])
}

/// §5: a name is 1..=63 bytes, NUL-terminated within 64, dot-separated
/// parts of `[A-Za-z_][A-Za-z0-9_]*`, starting with a letter.
pub fn name_rule(field: &[u8]) -> Option<String> {
    let s = std::str::from_utf8(cstr(field)?).ok()?;
    let good = !s.is_empty()
        && s.as_bytes()[0].is_ascii_alphabetic()
        && s.split('.').all(|p| {
            let mut c = p.bytes();
            matches!(c.next(), Some(x) if x.is_ascii_alphabetic() || x == b'_')
                && c.all(|x| x.is_ascii_alphanumeric() || x == b'_')
        });
    good.then(|| s.to_string())
}

/// §5: dots as underscores, then reserved suffixes off while something is left.
pub fn clash_key(name: &str) -> String {
    let mut k = name.replace('.', "_");
    'strip: loop {
        for s in [
            "_total", "_created", "_count", "_sum", "_bucket", "_gcount", "_gsum", "_info",
        ] {
            if k.len() > s.len() && k.ends_with(s) {
                k.truncate(k.len() - s.len());
                continue 'strip;
            }
        }
        return k;
    }
}
