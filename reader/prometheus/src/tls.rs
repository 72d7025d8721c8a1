//! TLS for the endpoint: a rustls server configuration (on ring) made from
//! a web configuration's `tls_server_config`, loaded once at start; and
//! the log of failed handshakes (a client speaking plain HTTP to the TLS
//! port, a wrong certificate…), a line when a new kind of failure begins
//! and at most one a minute while failures go on.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::crypto::{ring, SupportedKxGroup};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig, SupportedCipherSuite};

use crate::web_config::{ClientAuth, ConfigError, Curve, TlsSettings, TlsVersion};

/// The server configuration `t` asks for: its certificate chain and key
/// read and matched, client certificates verified against its authorities
/// if asked, the versions, TLS 1.2 suites and curves it names; HTTP/1.1
/// offered by ALPN. An error names the field at fault.
pub fn server_config(t: &TlsSettings) -> Result<Arc<ServerConfig>, ConfigError> {
    let cert_field = field_of(&t.cert, "cert_file", "cert");
    let key_field = field_of(&t.key, "key_file", "key");
    let chain: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(&t.cert.read(&cert_field)?)
            .collect::<Result<_, _>>()
            .map_err(|e| ConfigError::new(&cert_field, format!("not PEM certificates: {e}")))?;
    if chain.is_empty() {
        return Err(ConfigError::new(
            &cert_field,
            "no certificate in it (a PEM \"BEGIN CERTIFICATE\" block)",
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&t.key.read(&key_field)?).map_err(|e| {
        ConfigError::new(
            &key_field,
            format!("no private key in it (PKCS#8, PKCS#1 or SEC1 PEM): {e}"),
        )
    })?;

    let mut provider = ring::default_provider();
    provider.cipher_suites = suites(&t.cipher_suites);
    if !t.curves.is_empty() {
        provider.kx_groups = t.curves.iter().map(|c| kx_group(*c)).collect();
    }
    let versions: Vec<&'static rustls::SupportedProtocolVersion> = [
        (TlsVersion::Tls12, &rustls::version::TLS12),
        (TlsVersion::Tls13, &rustls::version::TLS13),
    ]
    .into_iter()
    .filter(|(v, _)| (t.min_version..=t.max_version).contains(v))
    .map(|(_, v)| v)
    .collect();
    let provider = Arc::new(provider);
    let builder = ServerConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(&versions)
        .map_err(|e| ConfigError::new("tls_server_config.cipher_suites", e.to_string()))?;
    let builder = match (t.client_auth, &t.client_ca) {
        (ClientAuth::None, _) | (_, None) => builder.with_no_client_auth(),
        (auth, Some(ca)) => {
            let ca_field = field_of(ca, "client_ca_file", "client_ca");
            let mut roots = RootCertStore::empty();
            for c in CertificateDer::pem_slice_iter(&ca.read(&ca_field)?) {
                let c = c.map_err(|e| {
                    ConfigError::new(&ca_field, format!("not PEM certificates: {e}"))
                })?;
                roots.add(c).map_err(|e| {
                    ConfigError::new(&ca_field, format!("a certificate rustls refuses: {e}"))
                })?;
            }
            if roots.is_empty() {
                return Err(ConfigError::new(&ca_field, "no certificate in it"));
            }
            let mut v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            if auth == ClientAuth::VerifyIfGiven {
                v = v.allow_unauthenticated();
            }
            let v = v
                .build()
                .map_err(|e| ConfigError::new(&ca_field, e.to_string()))?;
            builder.with_client_cert_verifier(v)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        ConfigError::new(
            &key_field,
            format!("the key does not go with the certificate, or is refused: {e}"),
        )
    })?;
    config.ignore_client_order = t.prefer_server_cipher_suites;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The field a PEM came from, dotted.
fn field_of(p: &crate::web_config::Pem, file: &str, inline: &str) -> String {
    let f = match p {
        crate::web_config::Pem::File(_) => file,
        crate::web_config::Pem::Inline(_) => inline,
    };
    format!("tls_server_config.{f}")
}

/// The suites offered: TLS 1.3's all, TLS 1.2's those named (in their
/// order), or all of rustls' when none is.
fn suites(named: &[String]) -> Vec<SupportedCipherSuite> {
    use ring::cipher_suite as cs;
    let tls13 = [
        cs::TLS13_AES_128_GCM_SHA256,
        cs::TLS13_AES_256_GCM_SHA384,
        cs::TLS13_CHACHA20_POLY1305_SHA256,
    ];
    if named.is_empty() {
        return ring::DEFAULT_CIPHER_SUITES.to_vec();
    }
    let tls12 = named.iter().filter_map(|n| {
        Some(match n.as_str() {
            "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256" => {
                cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            }
            "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384" => {
                cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            }
            "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256"
            | "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305" => {
                cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            }
            "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256" => cs::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
            "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384" => cs::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
            "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256"
            | "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305" => {
                cs::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256
            }
            // The parser let only these through.
            _ => return None,
        })
    });
    tls13.into_iter().chain(tls12).collect()
}

fn kx_group(c: Curve) -> &'static dyn SupportedKxGroup {
    match c {
        Curve::X25519 => ring::kx_group::X25519,
        Curve::P256 => ring::kx_group::SECP256R1,
        Curve::P384 => ring::kx_group::SECP384R1,
    }
}

/// TLS records begin with their content type; a handshake's is 22 (RFC
/// 8446 §5.1).
const TLS_HANDSHAKE: u8 = 0x16;

/// The answer to a client speaking plain text to the TLS port, as Go's
/// servers answer it.
const NOT_TLS: &[u8] = b"HTTP/1.0 400 Bad Request\r\nContent-Type: text/plain; charset=utf-8\r\n\
    Connection: close\r\n\r\nClient sent an HTTP request to an HTTPS server: use https://\n";

/// Waits for a new connection's first byte: `Ok(true)` if it begins a TLS
/// handshake; `Ok(false)` if it is something else (plain HTTP, most
/// likely), which has then been answered `400` in plain HTTP and read
/// (what the client sent at once: closing with it unread would reset the
/// connection before the client reads the answer); an error if the
/// connection ended first.
pub(crate) async fn begins_handshake(stream: &tokio::net::TcpStream) -> std::io::Result<bool> {
    let mut first = [0u8; 1];
    if stream.peek(&mut first).await? == 0 {
        return Err(std::io::ErrorKind::UnexpectedEof.into());
    }
    if first[0] == TLS_HANDSHAKE {
        return Ok(true);
    }
    let mut drain = [0u8; 4096];
    for _ in 0..16 {
        match stream.try_read(&mut drain) {
            Ok(n) if n > 0 => {}
            _ => break,
        }
    }
    let _ = stream.try_write(NOT_TLS);
    Ok(false)
}

/// Failed handshakes are logged at most this often while they go on.
pub const HANDSHAKE_LOG_EVERY: Duration = Duration::from_secs(60);

/// The log of failed handshakes: the first failure's line, then, while
/// failures go on, one line a [`HANDSHAKE_LOG_EVERY`] at most, counting
/// those it stands for (a scraper speaking plain HTTP to the TLS port
/// every second costs the log one line a minute, not sixty).
#[derive(Default)]
pub struct HandshakeLog {
    state: Mutex<(Option<Instant>, u64)>,
}

impl HandshakeLog {
    /// A handshake with `peer` failed with `e`.
    pub fn failed(&self, peer: &str, e: &dyn std::fmt::Display) {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (last, unlogged) = &mut *s;
        if last.is_some_and(|t| t.elapsed() < HANDSHAKE_LOG_EVERY) {
            *unlogged += 1;
            return;
        }
        let more = match *unlogged {
            0 => String::new(),
            n => format!(" ({n} more since the last such line)"),
        };
        let why = e.to_string().replace(['\n', '\r'], " ");
        eprintln!(
            "perfabi-prometheus: a TLS handshake from {peer} failed: {why}{more}; the \
             connection is closed (perfabi_exporter_tls_handshake_errors_total counts them)"
        );
        *last = Some(Instant::now());
        *unlogged = 0;
    }
}

/// The endpoint's tests' certificates, shared with its unit tests below.
#[cfg(test)]
#[path = "../tests/common/certs.rs"]
mod test_certs;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::web_config::{Pem, WebConfig};

    use super::test_certs::signed_for_loopback as certs;

    /// A handshake with `server` in memory by a client trusting `ca` (and
    /// showing `client`, a certificate and key, if given): the version and
    /// suite agreed, or the server's error.
    fn handshake(
        server: Arc<ServerConfig>,
        ca: &str,
        client: Option<(&str, &str)>,
    ) -> Result<(rustls::ProtocolVersion, rustls::CipherSuite), String> {
        let mut roots = RootCertStore::empty();
        for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
        let b = rustls::ClientConfig::builder_with_provider(Arc::new(ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match client {
            None => b.with_no_client_auth(),
            Some((cert, key)) => b
                .with_client_auth_cert(
                    vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
                    PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
                )
                .unwrap(),
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            let (a, b) = tokio::io::duplex(1 << 16);
            let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
            let client = tokio_rustls::TlsConnector::from(Arc::new(config));
            let client = async move {
                let mut s = client.connect(name, a).await?;
                // TLS 1.3 clients learn of a refused certificate on reading.
                s.write_all(b"x").await?;
                s.flush().await?;
                let mut one = [0u8; 1];
                s.read_exact(&mut one).await?;
                Ok::<_, std::io::Error>(())
            };
            let server = async move {
                let mut s = tokio_rustls::TlsAcceptor::from(server).accept(b).await?;
                let mut one = [0u8; 1];
                s.read_exact(&mut one).await?;
                s.write_all(b"y").await?;
                s.flush().await?;
                let (_, c) = s.get_ref();
                Ok::<_, std::io::Error>((
                    c.protocol_version().unwrap(),
                    c.negotiated_cipher_suite().unwrap().suite(),
                ))
            };
            let (c, s) = tokio::join!(client, server);
            let agreed = s.map_err(|e| e.to_string())?;
            c.map_err(|e| e.to_string())?;
            Ok(agreed)
        })
    }

    fn settings(yaml: &str) -> TlsSettings {
        WebConfig::parse(yaml.as_bytes(), std::path::Path::new("."))
            .unwrap()
            .tls
            .unwrap()
    }

    #[test]
    fn a_certificate_and_its_key_make_a_server() {
        let (ca, cert, key) = certs();
        let mut t = settings("tls_server_config:\n  cert: x\n  key: y\n");
        t.cert = Pem::Inline(cert.clone());
        t.key = Pem::Inline(key.clone());
        let c = server_config(&t).unwrap();
        assert_eq!(c.alpn_protocols, [b"http/1.1".to_vec()]);
        assert!(c.ignore_client_order);
        let (v, _) = handshake(c, &ca, None).unwrap();
        assert_eq!(v, rustls::ProtocolVersion::TLSv1_3);
        // TLS 1.2 only, one suite, one curve: what is agreed.
        let mut t = settings(
            "tls_server_config:\n  cert: x\n  key: y\n  max_version: TLS12\n\
             \x20 cipher_suites: [TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305]\n\
             \x20 curve_preferences: [CurveP256]\n  prefer_server_cipher_suites: false\n",
        );
        t.cert = Pem::Inline(cert.clone());
        t.key = Pem::Inline(key.clone());
        let c = server_config(&t).unwrap();
        assert!(!c.ignore_client_order);
        assert_eq!(
            handshake(c, &ca, None).unwrap(),
            (
                rustls::ProtocolVersion::TLSv1_2,
                rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            )
        );
    }

    /// RequireAndVerifyClientCert refuses a client without a certificate
    /// or with one of another CA; VerifyClientCertIfGiven takes one
    /// without, and refuses one of another CA.
    #[test]
    fn client_certificates_are_verified() {
        let (ca, cert, key) = certs();
        let (client_ca, client_cert, client_key) = certs();
        let (_, stranger_cert, stranger_key) = certs();
        let mut t = settings("tls_server_config:\n  cert: x\n  key: y\n");
        t.cert = Pem::Inline(cert);
        t.key = Pem::Inline(key);
        t.client_ca = Some(Pem::Inline(client_ca));
        t.client_auth = ClientAuth::RequireAndVerify;
        let c = server_config(&t).unwrap();
        handshake(Arc::clone(&c), &ca, Some((&client_cert, &client_key))).unwrap();
        let e = handshake(Arc::clone(&c), &ca, None).unwrap_err();
        assert!(e.contains("certificate"), "{e}");
        handshake(Arc::clone(&c), &ca, Some((&stranger_cert, &stranger_key))).unwrap_err();
        t.client_auth = ClientAuth::VerifyIfGiven;
        let c = server_config(&t).unwrap();
        handshake(Arc::clone(&c), &ca, None).unwrap();
        handshake(Arc::clone(&c), &ca, Some((&client_cert, &client_key))).unwrap();
        handshake(c, &ca, Some((&stranger_cert, &stranger_key))).unwrap_err();
    }

    #[test]
    fn bad_pems_name_their_field() {
        let (_, cert, key) = certs();
        let (_, _, other_key) = certs();
        let with = |c: &str, k: &str, ca: Option<&str>| {
            let mut t = settings("tls_server_config:\n  cert: x\n  key: y\n");
            t.cert = Pem::Inline(c.to_string());
            t.key = Pem::Inline(k.to_string());
            if let Some(ca) = ca {
                t.client_auth = ClientAuth::RequireAndVerify;
                t.client_ca = Some(Pem::Inline(ca.to_string()));
            }
            server_config(&t).unwrap_err()
        };
        let e = with("", &key, None);
        assert_eq!(e.field, "tls_server_config.cert");
        assert!(e.message.contains("no certificate"), "{e}");
        let e = with(&cert, "nothing", None);
        assert_eq!(e.field, "tls_server_config.key");
        assert!(e.message.contains("no private key"), "{e}");
        let e = with(&cert, &other_key, None);
        assert_eq!(e.field, "tls_server_config.key");
        assert!(e.message.contains("does not go with"), "{e}");
        let e = with(&cert, &key, Some("none"));
        assert_eq!(e.field, "tls_server_config.client_ca");
        let mut t = settings("tls_server_config:\n  cert_file: /nonexistent/c.pem\n  key: y\n");
        t.key = Pem::Inline(key);
        let e = server_config(&t).unwrap_err();
        assert_eq!(e.field, "tls_server_config.cert_file");
        assert!(e.message.contains("cannot open"), "{e}");
    }
}
