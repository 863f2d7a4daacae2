//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the client side,
//! as Kafka's client does it: no channel binding (GS2 header `n,,`), no
//! extensions, and an iteration count between 4096 and 16384 (Kafka's
//! bounds: fewer is weak, more lets a broker make the client burn CPU).
//!
//! A pure state machine: the caller supplies the client nonce (random in
//! the connection, fixed in tests) and carries the messages; nothing here
//! does I/O.
//!
//! ```text
//! client-first   n,,n=alice,r=<cnonce>
//! server-first   r=<cnonce><snonce>,s=<salt b64>,i=4096
//! client-final   c=biws,r=<cnonce><snonce>,p=<proof b64>
//! server-final   v=<server signature b64>
//! ```
//!
//! The server signature is checked: only a server that holds the user's
//! credential can compute it, so a broker that does not know the password
//! (or something in the middle posing as one) is not trusted.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

/// Kafka's lowest iteration count for SCRAM.
pub const MIN_ITERATIONS: u32 = 4096;
/// Kafka's highest iteration count a client accepts.
pub const MAX_ITERATIONS: u32 = 16384;

/// The two SCRAM hash functions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScramHash {
    Sha256,
    Sha512,
}

impl ScramHash {
    /// `HMAC(key, data)` with this hash.
    pub fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => hmac_with::<Hmac<Sha256>>(key, data),
            ScramHash::Sha512 => hmac_with::<Hmac<Sha512>>(key, data),
        }
    }

    /// `H(data)`.
    pub fn hash(self, data: &[u8]) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => Sha256::digest(data).to_vec(),
            ScramHash::Sha512 => Sha512::digest(data).to_vec(),
        }
    }

    /// `Hi(password, salt, i)`: PBKDF2 with HMAC of this hash.
    pub fn salted_password(self, password: &[u8], salt: &[u8], iterations: u32) -> Vec<u8> {
        match self {
            ScramHash::Sha256 => {
                let mut out = vec![0u8; 32];
                pbkdf2::pbkdf2_hmac::<Sha256>(password, salt, iterations, &mut out);
                out
            }
            ScramHash::Sha512 => {
                let mut out = vec![0u8; 64];
                pbkdf2::pbkdf2_hmac::<Sha512>(password, salt, iterations, &mut out);
                out
            }
        }
    }
}

fn hmac_with<M: Mac + KeyInit>(key: &[u8], data: &[u8]) -> Vec<u8> {
    // HMAC takes a key of any length
    let Ok(mut mac) = <M as KeyInit>::new_from_slice(key) else {
        return Vec::new();
    };
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

/// Why the server's messages were refused. Nothing here holds the
/// password or a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScramError {
    #[error("malformed SCRAM server-first message: {0}")]
    MalformedFirst(&'static str),
    #[error("the server's nonce does not extend the client's")]
    Nonce,
    #[error("the server asks for {0} iterations (between 4096 and 16384 are accepted)")]
    Iterations(u32),
    #[error("the server refused the proof: {0}")]
    ServerError(String),
    #[error("malformed SCRAM server-final message")]
    MalformedFinal,
    #[error(
        "the server's SCRAM signature is wrong: it does not know the password (it is not the broker it claims to be)"
    )]
    Signature,
    #[error("SCRAM message out of order")]
    Order,
}

/// Where the exchange is.
#[derive(Debug)]
enum State {
    /// client-first sent; waiting for server-first.
    First {
        client_first_bare: String,
    },
    /// client-final sent; waiting for server-final, whose signature must
    /// be this.
    Final {
        server_signature: Vec<u8>,
    },
    Done,
}

/// One client-side SCRAM exchange.
pub struct ScramClient {
    hash: ScramHash,
    password: String,
    client_nonce: String,
    state: State,
}

impl std::fmt::Debug for ScramClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScramClient")
            .field("hash", &self.hash)
            .finish_non_exhaustive()
    }
}

