//! The web configuration file (`--web.config.file`): Prometheus
//! exporter-toolkit's `web-config.yml`, read once at start, so that a file
//! written for node_exporter serves `/metrics` here alike: TLS
//! (`tls_server_config`), basic authentication with bcrypt hashes
//! (`basic_auth_users`) and extra answer headers
//! (`http_server_config.headers`).
//!
//! Every field of the toolkit's format is known; an unknown one, a bad
//! value, or a setting rustls cannot honour is an error naming the field
//! (the program exits 2 with it), never silently ignored. Relative file
//! names are taken from the configuration file's folder, as the toolkit
//! does.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use hyper::header::{HeaderName, HeaderValue};
use perfabi_shm::safe_open::escape_path;
use serde::Deserialize;

/// The largest configuration, certificate or key file read (1 MiB): a
/// web-config.yml or a PEM chain is a few KiB.
pub const MAX_FILE_BYTES: u64 = 1 << 20;

/// The most `basic_auth_users` a file may list (the toolkit: "meant for
/// simple use cases, with a few users").
pub const MAX_USERS: usize = 1024;

/// A web configuration that is wrong: the field (its path in the file, as
/// `tls_server_config.min_version`) and what is wrong with it, on one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The field, dotted from the top of the file (empty: the file as a
    /// whole).
    pub field: String,
    /// What is wrong, and what to do.
    pub message: String,
}

impl ConfigError {
    /// `field`'s error.
    pub(crate) fn new(field: &str, message: impl Into<String>) -> Self {
        Self {
            field: field.to_string(),
            message: message.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let one_line = self.message.replace(['\n', '\r'], " ");
        if self.field.is_empty() {
            f.write_str(&one_line)
        } else {
            write!(f, "{}: {one_line}", self.field)
        }
    }
}

impl std::error::Error for ConfigError {}

/// A PEM text: from a file (`*_file`) or given inline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pem {
    /// The file's path (relative ones already joined to the
    /// configuration's folder).
    File(PathBuf),
    /// The text itself.
    Inline(String),
}

impl Pem {
    /// The PEM text, read (a file) at most [`MAX_FILE_BYTES`].
    pub fn read(&self, field: &str) -> Result<Vec<u8>, ConfigError> {
        match self {
            Pem::File(p) => read_small_file(p).map_err(|e| ConfigError::new(field, e)),
            Pem::Inline(s) => Ok(s.as_bytes().to_vec()),
        }
    }
}

/// How the server treats client certificates (`client_auth_type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// `NoClientCert` (the default): none asked.
    None,
    /// `VerifyClientCertIfGiven`: one is asked, verified if given.
    VerifyIfGiven,
    /// `RequireAndVerifyClientCert`: one is required and verified.
    RequireAndVerify,
}

/// A TLS protocol version (`min_version`, `max_version`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TlsVersion {
    /// `TLS12`.
    Tls12,
    /// `TLS13`.
    Tls13,
}

/// An elliptic curve of the key exchange (`curve_preferences`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Curve {
    /// `X25519`.
    X25519,
    /// `CurveP256` (secp256r1).
    P256,
    /// `CurveP384` (secp384r1).
    P384,
}

/// `tls_server_config`, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    /// The server's certificate chain (`cert_file` or `cert`).
    pub cert: Pem,
    /// Its private key (`key_file` or `key`).
    pub key: Pem,
    /// Client certificates asked for, and verified.
    pub client_auth: ClientAuth,
    /// The certificates of the authorities client certificates are
    /// verified against (`client_ca_file` or `client_ca`).
    pub client_ca: Option<Pem>,
    /// The lowest version offered (`min_version`, default `TLS12`).
    pub min_version: TlsVersion,
    /// The highest version offered (`max_version`, default `TLS13`).
    pub max_version: TlsVersion,
    /// The TLS 1.2 cipher suites offered, by their IANA names as Go names
    /// them (`cipher_suites`; empty: rustls' own, all of them AEAD with
    /// forward secrecy). TLS 1.3's suites are not configurable, as in Go.
    pub cipher_suites: Vec<String>,
    /// Whether the server's order of cipher suites wins over the client's
    /// (`prefer_server_cipher_suites`, default true).
    pub prefer_server_cipher_suites: bool,
    /// The key-exchange groups, in the server's order of preference
    /// (`curve_preferences`; empty: rustls' own).
    pub curves: Vec<Curve>,
}

