//! Copying a run of segment words with one 16-byte load per aligned pair.
//!
//! The core copies a run of value words with 8-byte `Relaxed` loads
//! ([`perfabi::protocol::load_words`]): atomic loads are never merged or
//! vectorised, so a copy costs one load and one store per word, where
//! `memcpy` moves 16 or 32 bytes at a time. `copy_words` loads each
//! 16-byte aligned pair of words with one `vmovdqa`.
//!
//! That is an atomic load of both words, not a data race: on processors
//! that enumerate AVX, Intel and AMD guarantee that the 16-byte memory
//! operations of `VMOVDQA` (VEX.128) on an aligned address are carried out
//! atomically (Intel SDM vol. 3A §9.1.1; AMD APM vol. 2 §7.3.2), the
//! guarantee perfabi's writer already relies on for its paired stores
//! (spec §7). So each word is read whole, as an 8-byte atomic load reads
//! it, and what lands in `out` is what two `Relaxed` loads of the pair
//! could have returned, which is what [`perfabi::CopyWords`] asks of a
//! copier: the protocol's loom proofs, made with 8-byte loads, cover it.
//! Wider loads (32 bytes) have no such guarantee and are not used.
//!
//! [`copier`] picks it on processors with AVX and `load_words` elsewhere.
use perfabi::Word;

/// The copier for this processor: `copy_words` where 16-byte aligned
/// loads are single-copy atomic (AVX), else the core's 8-byte loads.
pub fn copier() -> perfabi::CopyWords {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx") {
        return copy_words;
    }
    perfabi::protocol::load_words
}

