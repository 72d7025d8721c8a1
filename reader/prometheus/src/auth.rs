//! Basic authentication (`basic_auth_users` of the web configuration):
//! a request's `Authorization: Basic` credentials checked against the
//! user's bcrypt hash.
//!
//! bcrypt costs tens of milliseconds by design (cost 10: about 70 ms), so
//! the result of a check is kept, keyed by a SHA-256 of the user, the hash
//! and the password (as exporter-toolkit keys its cache by the three,
//! never by the password in clear): a scraper sending the same credentials
//! every 15 s pays bcrypt once. Checks not in the cache run one at a time
//! on a blocking thread (no connection waits for them), and an unknown
//! user is checked against a fixed hash so that timing does not tell
//! which users exist. The cache holds at most [`CACHE_ENTRIES`] results;
//! when full, it is emptied (wrong guesses cannot grow it).

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use hyper::header::{HeaderMap, AUTHORIZATION};

/// Most check results kept.
pub const CACHE_ENTRIES: usize = 256;

/// The users, and the results of the checks made.
pub struct Users {
    users: BTreeMap<String, String>,
    /// A hash of a random password, at the users' highest cost: checked
    /// for an unknown user, so that the answer takes as long as for a
    /// known one.
    dummy: String,
    /// Keys of the checks that passed (a failure is not kept: a wrong
    /// password costs its sender bcrypt's time every time).
    passed: Mutex<HashSet<[u8; 32]>>,
    /// One bcrypt check at a time: they are CPU work.
    one_at_a_time: tokio::sync::Mutex<()>,
}

/// What a request's credentials are worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// A user's, and right.
    Passed,
    /// None, not Basic, or wrong: `401` with `WWW-Authenticate: Basic`.
    Refused,
}

impl Users {
    /// The users of a web configuration (user → bcrypt hash); with none,
    /// every request passes.
    pub fn new(users: BTreeMap<String, String>) -> Arc<Self> {
        let cost = users
            .values()
            .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
            .map(|p| p.get_cost())
            .max();
        let dummy = cost
            .and_then(|c| {
                let mut random = [0u8; 32];
                ::ring::rand::SecureRandom::fill(&::ring::rand::SystemRandom::new(), &mut random)
                    .ok()?;
                bcrypt::hash(random, c).ok()
            })
            .unwrap_or_default();
        Arc::new(Self {
            users,
            dummy,
            passed: Mutex::new(HashSet::new()),
            one_at_a_time: tokio::sync::Mutex::new(()),
        })
    }

    /// Whether any user is configured (authentication is asked).
    pub fn required(&self) -> bool {
        !self.users.is_empty()
    }

    /// The verdict on `headers`' credentials.
    pub async fn check(self: &Arc<Self>, headers: &HeaderMap) -> Verdict {
        if !self.required() {
            return Verdict::Passed;
        }
        let Some((user, password)) = credentials(headers) else {
            return Verdict::Refused;
        };
        let known = self.users.get(&user);
        let hash = known.map_or(self.dummy.as_str(), String::as_str);
        let key = cache_key(&user, hash, &password);
        if known.is_some() && self.lock().contains(&key) {
            return Verdict::Passed;
        }
        let _turn = self.one_at_a_time.lock().await;
        // Passed while this one waited its turn?
        if known.is_some() && self.lock().contains(&key) {
            return Verdict::Passed;
        }
        let hash = hash.to_string();
        let right = tokio::task::spawn_blocking(move || {
            bcrypt::verify(password.as_bytes(), &hash).unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        if !(right && known.is_some()) {
            return Verdict::Refused;
        }
        let mut passed = self.lock();
        if passed.len() >= CACHE_ENTRIES {
            passed.clear();
        }
        passed.insert(key);
        Verdict::Passed
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashSet<[u8; 32]>> {
        self.passed.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// SHA-256 of the user, the hash and the password, each length-prefixed
/// (no two triples give the same input).
fn cache_key(user: &str, hash: &str, password: &str) -> [u8; 32] {
    let mut ctx = ::ring::digest::Context::new(&::ring::digest::SHA256);
    for part in [user, hash, password] {
        ctx.update(&(part.len() as u64).to_le_bytes());
        ctx.update(part.as_bytes());
    }
    let mut key = [0u8; 32];
    key.copy_from_slice(ctx.finish().as_ref());
    key
}

/// The user and password of an `Authorization: Basic` header (RFC 7617),
/// if there is exactly one such header and it decodes.
pub fn credentials(headers: &HeaderMap) -> Option<(String, String)> {
    let mut all = headers.get_all(AUTHORIZATION).iter();
    let value = all.next()?;
    if all.next().is_some() {
        return None;
    }
    let value = value.to_str().ok()?.trim();
    let (scheme, encoded) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    use base64::Engine as _;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(auth: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, HeaderValue::from_str(auth).unwrap());
        h
    }

    #[test]
    fn basic_credentials_decode() {
        // "alice:open sesame" and "bob:" and a password with a colon.
        assert_eq!(
            credentials(&headers("Basic YWxpY2U6b3BlbiBzZXNhbWU=")),
            Some(("alice".into(), "open sesame".into()))
        );
        assert_eq!(
            credentials(&headers("basic Ym9iOg==")),
            Some(("bob".into(), String::new()))
        );
        assert_eq!(
            credentials(&headers("Basic YTpiOmM=")),
            Some(("a".into(), "b:c".into()))
        );
        assert_eq!(credentials(&headers("Bearer YWxpY2U6eA==")), None);
        assert_eq!(credentials(&headers("Basic YWxpY2U")), None); // bad length
        assert_eq!(credentials(&headers("Basic bm9jb2xvbg==")), None); // "nocolon"
        assert_eq!(credentials(&headers("Basic !!!!")), None);
        assert_eq!(credentials(&HeaderMap::new()), None);
    }

    #[test]
    fn the_dummy_hash_has_the_users_cost() {
        let users = Users::new(BTreeMap::from([
            ("a".to_string(), bcrypt::hash("x", 4).unwrap()),
            ("b".to_string(), bcrypt::hash("y", 5).unwrap()),
        ]));
        let parts: bcrypt::HashParts = users.dummy.parse().unwrap();
        assert_eq!(parts.get_cost(), 5);
    }

    /// A right password passes (and is kept: the second check is not
    /// bcrypt's), a wrong one, an unknown user and no header are refused.
    #[tokio::test]
    async fn users_are_checked_and_passes_kept() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let users = Users::new(BTreeMap::from([("prom".to_string(), hash)]));
        let auth = |u: &str, p: &str| headers(&format!("Basic {}", encode(&format!("{u}:{p}"))));
        assert_eq!(users.check(&auth("prom", "s3cret")).await, Verdict::Passed);
        assert_eq!(users.lock().len(), 1);
        assert_eq!(users.check(&auth("prom", "s3cret")).await, Verdict::Passed);
        assert_eq!(users.check(&auth("prom", "wrong")).await, Verdict::Refused);
        assert_eq!(users.check(&auth("eve", "s3cret")).await, Verdict::Refused);
        assert_eq!(users.check(&HeaderMap::new()).await, Verdict::Refused);
        assert_eq!(users.lock().len(), 1, "only passes are kept");
        let none = Users::new(BTreeMap::new());
        assert_eq!(none.check(&HeaderMap::new()).await, Verdict::Passed);
    }

    fn encode(s: &str) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(s)
    }
}