/// A checked web configuration.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct WebConfig {
    /// TLS, if `tls_server_config` sets any of it.
    pub tls: Option<TlsSettings>,
    /// The users and their bcrypt hashes (`basic_auth_users`): if any,
    /// every request needs one of them.
    pub users: BTreeMap<String, String>,
    /// Headers added to every answer (`http_server_config.headers`).
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// The file as written, every field known (`deny_unknown_fields`, as the
/// toolkit's strict YAML reading).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct File {
    tls_server_config: Option<TlsFile>,
    http_server_config: Option<HttpFile>,
    basic_auth_users: Option<BTreeMap<String, String>>,
    rate_limit: Option<RateLimitFile>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct TlsFile {
    cert: Option<String>,
    key: Option<String>,
    client_ca: Option<String>,
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    client_allowed_sans: Option<Vec<String>>,
    min_version: Option<String>,
    max_version: Option<String>,
    cipher_suites: Option<Vec<String>>,
    prefer_server_cipher_suites: Option<bool>,
    curve_preferences: Option<Vec<String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct HttpFile {
    http2: Option<bool>,
    headers: Option<BTreeMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct RateLimitFile {
    interval: Option<String>,
    burst: Option<u64>,
}

/// The headers a file may set, and the values each takes if it is an
/// enumeration (exporter-toolkit's list).
const HEADERS: &[(&str, &[&str])] = &[
    ("Strict-Transport-Security", &[]),
    ("X-Content-Type-Options", &["nosniff"]),
    ("X-Frame-Options", &["deny", "sameorigin"]),
    ("X-XSS-Protection", &[]),
    ("Content-Security-Policy", &[]),
];

/// The TLS 1.2 cipher suites rustls offers, by Go's names (and the
/// shorter aliases Go also accepts for the two ChaCha20 ones).
pub const TLS12_SUITES: &[&str] = &[
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305",
];

/// TLS 1.3's suites: accepted in `cipher_suites` and ignored, as Go does
/// (TLS 1.3 suites are not configurable).
const TLS13_SUITES: &[&str] = &[
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
];

/// The suites Go knows that rustls does not implement (no forward secrecy,
/// CBC, RC4, 3DES): refused saying so.
const GO_ONLY_SUITES: &[&str] = &[
    "TLS_RSA_WITH_AES_128_CBC_SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
];

/// Reads a small regular file: opened without blocking (a FIFO named by
/// mistake is refused, not waited on), refused if it is not a regular
/// file or is larger than [`MAX_FILE_BYTES`]. Links are followed, as for
/// any file an operator names (certificates are often links, certbot's
/// among them). The error is one line, the path escaped.
pub fn read_small_file(path: &Path) -> Result<Vec<u8>, String> {
    let shown = escape_path(path);
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(rustix::fs::OFlags::NONBLOCK.bits() as i32)
        .open(path)
        .map_err(|e| format!("cannot open {shown}: {e}"))?;
    let md = file
        .metadata()
        .map_err(|e| format!("cannot stat {shown}: {e}"))?;
    if !md.is_file() {
        return Err(format!("{shown} is not a regular file"));
    }
    if md.len() > MAX_FILE_BYTES {
        return Err(format!(
            "{shown} is {} bytes, more than the {MAX_FILE_BYTES} read",
            md.len()
        ));
    }
    let mut data = Vec::with_capacity(md.len() as usize);
    file.take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut data)
        .map_err(|e| format!("cannot read {shown}: {e}"))?;
    if data.len() as u64 > MAX_FILE_BYTES {
        return Err(format!("{shown} grew past the {MAX_FILE_BYTES} bytes read"));
    }
    Ok(data)
}

impl WebConfig {
    /// Reads and checks the file at `path` (not the certificates, keys
    /// and hashes' use: [`crate::Web::from_config`] loads those).
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = read_small_file(path).map_err(|e| ConfigError::new("", e))?;
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, dir)
    }

    /// Checks the YAML `text`, its relative file names taken from `dir`.
    pub fn parse(text: &[u8], dir: &Path) -> Result<Self, ConfigError> {
        // An empty file is an empty configuration (YAML reads it as null).
        let file: File = if text.iter().all(u8::is_ascii_whitespace) {
            File::default()
        } else {
            serde_norway::from_slice(text).map_err(|e| yaml_error(&e))?
        };
        let mut config = WebConfig::default();
        if let Some(r) = file.rate_limit {
            rate_limit(&r)?;
        }
        if let Some(h) = file.http_server_config {
            // HTTP/2 is never offered (the endpoint speaks HTTP/1.1, with
            // TLS or without); `http2: true`, the toolkit's default, asks
            // for nothing more than it allows.
            let _ = h.http2;
            config.headers = headers(h.headers.unwrap_or_default())?;
        }
        if let Some(users) = file.basic_auth_users {
            config.users = check_users(users)?;
        }
        if let Some(t) = file.tls_server_config {
            config.tls = tls(t, dir)?;
        }
        Ok(config)
    }
}

