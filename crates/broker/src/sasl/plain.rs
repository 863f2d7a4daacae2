//! SASL/PLAIN (RFC 4616) against the users of a listener's
//! `PlainLoginModule` configuration (`user_<name>="<password>"`).
//!
//! The client's single message is `authzid NUL authcid NUL passwd`; the
//! authorization id must be empty or equal to the user name (Kafka does not
//! let a user act as another). Passwords are compared in constant time,
//! over their SHA-256 digests so that the comparison does not depend on
//! the stored password's length either; an unknown user costs the same
//! comparison as a known one.

use std::collections::HashMap;

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use super::SaslError;
use super::jaas::JaasModule;

/// Kafka's class name for the PLAIN login module.
pub const PLAIN_LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// The users a PLAIN listener accepts: name and SHA-256 of the password.
#[derive(Clone, Default)]
pub struct PlainUsers {
    users: HashMap<String, [u8; 32]>,
}

impl std::fmt::Debug for PlainUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut names: Vec<&String> = self.users.keys().collect();
        names.sort();
        f.debug_struct("PlainUsers").field("users", &names).finish()
    }
}

fn digest(password: &[u8]) -> [u8; 32] {
    Sha256::digest(password).into()
}

impl PlainUsers {
    /// The `user_<name>` options of a `PlainLoginModule` (other options,
    /// such as the `username`/`password` a broker uses as a client, are
    /// ignored).
    pub fn from_jaas(module: &JaasModule) -> Result<PlainUsers, String> {
        if module.class != PLAIN_LOGIN_MODULE {
            return Err(format!(
                "login module {} is not {PLAIN_LOGIN_MODULE}",
                module.class
            ));
        }
        let mut users = PlainUsers::default();
        for (k, v) in &module.options {
            if let Some(name) = k.strip_prefix("user_") {
                users.insert(name, v);
            }
        }
        Ok(users)
    }

    pub fn insert(&mut self, name: &str, password: &str) {
        self.users
            .insert(name.to_string(), digest(password.as_bytes()));
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }

    /// Checks one PLAIN message; the authenticated user name on success.
    pub fn authenticate(&self, message: &[u8]) -> Result<String, SaslError> {
        let mut tokens = message.split(|b| *b == 0);
        let (Some(authzid), Some(authcid), Some(password), None) =
            (tokens.next(), tokens.next(), tokens.next(), tokens.next())
        else {
            return Err(SaslError::malformed(
                "PLAIN message is not 3 NUL-separated tokens",
            ));
        };
        let user = std::str::from_utf8(authcid)
            .map_err(|_| SaslError::malformed("PLAIN user name is not UTF-8"))?;
        if user.is_empty() {
            return Err(SaslError::failed("PLAIN user name is empty"));
        }
        if password.is_empty() {
            return Err(SaslError::failed("PLAIN password is empty"));
        }
        if !authzid.is_empty() && authzid != authcid {
            return Err(SaslError::failed(
                "PLAIN authorization id differs from the user name",
            ));
        }
        let given = digest(password);
        // An unknown user is compared against a digest nothing hashes to
        // in practice, so both paths do the same work.
        let (known, stored) = match self.users.get(user) {
            Some(d) => (true, *d),
            None => (false, [0u8; 32]),
        };
        if bool::from(given.ct_eq(&stored)) && known {
            Ok(user.to_string())
        } else if known {
            Err(SaslError::failed("PLAIN wrong password"))
        } else {
            Err(SaslError::failed("PLAIN unknown user"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sasl::jaas;

    fn users() -> PlainUsers {
        PlainUsers::from_jaas(
            &jaas::parse(
                "org.apache.kafka.common.security.plain.PlainLoginModule required \
                 username=\"admin\" password=\"admin-secret\" \
                 user_admin=\"admin-secret\" user_alice=\"alice-secret\";",
            )
            .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn accepts_known_users() {
        let u = users();
        assert_eq!(u.authenticate(b"\0alice\0alice-secret").unwrap(), "alice");
        assert_eq!(
            u.authenticate(b"admin\0admin\0admin-secret").unwrap(),
            "admin"
        );
        // `username`/`password` are the broker's own client identity, not a user
        assert!(u.authenticate(b"\0username\0admin").is_err());
    }

    #[test]
    fn refuses_what_rfc_4616_and_kafka_refuse() {
        let u = users();
        for (msg, why) in [
            (&b"\0alice\0wrong"[..], "wrong password"),
            (b"\0alice\0alice-secretx", "wrong password"),
            (b"\0alice\0", "password is empty"),
            (b"\0mallory\0alice-secret", "unknown user"),
            (b"\0\0alice-secret", "user name is empty"),
            (b"admin\0alice\0alice-secret", "authorization id differs"),
            (b"alice-secret", "3 NUL-separated tokens"),
            (b"\0alice\0alice-secret\0", "3 NUL-separated tokens"),
            (b"\0\xff\0x", "not UTF-8"),
        ] {
            let e = u.authenticate(msg).unwrap_err();
            assert!(e.to_string().contains(why), "{msg:?}: {e}");
            // what the client is told says nothing about which check failed
            assert_eq!(
                e.client_message(),
                "Authentication failed: Invalid username or password"
            );
        }
    }

    #[test]
    fn other_login_modules_are_refused() {
        let m = jaas::parse("org.example.Other required user_a=\"b\";").unwrap();
        assert!(PlainUsers::from_jaas(&m).is_err());
    }
}
