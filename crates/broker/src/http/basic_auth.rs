//! HTTP basic authentication (RFC 7617) for the console and `/metrics`:
//! the users of `http.basic.auth.file`.
//!
//! The file holds salted password hashes, never passwords: one user a
//! line, `name:$pbkdf2-sha256$i=<iterations>$<salt>$<hash>` (the PHC string
//! format: salt and hash in base64 without padding; `hash` is
//! PBKDF2-HMAC-SHA256 of the password, 32 bytes). Blank lines and lines
//! starting with `#` are skipped. A name has no `:` (basic auth splits the
//! credentials at the first one). PBKDF2 costs an attacker who reads the
//! file `iterations` HMACs per guess, the broker as many per check; see
//! [`MIN_ITERATIONS`] and [`MAX_ITERATIONS`].
//!
//! A check decodes `Authorization: Basic <base64(user:password)>`, derives
//! the key from the presented password with the stored salt and compares
//! it in constant time. An unknown user is checked against a dummy hash of
//! the same cost, so the answer time does not tell which names exist.
//! Credentials that passed are remembered (their SHA-256, at most
//! [`CACHE_ENTRIES`]) so that a browser loading the console's files pays
//! the derivation once; the memory is dropped when the file changes.
//!
//! [`BasicAuth`] reloads the file when it changes (same stamps as the TLS
//! stores); a file that no longer parses leaves the previous users in force.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};

use base64::Engine;
use base64::engine::general_purpose::STANDARD_NO_PAD as B64;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::tls::FileStamp;

/// The `WWW-Authenticate` value of a 401 answer.
pub const CHALLENGE: &str = "Basic realm=\"weir\", charset=\"UTF-8\"";
/// Fewest PBKDF2 iterations a stored hash may have.
pub const MIN_ITERATIONS: u32 = 10_000;
/// Most PBKDF2 iterations a stored hash may have: every check of an
/// unknown credential costs this many HMACs of broker CPU.
pub const MAX_ITERATIONS: u32 = 10_000_000;
/// Iterations [`PasswordHash::generate`] uses (OWASP's 2023 advice for
/// PBKDF2-HMAC-SHA256).
pub const DEFAULT_ITERATIONS: u32 = 600_000;
/// Accepted credentials remembered at once.
pub const CACHE_ENTRIES: usize = 64;
/// Longest accepted `Authorization` value (the listener's head limit
/// bounds it too).
const MAX_HEADER_BYTES: usize = 4096;

const PREFIX: &str = "$pbkdf2-sha256$";
const SALT_BYTES: std::ops::RangeInclusive<usize> = 8..=64;

/// A stored password: PBKDF2-HMAC-SHA256 with its salt and iterations.
#[derive(Clone, PartialEq, Eq)]
pub struct PasswordHash {
    iterations: u32,
    salt: Vec<u8>,
    hash: [u8; 32],
}

impl std::fmt::Debug for PasswordHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PasswordHash")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl PasswordHash {
    /// Hashes `password` under `salt`.
    pub fn new(password: &[u8], salt: &[u8], iterations: u32) -> PasswordHash {
        let mut hash = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut hash);
        PasswordHash {
            iterations,
            salt: salt.to_vec(),
            hash,
        }
    }

    /// Hashes `password` under a fresh random 16-byte salt.
    pub fn generate(password: &str, iterations: u32) -> PasswordHash {
        PasswordHash::new(password.as_bytes(), &rand::random::<[u8; 16]>(), iterations)
    }

    /// Parses `$pbkdf2-sha256$i=<n>$<salt>$<hash>`.
    pub fn parse(s: &str) -> Result<PasswordHash, String> {
        let rest = s.strip_prefix(PREFIX).ok_or_else(|| {
            format!("expected a hash starting with {PREFIX} (see docs/console.md)")
        })?;
        let mut parts = rest.split('$');
        let (Some(i), Some(salt), Some(hash), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(format!("expected {PREFIX}i=<iterations>$<salt>$<hash>"));
        };
        let iterations: u32 = i
            .strip_prefix("i=")
            .and_then(|n| n.parse().ok())
            .ok_or("expected i=<iterations>")?;
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(format!(
                "{iterations} iterations: must be {MIN_ITERATIONS}..={MAX_ITERATIONS}"
            ));
        }
        let b64 = |v: &str, what: &str| {
            B64.decode(v.trim_end_matches('='))
                .map_err(|_| format!("the {what} is not base64"))
        };
        let salt = b64(salt, "salt")?;
        if !SALT_BYTES.contains(&salt.len()) {
            return Err(format!(
                "a salt of {} bytes: must be {}..={}",
                salt.len(),
                SALT_BYTES.start(),
                SALT_BYTES.end()
            ));
        }
        let hash: [u8; 32] = b64(hash, "hash")?
            .try_into()
            .map_err(|_| "the hash is not 32 bytes (PBKDF2-HMAC-SHA256)".to_string())?;
        Ok(PasswordHash {
            iterations,
            salt,
            hash,
        })
    }

    /// Whether `password` is the one hashed, compared in constant time.
    pub fn verify(&self, password: &[u8]) -> bool {
        let mut derived = [0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(password, &self.salt, self.iterations, &mut derived);
        derived.ct_eq(&self.hash).into()
    }

    pub fn iterations(&self) -> u32 {
        self.iterations
    }
}

