//! The loader's side of the `control` program (`BPF_PROG_TYPE_SYSCALL`,
//! run with `BPF_PROG_TEST_RUN`): after the map is frozen, the only way to
//! change the segment's header.

use std::mem::{offset_of, size_of};

use libbpf_rs::ProgramInput;

use crate::error::Error;
use crate::skel::types::control_args;

/// `enum control_op` of `perfabi.bpf.c`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    /// `heartbeat_ns = now`.
    Beat = 1,
    /// `heartbeat_ns = now`, `flags |= CLOSED`.
    Close = 2,
    /// `gen1 + 1`, store the header words given, `gen2 = gen1` (§7.3).
    Meta = 3,
}

/// The most words one [`Op::Meta`] stores (`CONTROL_MAX_WORDS`).
pub const MAX_WORDS: usize = 8;

/// Runs `control` with `op` and, for [`Op::Meta`], the header `words`
/// (word index, value) to store.
pub fn run(prog: &libbpf_rs::ProgramMut<'_>, op: Op, words: &[(u32, u64)]) -> Result<(), Error> {
    if words.len() > MAX_WORDS {
        return Err(Error::Map(format!(
            "at most {MAX_WORDS} header words at once"
        )));
    }
    // The context, laid out as the skeleton's `control_args` (the program's
    // own struct): native-endian fields at their offsets.
    let mut ctx = vec![0u8; size_of::<control_args>()];
    let mut put = |at: usize, bytes: &[u8]| ctx[at..at + bytes.len()].copy_from_slice(bytes);
    put(offset_of!(control_args, op), &(op as u32).to_ne_bytes());
    put(
        offset_of!(control_args, nr_words),
        &(words.len() as u32).to_ne_bytes(),
    );
    for (k, &(w, v)) in words.iter().enumerate() {
        put(offset_of!(control_args, word) + 4 * k, &w.to_ne_bytes());
        put(offset_of!(control_args, value) + 8 * k, &v.to_ne_bytes());
    }
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