/// serde's error as one line naming the field (serde_norway says where).
fn yaml_error(e: &serde_norway::Error) -> ConfigError {
    let msg = e.to_string();
    // "tls_server_config: unknown field `x`, expected one of … at line 3
    // column 3": serde_norway puts the path first when it knows it.
    match msg.split_once(": ") {
        Some((path, rest)) if !path.contains(' ') => ConfigError::new(path, rest),
        _ => ConfigError::new("", msg),
    }
}

fn rate_limit(r: &RateLimitFile) -> Result<(), ConfigError> {
    // The toolkit disables its limiter with interval 0; a real one is not
    // implemented here: --max-requests bounds the scrapes in flight.
    let zero = r
        .interval
        .as_deref()
        .is_none_or(|i| i.trim_end_matches(|c: char| c.is_ascii_alphabetic()) == "0");
    if zero {
        Ok(())
    } else {
        Err(ConfigError::new(
            "rate_limit.interval",
            "a rate limit is not supported by perfabi-prometheus: remove it (--max-requests \
             bounds the scrapes in flight), or set interval: 0",
        ))
    }
}

fn headers(h: BTreeMap<String, String>) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
    let mut out = Vec::with_capacity(h.len());
    for (k, v) in h {
        let field = format!("http_server_config.headers.{k}");
        let Some((_, allowed)) = HEADERS.iter().find(|(name, _)| *name == k) else {
            let names: Vec<&str> = HEADERS.iter().map(|(n, _)| *n).collect();
            return Err(ConfigError::new(
                &field,
                format!(
                    "this header cannot be configured (one of {})",
                    names.join(", ")
                ),
            ));
        };
        if !allowed.is_empty() && !allowed.contains(&v.as_str()) {
            return Err(ConfigError::new(
                &field,
                format!("{v:?} is not one of {}", allowed.join(", ")),
            ));
        }
        // Blank: unset, as the toolkit says.
        if v.is_empty() {
            continue;
        }
        let value = HeaderValue::from_str(&v).map_err(|_| {
            ConfigError::new(&field, "the value has characters a header cannot carry")
        })?;
        out.push((HeaderName::from_static(header_static(&k)), value));
    }
    Ok(out)
}

/// The static lower-case name of one of [`HEADERS`].
fn header_static(name: &str) -> &'static str {
    match name {
        "Strict-Transport-Security" => "strict-transport-security",
        "X-Content-Type-Options" => "x-content-type-options",
        "X-Frame-Options" => "x-frame-options",
        "X-XSS-Protection" => "x-xss-protection",
        _ => "content-security-policy",
    }
}

fn check_users(users: BTreeMap<String, String>) -> Result<BTreeMap<String, String>, ConfigError> {
    if users.len() > MAX_USERS {
        return Err(ConfigError::new(
            "basic_auth_users",
            format!(
                "{} users, more than {MAX_USERS}: use client certificates or a proxy",
                users.len()
            ),
        ));
    }
    for (user, hash) in &users {
        let field = format!(
            "basic_auth_users.{}",
            perfabi::text::escape(user.as_bytes())
        );
        if user.contains(':') {
            // Basic authentication splits at the first colon.
            return Err(ConfigError::new(&field, "a user name cannot contain ':'"));
        }
        hash.parse::<bcrypt::HashParts>().map_err(|e| {
            ConfigError::new(
                &field,
                format!(
                    "not a bcrypt hash ({e}): make one with htpasswd -nBC 10 \"\" | tr -d ':\\n'"
                ),
            )
        })?;
    }
    Ok(users)
}