impl std::fmt::Display for PasswordHash {
    /// The PHC string, as the users file holds it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{PREFIX}i={}${}${}",
            self.iterations,
            B64.encode(&self.salt),
            B64.encode(self.hash)
        )
    }
}

/// A users file that does not parse; `line` is 1-based. The line's content
/// is never part of the message (it holds a hash).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {reason}")]
pub struct UsersError {
    pub line: usize,
    pub reason: String,
}

/// The users of a users file. Always has at least one user.
#[derive(Clone)]
pub struct Users {
    users: HashMap<String, PasswordHash>,
    /// Checked for an unknown user: the cost of the most expensive hash.
    dummy: PasswordHash,
}

impl std::fmt::Debug for Users {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.users.keys().collect();
        names.sort();
        f.debug_struct("Users").field("users", &names).finish()
    }
}

impl Users {
    /// Parses a users file's text.
    pub fn parse(text: &str) -> Result<Users, UsersError> {
        let mut users = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let err = |reason: String| UsersError {
                line: i + 1,
                reason,
            };
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let (name, hash) = line
                .split_once(':')
                .ok_or_else(|| err("expected name:$pbkdf2-sha256$…".into()))?;
            if name.is_empty() {
                return Err(err("empty user name".into()));
            }
            let hash = PasswordHash::parse(hash).map_err(err)?;
            if users.insert(name.to_string(), hash).is_some() {
                return Err(err(format!("user {name:?} is listed twice")));
            }
        }
        let iterations = users
            .values()
            .map(PasswordHash::iterations)
            .max()
            .ok_or_else(|| UsersError {
                line: 0,
                reason: "no user in the file".into(),
            })?;
        Ok(Users {
            users,
            dummy: PasswordHash::new(b"", &[0; 16], iterations),
        })
    }

    /// Whether `user` is listed with `password`. An unknown user costs one
    /// derivation too.
    pub fn check(&self, user: &[u8], password: &[u8]) -> bool {
        let known = std::str::from_utf8(user)
            .ok()
            .and_then(|u| self.users.get(u));
        match known {
            Some(h) => h.verify(password),
            None => {
                let _ = self.dummy.verify(password);
                false
            }
        }
    }

    pub fn len(&self) -> usize {
        self.users.len()
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// The user name and password of an `Authorization: Basic …` value; None
/// for another scheme or a malformed value.
pub fn credentials(authorization: &[u8]) -> Option<(Vec<u8>, Vec<u8>)> {
    if authorization.len() > MAX_HEADER_BYTES {
        return None;
    }
    let value = std::str::from_utf8(authorization).ok()?.trim();
    let (scheme, token) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = B64.decode(token.trim().trim_end_matches('=')).ok()?;
    let mut parts = decoded.splitn(2, |b| *b == b':');
    let user = parts.next()?.to_vec();
    let password = parts.next()?.to_vec();
    Some((user, password))
}

/// A users file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum BasicAuthError {
    #[error("http.basic.auth.file {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("http.basic.auth.file {path}: {source}")]
    Parse { path: PathBuf, source: UsersError },
}

/// The users of `http.basic.auth.file`, reloaded when the file changes.
pub struct BasicAuth {
    path: PathBuf,
    users: RwLock<Arc<Users>>,
    stamp: Mutex<FileStamp>,
    /// SHA-256 of `Authorization` values that passed, newest last.
    accepted: Mutex<Vec<[u8; 32]>>,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BasicAuth")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

impl BasicAuth {
    /// Reads the users file (blocking).
    pub fn load(path: &Path) -> Result<BasicAuth, BasicAuthError> {
        let stamp = FileStamp::of(path);
        let users = read_users(path)?;
        Ok(BasicAuth {
            path: path.to_path_buf(),
            users: RwLock::new(Arc::new(users)),
            stamp: Mutex::new(stamp),
            accepted: Mutex::new(Vec::new()),
        })
    }