/// Copies `words[start..][..out.len()]` into `out`, each aligned pair of
/// words with one 16-byte load; a word before the first aligned pair or
/// after the last is loaded alone. Panics if the range is out of bounds.
///
/// Only [`copier`] hands it out, on processors with AVX: elsewhere a
/// 16-byte load may be carried out as two, and although each half would
/// still be an aligned 8-byte access, no manual promises it.
#[cfg(target_arch = "x86_64")]
fn copy_words(words: &[Word], start: usize, out: &mut [u64]) {
    use core::sync::atomic::Ordering::Relaxed;
    let src = &words[start..start + out.len()];
    let (mut i, n) = (0, src.len());
    if n > 0 && !(src.as_ptr() as usize).is_multiple_of(16) {
        out[0] = src[0].load(Relaxed);
        i = 1;
    }
    // Whole pairs from `i`: `src[i]` is 16-byte aligned.
    let pairs = (n - i) / 2;
    let (from, to) = (
        src[i..].as_ptr() as *const u8,
        out[i..].as_mut_ptr() as *mut u8,
    );
    let bytes = pairs * 16;
    let mut at = 0;
    while at + 64 <= bytes {
        // SAFETY: `from + at .. + 64` lies inside `src` (`at + 64 <= bytes`,
        // the pairs' bytes from `src[i]`) and is 16-byte aligned (`src[i]`
        // is, and `at` a multiple of 16): `vmovdqa` neither faults on
        // alignment nor reads outside the words, which only atomic accesses
        // change, and on this processor (AVX, see `copier`) loads each
        // pair single-copy atomically. `to + at .. + 64` lies inside `out`,
        // borrowed exclusively here; `vmovdqu` takes any alignment. No
        // stack, no flags.
        unsafe {
            core::arch::asm!(
                "vmovdqa {a}, xmmword ptr [{from} + {at}]",
                "vmovdqa {b}, xmmword ptr [{from} + {at} + 16]",
                "vmovdqa {c}, xmmword ptr [{from} + {at} + 32]",
                "vmovdqa {d}, xmmword ptr [{from} + {at} + 48]",
                "vmovdqu xmmword ptr [{to} + {at}], {a}",
                "vmovdqu xmmword ptr [{to} + {at} + 16], {b}",
                "vmovdqu xmmword ptr [{to} + {at} + 32], {c}",
                "vmovdqu xmmword ptr [{to} + {at} + 48], {d}",
                from = in(reg) from,
                to = in(reg) to,
                at = in(reg) at,
                a = out(xmm_reg) _,
                b = out(xmm_reg) _,
                c = out(xmm_reg) _,
                d = out(xmm_reg) _,
                options(nostack, preserves_flags),
            );
        }
        at += 64;
    }
    while at < bytes {
        // SAFETY: as above, for the 16 bytes at `at` (`at + 16 <= bytes`:
        // `bytes` and `at` are multiples of 16).
        unsafe {
            core::arch::asm!(
                "vmovdqa {a}, xmmword ptr [{from} + {at}]",
                "vmovdqu xmmword ptr [{to} + {at}], {a}",
                from = in(reg) from,
                to = in(reg) to,
                at = in(reg) at,
                a = out(xmm_reg) _,
                options(nostack, preserves_flags),
            );
        }
        at += 16;
    }
    if i + 2 * pairs < n {
        out[n - 1] = src[n - 1].load(Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::sync::atomic::Ordering::Relaxed;

    /// Every start and length over a buffer, at both alignments of its
    /// first word: the same words as the core's 8-byte copy, and nothing
    /// outside `out` written.
    #[test]
    #[cfg(target_arch = "x86_64")]
    fn copies_exactly_what_eight_byte_loads_copy() {
        if !std::arch::is_x86_feature_detected!("avx") {
            // `vmovdqa` (VEX) would be an illegal instruction.
            perfabi_test_harness::skip(
                "pair_loads::tests::copies_exactly_what_eight_byte_loads_copy",
                "this processor has no AVX",
            );
            return;
        }
        let words: Vec<Word> = (0..80u64)
            .map(|i| Word::new(i.wrapping_mul(0x9e37_79b9_7f4a_7c15)))
            .collect();
        for start in 0..20 {
            for len in 0..50 {
                let mut want = vec![0u64; len];
                perfabi::protocol::load_words(&words, start, &mut want);
                let mut got = vec![u64::MAX; len + 2];
                copy_words(&words, start, &mut got[1..=len]);
                assert_eq!(&got[1..=len], &want[..], "start {start}, len {len}");
                assert_eq!((got[0], got[len + 1]), (u64::MAX, u64::MAX));
            }
        }
    }

    #[test]
    #[should_panic]
    #[cfg(target_arch = "x86_64")]
    fn refuses_a_run_past_the_end() {
        // Out of bounds is found before any load, with or without AVX.
        let words: Vec<Word> = (0..8u64).map(Word::new).collect();
        copy_words(&words, 5, &mut [0; 4]);
    }

    /// While another thread moves every word between two values that
    /// differ in both halves, each copied word is one of them: no load
    /// tears a word.
    #[test]
    fn no_word_is_torn_while_it_changes() {
        const A: u64 = 0x0000_0000_ffff_ffff;
        const B: u64 = 0x0000_0001_0000_0000;
        let words: std::sync::Arc<Vec<Word>> =
            std::sync::Arc::new((0..64).map(|_| Word::new(A)).collect());
        let stop = std::sync::Arc::new(core::sync::atomic::AtomicBool::new(false));
        let flipper = {
            let (words, stop) = (words.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut flips = 0u64;
                while !stop.load(Relaxed) {
                    for w in words.iter() {
                        let v = w.load(Relaxed);
                        w.store(if v == A { B } else { A }, Relaxed);
                    }
                    flips += 1;
                }
                flips
            })
        };
        let copy = copier();
        let mut out = [0u64; 63];
        let mut both = [false; 2];
        for _ in 0..200_000 {
            copy(&words, 1, &mut out);
            for &v in &out {
                assert!(v == A || v == B, "torn word {v:#x}");
                both[usize::from(v == B)] = true;
            }
        }
        stop.store(true, Relaxed);
        let flips = flipper.join().unwrap();
        assert!(
            flips > 0 && both == [true, true],
            "the words changed under the copies"
        );
    }
}
