//! The loader's side of the `control` program (`BPF_PROG_TYPE_SYSCALL`,
//! run with `BPF_PROG_TEST_RUN`, `src/bpf/control.bpf.h`): after the map is
//! frozen, the only way to change the segment's header and tables.

use std::mem::size_of;

use libbpf_rs::{MapCore, MapFlags, ProgramInput};

use crate::error::Error;
use crate::tables::Change;

/// `enum control_op` of `control.bpf.h`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `heartbeat_ns = now`.
    Beat = 1,
    /// `heartbeat_ns = now`, `flags |= CLOSED`.
    Close = 2,
    /// Apply the staged change under one generation change (§7.3).
    Tables = 3,
}

/// Stores one staged change holds (`STAGE_STORES`).
pub const STAGE_STORES: usize = 1024;
/// Zeroed runs one staged change holds (`STAGE_ZEROS`).
pub const STAGE_ZEROS: usize = 64;

/// The bytes of `struct stage` (`control.bpf.h`): two `u32` counts, then
/// `STAGE_STORES` `{u32 at, u32 pad, u64 value}`, then `STAGE_ZEROS`
/// `{u32 slot, u32 words}`.
pub const STAGE_SIZE: usize = 8 + STAGE_STORES * 16 + STAGE_ZEROS * 8;

/// `struct stage` holding `c` (at most the stage's room).
fn stage_bytes(c: &Change) -> Vec<u8> {
    let mut b = vec![0u8; STAGE_SIZE];
    b[0..4].copy_from_slice(&(c.stores.len() as u32).to_ne_bytes());
    b[4..8].copy_from_slice(&(c.zeros.len() as u32).to_ne_bytes());
    for (k, &(at, v)) in c.stores.iter().enumerate() {
        let o = 8 + 16 * k;
        b[o..o + 4].copy_from_slice(&at.to_ne_bytes());
        b[o + 8..o + 16].copy_from_slice(&v.to_ne_bytes());
    }
    for (k, &(slot, n)) in c.zeros.iter().enumerate() {
        let o = 8 + 16 * STAGE_STORES + 8 * k;
        b[o..o + 4].copy_from_slice(&slot.to_ne_bytes());
        b[o + 4..o + 8].copy_from_slice(&n.to_ne_bytes());
    }
    b
}

/// Runs `control` with `op`.
pub fn run(prog: &libbpf_rs::ProgramMut<'_>, op: Op) -> Result<(), Error> {
    // `struct control_args`: the op, 4 bytes of padding.
    let mut ctx = [0u8; 8];
    ctx[..4].copy_from_slice(&(op as u32).to_ne_bytes());
    debug_assert_eq!(ctx.len(), 2 * size_of::<u32>());
    let input = ProgramInput {
        context_in: Some(&mut ctx),
        ..Default::default()
    };
    let out = prog
        .test_run(input)
        .map_err(|e| Error::Map(format!("cannot run the control program ({op:?}): {e}")))?;
    if out.return_value != 0 {
        return Err(Error::Map(format!("the control program refused {op:?}")));
    }
    Ok(())
}

/// Applies `change`: staged and applied in as few generation changes as
/// the stage's room allows, each a whole number of the parts `change` was
/// made of (`parts`: the change of each instance, in order).
pub fn apply(
    prog: &libbpf_rs::ProgramMut<'_>,
    stage: &libbpf_rs::MapMut<'_>,
    parts: &[Change],
) -> Result<(), Error> {
    let mut batch = Change::default();
    let flush = |batch: &mut Change| -> Result<(), Error> {
        if batch.is_empty() {
            return Ok(());
        }
        stage
            .update(&0u32.to_ne_bytes(), &stage_bytes(batch), MapFlags::ANY)
            .map_err(|e| Error::Map(format!("cannot stage a table change: {e}")))?;
        *batch = Change::default();
        run(prog, Op::Tables)
    };
    for p in parts {
        if p.stores.len() > STAGE_STORES || p.zeros.len() > STAGE_ZEROS {
            return Err(Error::Map(format!(
                "a table change of {} stores and {} runs is more than the stage holds",
                p.stores.len(),
                p.zeros.len()
            )));
        }
        if batch.stores.len() + p.stores.len() > STAGE_STORES
            || batch.zeros.len() + p.zeros.len() > STAGE_ZEROS
        {
            flush(&mut batch)?;
        }
        batch.extend(p.clone());
    }
    flush(&mut batch)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stage_is_laid_out_as_the_program_reads_it() {
        let c = Change {
            stores: vec![(5, 0x1122), (7, 9)],
            zeros: vec![(100, 33)],
        };
        let b = stage_bytes(&c);
        assert_eq!(b.len(), STAGE_SIZE);
        assert_eq!(&b[0..8], &[2, 0, 0, 0, 1, 0, 0, 0]);
        assert_eq!(&b[8..12], &5u32.to_ne_bytes());
        assert_eq!(&b[16..24], &0x1122u64.to_ne_bytes());
        assert_eq!(&b[24..28], &7u32.to_ne_bytes());
        let z = 8 + 16 * STAGE_STORES;
        assert_eq!(&b[z..z + 8], &[100, 0, 0, 0, 33, 0, 0, 0]);
    }
}
