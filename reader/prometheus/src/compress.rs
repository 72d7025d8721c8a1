//! Compression of a page: the content coding a request's `Accept-Encoding`
//! asks for (RFC 9110 §12.5.3), and gzip by flate2.
//!
//! A Prometheus page is text that repeats its names and labels: gzip at
//! level 1 ([`GZIP_LEVEL`]) takes most of what level 6 takes for a
//! fraction of its CPU (measured by `benches/web-cost`, in the README).

use flate2::{Compress, Compression, Crc, FlushCompress, Status};

/// The gzip level of a page (1: fastest; see the module's note).
pub const GZIP_LEVEL: u32 = 1;

/// Most codings of one `Accept-Encoding` looked at (the head's size bounds
/// them anyway; this bounds the work).
const MAX_CODINGS: usize = 64;

/// The content coding of an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Coding {
    /// None: the page as rendered.
    Identity,
    /// gzip (RFC 1952).
    Gzip,
}

/// The coding `accept_encoding` (every `Accept-Encoding` header's value,
/// joined by commas; `None` when there is none) asks for: gzip if it is
/// acceptable (`gzip` or `x-gzip`, or `*`, with `q` above 0) at least as
/// much as identity; else identity, unless identity is refused
/// (`identity;q=0`, or `*;q=0` without `identity`) — then `None`: nothing
/// acceptable (`406`). No header, or an empty one, is identity.
pub fn negotiate(accept_encoding: Option<&str>) -> Option<Coding> {
    let Some(header) = accept_encoding else {
        return Some(Coding::Identity);
    };
    let (mut gzip, mut identity, mut star) = (None::<f32>, None::<f32>, None::<f32>);
    for item in header.split(',').take(MAX_CODINGS) {
        let mut parts = item.split(';').map(str::trim);
        let coding = parts.next().unwrap_or("").to_ascii_lowercase();
        if coding.is_empty() {
            continue;
        }
        let mut q = 1.0f32;
        for p in parts {
            if let Some((k, v)) = p.split_once('=') {
                if k.trim().eq_ignore_ascii_case("q") {
                    // A q that does not parse is not acceptable.
                    q = v
                        .trim()
                        .parse()
                        .ok()
                        .filter(|q: &f32| q.is_finite())
                        .unwrap_or(0.0);
                    q = q.clamp(0.0, 1.0);
                }
            }
        }
        let slot = match coding.as_str() {
            "gzip" | "x-gzip" => &mut gzip,
            "identity" => &mut identity,
            "*" => &mut star,
            _ => continue,
        };
        // The highest q given for a coding counts.
        *slot = Some(slot.map_or(q, |old| old.max(q)));
    }
    let gzip = gzip.or(star).unwrap_or(0.0);
    // Identity is acceptable unless refused, explicitly or by `*;q=0`.
    let identity = identity.or(star.filter(|&q| q == 0.0)).unwrap_or(1.0);
    if gzip > 0.0 && gzip >= identity {
        Some(Coding::Gzip)
    } else if identity > 0.0 {
        Some(Coding::Identity)
    } else {
        None
    }
}

/// The gzip header of RFC 1952 §2.3: magic, deflate, no flags, no
/// time, no extra flags, OS unknown.
const GZIP_HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];

thread_local! {
    /// Each thread's deflate state, kept between pages: making one
    /// allocates and clears some hundreds of KiB, which cost about as much
    /// as compressing a 15 KB page.
    static DEFLATE: std::cell::RefCell<Option<(u32, Compress)>> =
        const { std::cell::RefCell::new(None) };
}

