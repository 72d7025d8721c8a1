//! Certificates for the TLS tests, made by rcgen: shared by the endpoint's
//! tests (`tests/common`) and the unit tests of `src/tls.rs`, which
//! include this file by path.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};

/// A CA, and a certificate it signed for 127.0.0.1, with its key: the PEM
/// texts `(ca, certificate, key)`.
pub fn signed_for_loopback() -> (String, String, String) {
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    // A subject of its own: with rcgen's default for both, OpenSSL (curl)
    // takes the leaf's certificate for a self-signed one.
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "perfabi test CA");
    let ca = CertifiedIssuer::self_signed(ca, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    (ca.pem(), leaf.pem(), key.serialize_pem())
}