impl ScramClient {
    /// Starts an exchange for `user`; returns it and the client-first
    /// message. `client_nonce`: printable, without `,` (the connection
    /// uses 24 random bytes in base64).
    pub fn start(
        hash: ScramHash,
        user: &str,
        password: &str,
        client_nonce: String,
    ) -> (ScramClient, Vec<u8>) {
        let client_first_bare = format!("n={},r={client_nonce}", encode_saslname(user));
        let first = format!("n,,{client_first_bare}").into_bytes();
        let client = ScramClient {
            hash,
            password: password.to_string(),
            client_nonce,
            state: State::First { client_first_bare },
        };
        (client, first)
    }

    /// Takes the server's next message: server-first gives client-final
    /// to send; server-final, once checked, ends the exchange (None).
    pub fn step(&mut self, message: &[u8]) -> Result<Option<Vec<u8>>, ScramError> {
        match self.state {
            State::First { .. } => self.server_first(message).map(Some),
            State::Final { .. } | State::Done => self.server_final(message).map(|()| None),
        }
    }

    /// Takes server-first and returns client-final.
    pub fn server_first(&mut self, message: &[u8]) -> Result<Vec<u8>, ScramError> {
        let State::First { client_first_bare } = std::mem::replace(&mut self.state, State::Done)
        else {
            return Err(ScramError::Order);
        };
        let text =
            std::str::from_utf8(message).map_err(|_| ScramError::MalformedFirst("not UTF-8"))?;
        let mut attrs = text.split(',');
        if text.starts_with("m=") {
            return Err(ScramError::MalformedFirst("mandatory extension"));
        }
        let nonce = attrs
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or(ScramError::MalformedFirst("no nonce"))?;
        let salt = attrs
            .next()
            .and_then(|a| a.strip_prefix("s="))
            .ok_or(ScramError::MalformedFirst("no salt"))?;
        let salt = B64
            .decode(salt)
            .map_err(|_| ScramError::MalformedFirst("salt is not base64"))?;
        let iterations: u32 = attrs
            .next()
            .and_then(|a| a.strip_prefix("i="))
            .and_then(|i| i.parse().ok())
            .ok_or(ScramError::MalformedFirst("no iteration count"))?;
        // The server's part must be there too: a nonce the client chose
        // alone would let an old exchange be replayed.
        if !nonce.starts_with(&self.client_nonce) || nonce.len() == self.client_nonce.len() {
            return Err(ScramError::Nonce);
        }
        if !(MIN_ITERATIONS..=MAX_ITERATIONS).contains(&iterations) {
            return Err(ScramError::Iterations(iterations));
        }
        let hash = self.hash;
        let salted = hash.salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = hash.hmac(&salted, b"Client Key");
        let stored_key = hash.hash(&client_key);
        // c=biws is base64 of the GS2 header "n,,"
        let without_proof = format!("c=biws,r={nonce}");
        let auth_message = format!("{client_first_bare},{text},{without_proof}");
        let client_signature = hash.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(a, b)| a ^ b)
            .collect();
        let server_key = hash.hmac(&salted, b"Server Key");
        self.state = State::Final {
            server_signature: hash.hmac(&server_key, auth_message.as_bytes()),
        };
        Ok(format!("{without_proof},p={}", B64.encode(proof)).into_bytes())
    }

    /// Takes server-final: Ok when its signature proves the server knows
    /// the credential.
    pub fn server_final(&mut self, message: &[u8]) -> Result<(), ScramError> {
        let State::Final { server_signature } = std::mem::replace(&mut self.state, State::Done)
        else {
            return Err(ScramError::Order);
        };
        let text = std::str::from_utf8(message).map_err(|_| ScramError::MalformedFinal)?;
        let first = text.split(',').next().unwrap_or_default();
        if let Some(e) = first.strip_prefix("e=") {
            return Err(ScramError::ServerError(e.to_string()));
        }
        let given = first
            .strip_prefix("v=")
            .and_then(|v| B64.decode(v).ok())
            .ok_or(ScramError::MalformedFinal)?;
        if bool::from(given.ct_eq(&server_signature)) {
            Ok(())
        } else {
            Err(ScramError::Signature)
        }
    }
}

