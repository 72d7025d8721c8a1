//! Socket activation: the listening socket systemd hands the endpoint
//! (`sd_listen_fds(3)`: `LISTEN_FDS` descriptors from 3 on, for the
//! process `LISTEN_PID`), taken by the `listenfd` crate, which checks each
//! is a TCP stream socket and clears the variables so no child inherits
//! them. The unit `perfabi-prometheus.socket` binds the port, so the
//! service itself needs no capability and may start on the first scrape.

use std::net::{SocketAddr, TcpListener};

use crate::server::{listen, RECV_BUFFER};

/// Where the endpoint's listening socket came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// Passed by systemd (socket activation): `--listen` does not apply.
    Systemd,
    /// Bound here, on the `--listen` address.
    Bound,
}

/// The socket to serve on: the one systemd passed, if it passed any, else
/// a new one on `addr` ([`listen`]). The error is a line for the user:
/// `addr` cannot be bound, or the passed sockets are more than one, or one
/// that is not a TCP stream socket (the unit's `.socket` has one
/// `ListenStream=` of an IP address and port).
pub fn listener(addr: SocketAddr) -> Result<(TcpListener, Origin), String> {
    let mut passed = listenfd::ListenFd::from_env();
    let refused = |why: String| format!("the sockets systemd passed (LISTEN_FDS): {why}");
    match passed.len() {
        0 => listen(addr)
            .map(|l| (l, Origin::Bound))
            .map_err(|e| format!("cannot listen on {addr}: {e}")),
        1 => {
            let listener = passed
                .take_tcp_listener(0)
                .map_err(|e| {
                    refused(format!(
                        "{e}: give the .socket unit one ListenStream= of an address and port"
                    ))
                })?
                .ok_or_else(|| refused("descriptor 3 was already taken".into()))?;
            // As a socket bound here: accepted connections inherit it.
            socket2::SockRef::from(&listener)
                .set_recv_buffer_size(RECV_BUFFER)
                .map_err(|e| refused(format!("cannot set its receive buffer: {e}")))?;
            Ok((listener, Origin::Systemd))
        }
        n => Err(refused(format!(
            "{n} sockets, and the endpoint serves one: give the .socket unit one ListenStream="
        ))),
    }
}
