//! What a web configuration makes of the server ([`Web`]): TLS, the users
//! of basic authentication, the headers added to every answer, replaced
//! whole when the file is read again (`SIGHUP`); and the endpoint's own
//! counts ([`Stats`]), which every server keeps across reloads.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use hyper::header::{HeaderName, HeaderValue};
use perfabi_shm::safe_open::escape_path;
use tokio_rustls::TlsAcceptor;

use crate::auth::Users;
use crate::selfmetrics::Stats;
use crate::tls::HandshakeLog;
use crate::web_config::{ConfigError, WebConfig};

/// The settings of one reading of the web configuration.
pub(crate) struct Settings {
    /// TLS on every connection, if configured.
    pub(crate) tls: Option<TlsAcceptor>,
    /// The users a request must be one of, if any.
    pub(crate) users: Arc<Users>,
    /// Added to every answer.
    pub(crate) headers: Vec<(HeaderName, HeaderValue)>,
}

impl Settings {
    fn of(config: &WebConfig) -> Result<Self, ConfigError> {
        let tls = match &config.tls {
            Some(t) => Some(TlsAcceptor::from(crate::tls::server_config(t)?)),
            None => None,
        };
        Ok(Self {
            tls,
            users: Users::new(config.users.clone()),
            headers: config.headers.clone(),
        })
    }
}

/// The server's web settings: plain HTTP, no authentication and no extra
/// header by default ([`Web::default`]), or what a web configuration asks
/// ([`Web::from_config`], [`Web::load`]: the latter is read again on
/// `SIGHUP`).
pub struct Web {
    settings: RwLock<Arc<Settings>>,
    /// The file read again on `SIGHUP`, if any.
    source: Option<PathBuf>,
    /// The endpoint's own counts.
    pub(crate) stats: Arc<Stats>,
    /// The log of failed handshakes.
    pub(crate) handshakes: HandshakeLog,
}

impl Default for Web {
    fn default() -> Self {
        Self::of(
            Settings {
                tls: None,
                users: Users::new(Default::default()),
                headers: Vec::new(),
            },
            None,
        )
    }
}

impl Web {
    fn of(settings: Settings, source: Option<PathBuf>) -> Self {
        Self {
            settings: RwLock::new(Arc::new(settings)),
            source,
            stats: Arc::default(),
            handshakes: HandshakeLog::default(),
        }
    }

    /// The settings `config` asks for: its certificate and key loaded (and
    /// client authorities, if any), its users' hashes kept. An error names
    /// the field at fault.
    pub fn from_config(config: &WebConfig) -> Result<Self, ConfigError> {
        Ok(Self::of(Settings::of(config)?, None))
    }

    /// The settings of the web configuration file at `path`
    /// ([`WebConfig::load`], [`Web::from_config`]), read again on `SIGHUP`
    /// by [`crate::serve_with`].
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let settings = Settings::of(&WebConfig::load(path)?)?;
        Ok(Self::of(settings, Some(path.to_path_buf())))
    }

    /// The settings in force.
    pub(crate) fn settings(&self) -> Arc<Settings> {
        Arc::clone(&self.settings.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// Whether connections speak TLS.
    pub fn is_tls(&self) -> bool {
        self.settings().tls.is_some()
    }

    /// Whether requests need a user's credentials.
    pub fn needs_auth(&self) -> bool {
        self.settings().users.required()
    }

    /// The file read again on `SIGHUP`, if any.
    pub(crate) fn source(&self) -> Option<&Path> {
        self.source.as_deref()
    }

    /// Reads the file again ([`Web::load`]): its settings replace the ones
    /// in force for new connections (TLS) and new requests (users,
    /// headers); a file that is wrong, or that would turn TLS on or off
    /// (the port's scheme: restart for that), leaves them as they are.
    /// Logged either way, one line.
    pub(crate) fn reload(&self) {
        let Some(path) = &self.source else { return };
        let shown = escape_path(path);
        let settings = WebConfig::load(path).and_then(|c| Settings::of(&c));
        match settings {
            Ok(s) if s.tls.is_some() != self.is_tls() => eprintln!(
                "perfabi-prometheus: SIGHUP: {shown} would turn TLS {}: restart the endpoint \
                 for that; the settings in force are kept",
                if s.tls.is_some() { "on" } else { "off" }
            ),
            Ok(s) => {
                *self.settings.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(s);
                eprintln!("perfabi-prometheus: SIGHUP: {shown} read again, its settings in force");
            }
            Err(e) => eprintln!(
                "perfabi-prometheus: SIGHUP: {shown}: {e}; the settings in force are kept"
            ),
        }
    }
}