/// `page` compressed with gzip at `level` (0 to 9): flate2's raw deflate
/// between the gzip header and trailer (its CRC-32 and length).
pub fn gzip(page: &[u8], level: u32) -> Vec<u8> {
    let level = level.min(9);
    // Text pages compress 5 to 20 times: a fifth of the page is a fair
    // first allocation.
    let mut out = Vec::with_capacity(page.len() / 5 + 64);
    out.extend_from_slice(&GZIP_HEADER);
    DEFLATE.with(|d| {
        let mut d = d.borrow_mut();
        let (_, z) = match &mut *d {
            Some((l, z)) if *l == level => {
                z.reset();
                d.as_mut().unwrap_or_else(|| unreachable!())
            }
            slot => slot.insert((level, Compress::new(Compression::new(level), false))),
        };
        let start = z.total_in();
        loop {
            let done = (z.total_in() - start) as usize;
            if out.capacity() - out.len() < 64 {
                out.reserve(out.len().max(4096));
            }
            // Into a Vec with room, deflate cannot fail.
            match z.compress_vec(&page[done..], &mut out, FlushCompress::Finish) {
                Ok(Status::StreamEnd) | Err(_) => break,
                Ok(_) => {}
            }
        }
    });
    let mut crc = Crc::new();
    crc.update(page);
    out.extend_from_slice(&crc.sum().to_le_bytes());
    // ISIZE: the length modulo 2^32.
    out.extend_from_slice(&(page.len() as u32).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use Coding::*;

    #[test]
    fn accept_encoding() {
        assert_eq!(negotiate(None), Some(Identity));
        assert_eq!(negotiate(Some("")), Some(Identity));
        assert_eq!(negotiate(Some("gzip")), Some(Gzip));
        assert_eq!(negotiate(Some("GZIP")), Some(Gzip));
        assert_eq!(negotiate(Some("x-gzip")), Some(Gzip));
        // Prometheus' own header.
        assert_eq!(negotiate(Some("gzip")), Some(Gzip));
        // curl --compressed.
        assert_eq!(negotiate(Some("deflate, gzip, br, zstd")), Some(Gzip));
        assert_eq!(negotiate(Some("br")), Some(Identity));
        assert_eq!(negotiate(Some("gzip;q=0")), Some(Identity));
        assert_eq!(negotiate(Some("gzip; q=0.000")), Some(Identity));
        assert_eq!(negotiate(Some("*")), Some(Gzip));
        assert_eq!(negotiate(Some("*;q=0.5, identity")), Some(Identity));
        assert_eq!(
            negotiate(Some("gzip;q=0.5, identity;q=0.9")),
            Some(Identity)
        );
        assert_eq!(negotiate(Some("gzip;q=0.9, identity;q=0.9")), Some(Gzip));
        assert_eq!(negotiate(Some("identity")), Some(Identity));
        // identity;q=0 honoured: gzip, or nothing acceptable.
        assert_eq!(negotiate(Some("gzip, identity;q=0")), Some(Gzip));
        assert_eq!(negotiate(Some("identity;q=0")), None);
        assert_eq!(negotiate(Some("br, identity;q=0")), None);
        assert_eq!(negotiate(Some("*;q=0")), None);
        assert_eq!(negotiate(Some("*;q=0, gzip")), Some(Gzip));
        assert_eq!(negotiate(Some("*;q=0, identity")), Some(Identity));
        // A q that is not a number is not acceptable.
        assert_eq!(negotiate(Some("gzip;q=high")), Some(Identity));
        assert_eq!(negotiate(Some("gzip;q=NaN")), Some(Identity));
        // The highest q of a coding given twice.
        assert_eq!(negotiate(Some("gzip;q=0, gzip;q=1")), Some(Gzip));
    }

    #[test]
    fn gzip_round_trips() {
        use std::io::Read;
        let page = "perfabi_x_total{a=\"b\"} 1\n".repeat(1000);
        // Twice a level: the second reuses the thread's deflate state.
        for level in [1, 1, 6, 6, 1] {
            let z = gzip(page.as_bytes(), level);
            assert!(z.len() * 10 < page.len(), "{} of {}", z.len(), page.len());
            let mut back = String::new();
            flate2::read::GzDecoder::new(&z[..])
                .read_to_string(&mut back)
                .unwrap();
            assert_eq!(back, page);
        }
        // Empty, and larger than the first allocation, incompressible.
        let noise: Vec<u8> = (0..200_000u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8)
            .collect();
        for data in [&b""[..], &noise[..]] {
            let mut back = Vec::new();
            flate2::read::GzDecoder::new(&gzip(data, 1)[..])
                .read_to_end(&mut back)
                .unwrap();
            assert_eq!(back, data);
        }
    }
}