/// One PEM from a `*_file` field or its inline twin, not both.
fn pem(
    file: Option<String>,
    inline: Option<String>,
    file_field: &str,
    inline_field: &str,
    dir: &Path,
) -> Result<Option<Pem>, ConfigError> {
    match (file, inline) {
        (Some(_), Some(_)) => Err(ConfigError::new(
            &format!("tls_server_config.{file_field}"),
            format!("give {file_field} or {inline_field}, not both"),
        )),
        (Some(f), None) if f.is_empty() => Ok(None),
        (Some(f), None) => Ok(Some(Pem::File(dir.join(f)))),
        (None, Some(s)) if s.is_empty() => Ok(None),
        (None, Some(s)) => Ok(Some(Pem::Inline(s))),
        (None, None) => Ok(None),
    }
}

fn version(v: Option<&str>, field: &str, default: TlsVersion) -> Result<TlsVersion, ConfigError> {
    match v {
        None | Some("") => Ok(default),
        Some("TLS12") => Ok(TlsVersion::Tls12),
        Some("TLS13") => Ok(TlsVersion::Tls13),
        Some(v @ ("TLS10" | "TLS11")) => Err(ConfigError::new(
            &format!("tls_server_config.{field}"),
            format!("{v} is not supported by rustls (TLS12 or TLS13)"),
        )),
        Some(v) => Err(ConfigError::new(
            &format!("tls_server_config.{field}"),
            format!("unknown TLS version {v:?} (TLS12 or TLS13)"),
        )),
    }
}

