//! A client speaking HTTP/2 first ("prior knowledge", RFC 9113 §3.3) is
//! answered in HTTP/2, that this server speaks HTTP/1.1 only: the server's
//! preface (an empty `SETTINGS` frame) and a `GOAWAY` frame with the error
//! `HTTP_1_1_REQUIRED`, on which a client knows to use HTTP/1.1 (hyper's
//! HTTP/1 server closes such a connection without a word, and the client
//! is left to guess why).

/// What an HTTP/2 client sends first (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Why the connection is refused, in the `GOAWAY` frame's debug data.
const WHY: &[u8] = b"perfabi-prometheus serves HTTP/1.1 only";

/// `HTTP_1_1_REQUIRED` (RFC 9113 §7).
const HTTP_1_1_REQUIRED: u32 = 0xd;

/// Whether `first`, the first bytes a client sent, begin the HTTP/2
/// preface as far as they go (at least its first line).
pub(crate) fn is_preface(first: &[u8]) -> bool {
    let n = first.len().min(PREFACE.len());
    n >= 16 && first[..n] == PREFACE[..n]
}

/// The refusal: an empty `SETTINGS` frame, then `GOAWAY` (last stream 0,
/// `HTTP_1_1_REQUIRED`, [`WHY`]).
pub(crate) fn refusal() -> Vec<u8> {
    let mut out = Vec::with_capacity(9 + 9 + 8 + WHY.len());
    // Frame header: 24-bit length, type, flags, 31-bit stream id.
    let frame = |out: &mut Vec<u8>, kind: u8, payload: &[u8]| {
        let len = u32::try_from(payload.len()).unwrap_or(0);
        out.extend_from_slice(&len.to_be_bytes()[1..]);
        out.extend_from_slice(&[kind, 0, 0, 0, 0, 0]);
        out.extend_from_slice(payload);
    };
    frame(&mut out, 0x4, &[]);
    let mut goaway = Vec::with_capacity(8 + WHY.len());
    goaway.extend_from_slice(&0u32.to_be_bytes());
    goaway.extend_from_slice(&HTTP_1_1_REQUIRED.to_be_bytes());
    goaway.extend_from_slice(WHY);
    frame(&mut out, 0x7, &goaway);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_preface_and_the_refusal() {
        assert!(is_preface(PREFACE));
        assert!(is_preface(b"PRI * HTTP/2.0\r\n"));
        assert!(!is_preface(b"PRI * HTTP/2.0"));
        assert!(!is_preface(b"GET / HTTP/1.1\r\n\r\n"));
        let r = refusal();
        // SETTINGS: length 0, type 4, stream 0.
        assert_eq!(&r[..9], &[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        // GOAWAY: its length, type 7, stream 0, last stream 0, error 0xd.
        let len = 8 + WHY.len();
        assert_eq!(&r[9..12], &[0, 0, len as u8]);
        assert_eq!(&r[12..18], &[7, 0, 0, 0, 0, 0]);
        assert_eq!(&r[18..26], &[0, 0, 0, 0, 0, 0, 0, 0xd]);
        assert_eq!(&r[26..], WHY);
    }
}