/// RFC 5802's saslname: `,` is `=2C` and `=` is `=3D`.
fn encode_saslname(name: &str) -> String {
    name.replace('=', "=3D").replace(',', "=2C")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 7677 section 3: user "user", password "pencil".
    const NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
    const SERVER_FIRST: &str = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
    const CLIENT_FINAL: &str = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
                                p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
    const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";

    fn rfc7677(password: &str) -> (ScramClient, Vec<u8>) {
        ScramClient::start(ScramHash::Sha256, "user", password, NONCE.into())
    }

    #[test]
    fn rfc7677_example_exchange() {
        let (mut c, first) = rfc7677("pencil");
        assert_eq!(first, b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO");
        let last = c.server_first(SERVER_FIRST.as_bytes()).unwrap();
        assert_eq!(String::from_utf8(last).unwrap(), CLIENT_FINAL);
        c.server_final(SERVER_FINAL.as_bytes()).unwrap();
        assert_eq!(
            c.server_final(SERVER_FINAL.as_bytes()),
            Err(ScramError::Order)
        );
    }

    #[test]
    fn a_server_that_does_not_know_the_password_is_not_trusted() {
        // The client's password differs from the one the signature was
        // made with: the server could be anyone.
        let (mut c, _) = rfc7677("not-pencil");
        c.server_first(SERVER_FIRST.as_bytes()).unwrap();
        assert_eq!(
            c.server_final(SERVER_FINAL.as_bytes()),
            Err(ScramError::Signature)
        );
        let (mut c, _) = rfc7677("pencil");
        c.server_first(SERVER_FIRST.as_bytes()).unwrap();
        let forged = format!("v={}", B64.encode([0u8; 32]));
        assert_eq!(
            c.server_final(forged.as_bytes()),
            Err(ScramError::Signature)
        );
    }

    #[test]
    fn server_refusals_and_malformed_messages() {
        let first = |m: &str| rfc7677("pencil").0.server_first(m.as_bytes());
        assert_eq!(first("r=other,s=AAAA,i=4096"), Err(ScramError::Nonce));
        // the server added nothing to the nonce
        assert_eq!(
            first(&format!("r={NONCE},s=AAAA,i=4096")),
            Err(ScramError::Nonce)
        );
        assert_eq!(
            first(&format!("r={NONCE}x,s=AAAA,i=4095")),
            Err(ScramError::Iterations(4095))
        );
        assert_eq!(
            first(&format!("r={NONCE}x,s=AAAA,i=16385")),
            Err(ScramError::Iterations(16385))
        );
        assert!(matches!(
            first(&format!("r={NONCE}x,s=!!,i=4096")),
            Err(ScramError::MalformedFirst(_))
        ));
        assert!(matches!(
            first(&format!("r={NONCE}x,i=4096")),
            Err(ScramError::MalformedFirst(_))
        ));
        assert!(matches!(
            first("m=ext,r=x,s=AAAA,i=4096"),
            Err(ScramError::MalformedFirst(_))
        ));
        let (mut c, _) = rfc7677("pencil");
        c.server_first(SERVER_FIRST.as_bytes()).unwrap();
        assert_eq!(
            c.server_final(b"e=invalid-proof"),
            Err(ScramError::ServerError("invalid-proof".into()))
        );
        let (mut c, _) = rfc7677("pencil");
        c.server_first(SERVER_FIRST.as_bytes()).unwrap();
        assert_eq!(c.server_final(b"x=1"), Err(ScramError::MalformedFinal));
        let (mut c, _) = rfc7677("pencil");
        assert_eq!(
            c.server_final(SERVER_FINAL.as_bytes()),
            Err(ScramError::Order)
        );
    }

    #[test]
    fn user_names_are_escaped() {
        let (_, first) = ScramClient::start(ScramHash::Sha512, "a=b,c", "p", "n".into());
        assert_eq!(first, b"n,,n=a=3Db=2Cc,r=n");
    }
}