fn tls(t: TlsFile, dir: &Path) -> Result<Option<TlsSettings>, ConfigError> {
    let cert = pem(t.cert_file, t.cert, "cert_file", "cert", dir)?;
    let key = pem(t.key_file, t.key, "key_file", "key", dir)?;
    let client_ca = pem(
        t.client_ca_file,
        t.client_ca,
        "client_ca_file",
        "client_ca",
        dir,
    )?;
    let auth = t.client_auth_type.unwrap_or_default();
    // The toolkit's rule: TLS is on if any of these is set.
    if cert.is_none() && key.is_none() && client_ca.is_none() && auth.is_empty() {
        return Ok(None);
    }
    let field = |f: &str| format!("tls_server_config.{f}");
    let cert = cert
        .ok_or_else(|| ConfigError::new(&field("cert_file"), "missing one of cert or cert_file"))?;
    let key =
        key.ok_or_else(|| ConfigError::new(&field("key_file"), "missing one of key or key_file"))?;
    let client_auth = match auth.as_str() {
        "" | "NoClientCert" => ClientAuth::None,
        "VerifyClientCertIfGiven" => ClientAuth::VerifyIfGiven,
        "RequireAndVerifyClientCert" => ClientAuth::RequireAndVerify,
        "RequestClientCert" | "RequireAnyClientCert" | "RequireClientCert" => {
            return Err(ConfigError::new(
                &field("client_auth_type"),
                format!(
                    "{auth} (a client certificate taken unverified) is not supported by rustls: \
                     use RequireAndVerifyClientCert or VerifyClientCertIfGiven with client_ca_file"
                ),
            ))
        }
        other => {
            return Err(ConfigError::new(
                &field("client_auth_type"),
                format!(
                    "unknown {other:?} (NoClientCert, VerifyClientCertIfGiven or \
                     RequireAndVerifyClientCert)"
                ),
            ))
        }
    };
    match (client_auth, &client_ca) {
        (ClientAuth::None, Some(_)) => {
            return Err(ConfigError::new(
                &field("client_auth_type"),
                "client CAs are configured without a client auth policy: set client_auth_type",
            ))
        }
        (ClientAuth::VerifyIfGiven | ClientAuth::RequireAndVerify, None) => {
            return Err(ConfigError::new(
                &field("client_ca_file"),
                format!(
                    "{auth} needs the authorities to verify against: client_ca_file or client_ca"
                ),
            ))
        }
        _ => {}
    }
    if t.client_allowed_sans.is_some() {
        return Err(ConfigError::new(
            &field("client_allowed_sans"),
            "matching client certificates' SANs is not supported by perfabi-prometheus: \
             issue client certificates from a CA of their own (client_ca_file)",
        ));
    }
    let min_version = version(t.min_version.as_deref(), "min_version", TlsVersion::Tls12)?;
    let max_version = version(t.max_version.as_deref(), "max_version", TlsVersion::Tls13)?;
    if min_version > max_version {
        return Err(ConfigError::new(
            &field("min_version"),
            "min_version is above max_version",
        ));
    }
    let mut cipher_suites = Vec::new();
    for s in t.cipher_suites.unwrap_or_default() {
        if TLS12_SUITES.contains(&s.as_str()) {
            cipher_suites.push(s);
        } else if TLS13_SUITES.contains(&s.as_str()) {
            // Not configurable in TLS 1.3 (Go ignores them too).
        } else if GO_ONLY_SUITES.contains(&s.as_str()) {
            return Err(ConfigError::new(
                &field("cipher_suites"),
                format!(
                    "{s} is not supported by rustls (no forward secrecy or not AEAD): one of {}",
                    TLS12_SUITES.join(", ")
                ),
            ));
        } else {
            return Err(ConfigError::new(
                &field("cipher_suites"),
                format!(
                    "unknown cipher suite {s:?}: one of {}",
                    TLS12_SUITES.join(", ")
                ),
            ));
        }
    }
    let mut curves = Vec::new();
    for c in t.curve_preferences.unwrap_or_default() {
        curves.push(match c.as_str() {
            "X25519" => Curve::X25519,
            "CurveP256" => Curve::P256,
            "CurveP384" => Curve::P384,
            "CurveP521" => {
                return Err(ConfigError::new(
                    &field("curve_preferences"),
                    "CurveP521 is not supported by rustls on ring (X25519, CurveP256, CurveP384)",
                ))
            }
            other => {
                return Err(ConfigError::new(
                    &field("curve_preferences"),
                    format!("unknown curve {other:?} (X25519, CurveP256, CurveP384)"),
                ))
            }
        });
    }
    Ok(Some(TlsSettings {
        cert,
        key,
        client_auth,
        client_ca,
        min_version,
        max_version,
        cipher_suites,
        prefer_server_cipher_suites: t.prefer_server_cipher_suites.unwrap_or(true),
        curves,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(yaml: &str) -> Result<WebConfig, ConfigError> {
        WebConfig::parse(yaml.as_bytes(), Path::new("/etc/perfabi"))
    }

    /// The error's field and a piece of its message.
    fn refused(yaml: &str, field: &str, says: &str) {
        let e = parse(yaml).expect_err(yaml);
        assert_eq!(e.field, field, "{yaml}: {e}");
        assert!(e.message.contains(says), "{yaml}: {e}");
        assert_eq!(e.to_string().lines().count(), 1, "{e}");
    }

    const HASH: &str = "$2b$10$4gnGsB4879fzMcP1MCXI3e5VVSVaZz0EIjR8/x0xhULK7Ufe9RDoa";

    #[test]
    fn empty_is_plain_http_without_users() {
        assert_eq!(parse("").unwrap(), WebConfig::default());
        assert_eq!(parse("\n  \n").unwrap(), WebConfig::default());
        assert_eq!(parse("{}").unwrap(), WebConfig::default());
        assert_eq!(
            parse("tls_server_config: {}").unwrap(),
            WebConfig::default()
        );
        assert_eq!(parse("basic_auth_users: {}").unwrap(), WebConfig::default());
    }

    #[test]
    fn every_field() {
        let c = parse(&format!(
            "tls_server_config:\n  cert_file: server.crt\n  key_file: /abs/server.key\n\
             \x20 client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: ca.crt\n\
             \x20 min_version: TLS13\n  max_version: TLS13\n\
             \x20 cipher_suites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, TLS_AES_128_GCM_SHA256]\n\
             \x20 prefer_server_cipher_suites: false\n\
             \x20 curve_preferences: [X25519, CurveP256, CurveP384]\n\
             http_server_config:\n  http2: false\n  headers:\n\
             \x20   X-Frame-Options: deny\n    X-Content-Type-Options: nosniff\n\
             \x20   Strict-Transport-Security: max-age=31536000\n    X-XSS-Protection: \"1\"\n\
             \x20   Content-Security-Policy: \"\"\n\
             basic_auth_users:\n  prometheus: {HASH}\n\
             rate_limit:\n  interval: 0s\n  burst: 10\n"
        ))
        .unwrap();
        let t = c.tls.unwrap();
        assert_eq!(t.cert, Pem::File("/etc/perfabi/server.crt".into()));
        assert_eq!(t.key, Pem::File("/abs/server.key".into()));
        assert_eq!(t.client_ca, Some(Pem::File("/etc/perfabi/ca.crt".into())));
        assert_eq!(t.client_auth, ClientAuth::RequireAndVerify);
        assert_eq!(
            (t.min_version, t.max_version),
            (TlsVersion::Tls13, TlsVersion::Tls13)
        );
        // TLS 1.3's suite is accepted and not configurable.
        assert_eq!(t.cipher_suites, ["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"]);
        assert!(!t.prefer_server_cipher_suites);
        assert_eq!(t.curves, [Curve::X25519, Curve::P256, Curve::P384]);
        assert_eq!(c.users["prometheus"], HASH);
        let headers: Vec<(&str, &str)> = c
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.to_str().unwrap()))
            .collect();
        // The blank Content-Security-Policy is unset.
        assert_eq!(
            headers,
            [
                ("strict-transport-security", "max-age=31536000"),
                ("x-content-type-options", "nosniff"),
                ("x-frame-options", "deny"),
                ("x-xss-protection", "1"),
            ]
        );
    }

    #[test]
    fn inline_pems_and_defaults() {
        let c = parse(
            "tls_server_config:\n  cert: |\n    -----BEGIN CERTIFICATE-----\n  key: KEY\n\
             \x20 client_ca: CA\n  client_auth_type: VerifyClientCertIfGiven\n",
        )
        .unwrap();
        let t = c.tls.unwrap();
        assert_eq!(t.cert, Pem::Inline("-----BEGIN CERTIFICATE-----\n".into()));
        assert_eq!(t.key, Pem::Inline("KEY".into()));
        assert_eq!(t.client_ca, Some(Pem::Inline("CA".into())));
        assert_eq!(t.client_auth, ClientAuth::VerifyIfGiven);
        assert_eq!(
            (t.min_version, t.max_version),
            (TlsVersion::Tls12, TlsVersion::Tls13)
        );
        assert!(t.prefer_server_cipher_suites);
        assert!(t.cipher_suites.is_empty() && t.curves.is_empty());
        let t = parse(
            "tls_server_config:\n  cert_file: a\n  key_file: b\n  client_auth_type: NoClientCert\n",
        )
        .unwrap()
        .tls
        .unwrap();
        assert_eq!(t.client_auth, ClientAuth::None);
        assert_eq!(t.client_ca, None);
    }

    #[test]
    fn every_error_names_its_field() {
        let tls = |rest: &str| format!("tls_server_config:\n  cert_file: a\n  key_file: b\n{rest}");
        refused("nonsense: 1\n", "", "unknown field `nonsense`");
        refused(
            "tls_server_config:\n  cert_fil: a\n",
            "tls_server_config",
            "unknown field `cert_fil`",
        );
        refused(
            "http_server_config:\n  header: {}\n",
            "http_server_config",
            "unknown field",
        );
        refused(
            "rate_limit:\n  burst: x\n",
            "rate_limit.burst",
            "invalid type",
        );
        refused(
            "basic_auth_users: [a]\n",
            "basic_auth_users",
            "invalid type",
        );
        refused(
            "tls_server_config: [a]\n",
            "tls_server_config",
            "invalid type",
        );
        refused("tls_server_config: 'unterminated\n", "", "quoted scalar");
        refused(
            "tls_server_config:\n  key_file: b\n",
            "tls_server_config.cert_file",
            "missing one of cert or cert_file",
        );
        refused(
            "tls_server_config:\n  cert_file: a\n",
            "tls_server_config.key_file",
            "missing one of key or key_file",
        );
        refused(
            "tls_server_config:\n  client_auth_type: RequireAndVerifyClientCert\n",
            "tls_server_config.cert_file",
            "missing",
        );
        refused(
            "tls_server_config:\n  cert_file: a\n  cert: b\n  key_file: c\n",
            "tls_server_config.cert_file",
            "not both",
        );
        refused(
            "tls_server_config:\n  cert_file: a\n  key: b\n  key_file: c\n",
            "tls_server_config.key_file",
            "not both",
        );
        refused(&tls("  client_ca_file: x\n  client_ca: y\n  client_auth_type: RequireAndVerifyClientCert\n"), "tls_server_config.client_ca_file", "not both");
        refused(
            &tls("  client_auth_type: Sometimes\n"),
            "tls_server_config.client_auth_type",
            "unknown",
        );
        refused(
            &tls("  client_auth_type: RequireAnyClientCert\n  client_ca_file: x\n"),
            "tls_server_config.client_auth_type",
            "not supported by rustls",
        );
        refused(
            &tls("  client_auth_type: RequestClientCert\n"),
            "tls_server_config.client_auth_type",
            "not supported by rustls",
        );
        refused(
            &tls("  client_ca_file: x\n"),
            "tls_server_config.client_auth_type",
            "without a client auth policy",
        );
        refused(
            &tls("  client_auth_type: RequireAndVerifyClientCert\n"),
            "tls_server_config.client_ca_file",
            "needs the authorities",
        );
        refused(&tls("  client_auth_type: RequireAndVerifyClientCert\n  client_ca_file: x\n  client_allowed_sans: [a]\n"), "tls_server_config.client_allowed_sans", "not supported");
        refused(
            &tls("  min_version: TLS10\n"),
            "tls_server_config.min_version",
            "not supported by rustls",
        );
        refused(
            &tls("  max_version: TLS11\n"),
            "tls_server_config.max_version",
            "not supported by rustls",
        );
        refused(
            &tls("  min_version: SSL3\n"),
            "tls_server_config.min_version",
            "unknown TLS version",
        );
        refused(
            &tls("  min_version: TLS13\n  max_version: TLS12\n"),
            "tls_server_config.min_version",
            "above max_version",
        );
        refused(
            &tls("  cipher_suites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n"),
            "tls_server_config.cipher_suites",
            "not supported by rustls",
        );
        refused(
            &tls("  cipher_suites: [TLS_NULL]\n"),
            "tls_server_config.cipher_suites",
            "unknown cipher suite",
        );
        refused(
            &tls("  curve_preferences: [CurveP521]\n"),
            "tls_server_config.curve_preferences",
            "not supported",
        );
        refused(
            &tls("  curve_preferences: [Curve25519x]\n"),
            "tls_server_config.curve_preferences",
            "unknown curve",
        );
        refused(
            &tls("  prefer_server_cipher_suites: maybe\n"),
            "tls_server_config.prefer_server_cipher_suites",
            "invalid type",
        );
        refused(
            "http_server_config:\n  headers:\n    Server: x\n",
            "http_server_config.headers.Server",
            "cannot be configured",
        );
        refused(
            "http_server_config:\n  headers:\n    X-Frame-Options: allow\n",
            "http_server_config.headers.X-Frame-Options",
            "not one of deny, sameorigin",
        );
        refused(
            "http_server_config:\n  headers:\n    X-Content-Type-Options: sniff\n",
            "http_server_config.headers.X-Content-Type-Options",
            "not one of nosniff",
        );
        refused(
            "http_server_config:\n  headers:\n    X-XSS-Protection: \"a\\nb\"\n",
            "http_server_config.headers.X-XSS-Protection",
            "cannot carry",
        );
        refused(
            "http_server_config:\n  http2: 3\n",
            "http_server_config.http2",
            "invalid type",
        );
        refused(
            "basic_auth_users:\n  alice: plain\n",
            "basic_auth_users.alice",
            "not a bcrypt hash",
        );
        refused(
            &format!("basic_auth_users:\n  \"a:b\": {HASH}\n"),
            "basic_auth_users.a:b",
            "cannot contain ':'",
        );
        refused(
            "rate_limit:\n  interval: 1s\n  burst: 5\n",
            "rate_limit.interval",
            "not supported",
        );
    }

    #[test]
    fn files_are_read_small_regular_and_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("web.yml");
        std::fs::write(&p, "basic_auth_users:\n  u: bad\n").unwrap();
        let e = WebConfig::load(&p).unwrap_err();
        assert_eq!(e.field, "basic_auth_users.u");
        // A FIFO is refused at once, not waited on.
        let fifo = dir.path().join("fifo");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        assert!(WebConfig::load(&fifo)
            .unwrap_err()
            .to_string()
            .contains("not a regular file"));
        assert!(read_small_file(dir.path())
            .unwrap_err()
            .contains("not a regular file"));
        let big = dir.path().join("big");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(MAX_FILE_BYTES + 1)
            .unwrap();
        assert!(read_small_file(&big).unwrap_err().contains("more than"));
        let e = WebConfig::load(&dir.path().join("missing")).unwrap_err();
        assert_eq!(e.field, "");
        assert!(e.message.contains("cannot open"), "{e}");
        // The PEM of a file is read when asked.
        let pem = Pem::File(dir.path().join("none.pem"));
        assert_eq!(
            pem.read("tls_server_config.cert_file").unwrap_err().field,
            "tls_server_config.cert_file"
        );
    }
}
