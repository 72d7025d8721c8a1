//! What a web configuration makes of the server ([`Web`]): TLS, the users
//! of basic authentication, the headers added to every answer; and the
//! endpoint's own counts ([`Stats`]), which every server keeps.

use std::sync::Arc;

use hyper::header::{HeaderName, HeaderValue};
use tokio_rustls::TlsAcceptor;

use crate::auth::Users;
use crate::selfmetrics::Stats;
use crate::tls::HandshakeLog;
use crate::web_config::{ConfigError, WebConfig};

/// The server's web settings: plain HTTP, no authentication and no extra
/// header by default ([`Web::default`]), or what a web configuration
/// file asks ([`Web::from_config`]).
pub struct Web {
    /// TLS on every connection, if configured.
    pub(crate) tls: Option<TlsAcceptor>,
    /// The users a request must be one of, if any.
    pub(crate) users: Arc<Users>,
    /// Added to every answer.
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
    /// The endpoint's own counts.
    pub(crate) stats: Arc<Stats>,
    /// The log of failed handshakes.
    pub(crate) handshakes: HandshakeLog,
}

impl Default for Web {
    fn default() -> Self {
        Self {
            tls: None,
            users: Users::new(Default::default()),
            headers: Vec::new(),
            stats: Arc::default(),
            handshakes: HandshakeLog::default(),
        }
    }
}

impl Web {
    /// The settings `config` asks for: its certificate and key loaded (and
    /// client authorities, if any), its users' hashes kept. An error names
    /// the field at fault.
    pub fn from_config(config: &WebConfig) -> Result<Self, ConfigError> {
        let tls = match &config.tls {
            Some(t) => Some(TlsAcceptor::from(crate::tls::server_config(t)?)),
            None => None,
        };
        Ok(Self {
            tls,
            users: Users::new(config.users.clone()),
            headers: config.headers.clone(),
            ..Self::default()
        })
    }

    /// Whether connections speak TLS.
    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// Whether requests need a user's credentials.
    pub fn needs_auth(&self) -> bool {
        self.users.required()
    }
}