    /// Reloads when the file changed since the last look (blocking).
    /// `Ok(true)`: the new users are in force. On an error the previous
    /// users stay; the same file is not tried again until it changes once
    /// more.
    pub fn reload_if_changed(&self) -> Result<bool, BasicAuthError> {
        let now = FileStamp::of(&self.path);
        {
            let mut seen = self.stamp.lock().unwrap_or_else(|p| p.into_inner());
            if *seen == now {
                return Ok(false);
            }
            *seen = now;
        }
        let users = read_users(&self.path)?;
        *self.users.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(users);
        self.accepted
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        Ok(true)
    }

    /// Whether a request with this `Authorization` value (None: no header)
    /// is let in. Blocking: a derivation may take milliseconds.
    pub fn allows(&self, authorization: Option<&[u8]>) -> bool {
        let Some(value) = authorization else {
            return false;
        };
        let Some((user, password)) = credentials(value) else {
            return false;
        };
        let mut h = Sha256::new();
        h.update((user.len() as u64).to_be_bytes());
        h.update(&user);
        h.update(&password);
        let key: [u8; 32] = h.finalize().into();
        let users = self.users.read().unwrap_or_else(|p| p.into_inner()).clone();
        {
            let accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
            let hit = accepted
                .iter()
                .fold(subtle::Choice::from(0), |acc, k| acc | k.ct_eq(&key));
            if hit.into() {
                return true;
            }
        }
        if !users.check(&user, &password) {
            return false;
        }
        // Remembered only if the users checked are still those in force.
        let current = self.users.read().unwrap_or_else(|p| p.into_inner());
        if Arc::ptr_eq(&current, &users) {
            let mut accepted = self.accepted.lock().unwrap_or_else(|p| p.into_inner());
            if accepted.len() >= CACHE_ENTRIES {
                accepted.remove(0);
            }
            accepted.push(key);
        }
        true
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn read_users(path: &Path) -> Result<Users, BasicAuthError> {
    let text = std::fs::read_to_string(path).map_err(|source| BasicAuthError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    warn_if_readable_by_others(path);
    Users::parse(&text).map_err(|source| BasicAuthError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Hashes are made to be slow to guess from, not to be published.
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(m) = std::fs::metadata(path)
        && m.permissions().mode() & 0o004 != 0
    {
        tracing::warn!(
            "http.basic.auth.file {} is readable by every local user (chmod o-r)",
            path.display()
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, password: &str) -> String {
        format!(
            "{name}:{}\n",
            PasswordHash::new(password.as_bytes(), b"saltsalt", MIN_ITERATIONS)
        )
    }

    fn basic(user: &str, password: &str) -> Vec<u8> {
        format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"))
        )
        .into_bytes()
    }

    #[test]
    fn hashes_round_trip_and_verify() {
        let h = PasswordHash::generate("s3cret", MIN_ITERATIONS);
        let parsed = PasswordHash::parse(&h.to_string()).unwrap();
        assert_eq!(parsed, h);
        assert!(parsed.verify(b"s3cret"));
        assert!(!parsed.verify(b"s3cres"));
        assert!(!parsed.verify(b""));
        assert!(!format!("{h:?}").contains(&B64.encode(h.hash)));
    }

    /// A value made by Python's `hashlib.pbkdf2_hmac('sha256', b'pw',
    /// b'0123456789abcdef', 10000)`, as docs/security.md shows.
    #[test]
    fn a_hash_made_elsewhere_verifies() {
        let text = "$pbkdf2-sha256$i=10000$MDEyMzQ1Njc4OWFiY2RlZg$N/y9DskeeRX2qLMpd24hyTUNiM3IXwAoUyJwZo2LuwA";
        let h = PasswordHash::parse(text).unwrap();
        assert!(h.verify(b"pw"));
        assert!(!h.verify(b"pW"));
        assert_eq!(
            PasswordHash::new(b"pw", b"0123456789abcdef", 10_000).to_string(),
            text
        );
        // padding is accepted too
        assert!(
            PasswordHash::parse(&format!("{text}="))
                .unwrap()
                .verify(b"pw")
        );
    }

    #[test]
    fn bad_hashes_are_refused_with_reasons() {
        let good = PasswordHash::new(b"pw", b"saltsalt", MIN_ITERATIONS).to_string();
        let hash_part = good.rsplit('$').next().unwrap().to_string();
        for (bad, words) in [
            ("plaintext".to_string(), "$pbkdf2-sha256$"),
            ("$pbkdf2-sha256$i=10000$c2FsdHNhbHQ".to_string(), "expected"),
            (
                format!("$pbkdf2-sha256$i=1000$c2FsdHNhbHQ${hash_part}"),
                "iterations",
            ),
            (
                format!("$pbkdf2-sha256$x=10000$c2FsdHNhbHQ${hash_part}"),
                "i=<",
            ),
            (
                format!("$pbkdf2-sha256$i=10000$c2Fs${hash_part}"),
                "salt of 3",
            ),
            (format!("$pbkdf2-sha256$i=10000$!!${hash_part}"), "base64"),
            (
                "$pbkdf2-sha256$i=10000$c2FsdHNhbHQ$c2FsdA".to_string(),
                "32 bytes",
            ),
        ] {
            let e = PasswordHash::parse(&bad).unwrap_err();
            assert!(e.contains(words), "{bad}: {e}");
        }
    }

    #[test]
    fn users_files() {
        let text = format!(
            "# console users\n\n{}{}",
            entry("alice", "wonder"),
            entry("bob", "builder")
        );
        let u = Users::parse(&text).unwrap();
        assert_eq!(u.len(), 2);
        assert!(u.check(b"alice", b"wonder"));
        assert!(u.check(b"bob", b"builder"));
        assert!(!u.check(b"alice", b"builder"));
        assert!(!u.check(b"carol", b"wonder"));
        assert!(!u.check(b"\xff", b"wonder"));
        assert!(!format!("{u:?}").contains("pbkdf2"));
        for (bad, line, words) in [
            ("alice wonder\n".to_string(), 1, "expected name:"),
            ("\n:$pbkdf2-sha256$\n".to_string(), 2, "empty user name"),
            ("alice:wonder\n".to_string(), 1, "$pbkdf2-sha256$"),
            (
                format!("{}{}", entry("a", "x"), entry("a", "y")),
                2,
                "twice",
            ),
            ("# nobody\n".to_string(), 0, "no user"),
        ] {
            let e = Users::parse(&bad).unwrap_err();
            assert_eq!(e.line, line, "{bad}: {e}");
            assert!(e.reason.contains(words), "{bad}: {e}");
            assert!(!e.to_string().contains("wonder"), "{e}");
        }
    }

    #[test]
    fn authorization_values() {
        assert_eq!(
            credentials(&basic("alice", "a:b")),
            Some((b"alice".to_vec(), b"a:b".to_vec()))
        );
        assert_eq!(
            credentials(b"basic YWxpY2U6"),
            Some((b"alice".to_vec(), vec![]))
        );
        for bad in [
            &b"Bearer YWxpY2U6d29uZGVy"[..],
            b"Basic",
            b"Basic !!!",
            b"Basic YWxpY2U", // no colon
            b"\xff\xfe",
        ] {
            assert_eq!(credentials(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
        let long = format!("Basic {}", "A".repeat(MAX_HEADER_BYTES));
        assert_eq!(credentials(long.as_bytes()), None);
    }

    #[test]
    fn the_file_decides_and_changes_are_picked_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users");
        std::fs::write(&path, entry("alice", "wonder")).unwrap();
        let auth = BasicAuth::load(&path).unwrap();
        assert!(!auth.allows(None));
        assert!(!auth.allows(Some(&basic("alice", "wrong"))));
        assert!(auth.allows(Some(&basic("alice", "wonder"))));
        // remembered, and still only for the right password
        assert!(auth.allows(Some(&basic("alice", "wonder"))));
        assert!(!auth.allows(Some(&basic("alice", "wonde"))));
        assert!(!auth.reload_if_changed().unwrap());

        // a broken file keeps the users in force
        std::fs::write(&path, "alice:wonder\n").unwrap();
        assert!(auth.reload_if_changed().is_err());
        assert!(auth.allows(Some(&basic("alice", "wonder"))));

        // a new password: the old one (remembered before) no longer works
        let tmp = dir.path().join("users.new");
        std::fs::write(&tmp, entry("alice", "looking-glass")).unwrap();
        std::fs::rename(&tmp, &path).unwrap();
        assert!(auth.reload_if_changed().unwrap());
        assert!(!auth.allows(Some(&basic("alice", "wonder"))));
        assert!(auth.allows(Some(&basic("alice", "looking-glass"))));
    }

    #[test]
    fn a_missing_file_is_a_readable_error() {
        let e = BasicAuth::load(Path::new("/nonexistent/users"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("http.basic.auth.file /nonexistent/users"), "{e}");
    }
}
