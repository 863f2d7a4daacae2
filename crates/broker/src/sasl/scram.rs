//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677), the server side,
//! with Kafka's choices: no channel binding (the GS2 header is `n,,` or
//! `n,a=<user>,`), at least 4096 iterations, the `tokenauth` extension
//! refused (delegation tokens are not served) and other extensions ignored.
//!
//! A pure state machine: [`ScramServer::step`] takes the client's message
//! and returns the answer; the caller supplies the server nonce (random in
//! the broker, fixed in tests) and the credentials through
//! [`ScramCredentials`], so where they are stored can change without
//! touching the exchange.
//!
//! ```text
//! client-first   n,,n=alice,r=<cnonce>
//! server-first   r=<cnonce><snonce>,s=<salt b64>,i=4096
//! client-final   c=biws,r=<cnonce><snonce>,p=<proof b64>
//! server-final   v=<server signature b64>
//! ```

use std::collections::HashMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use subtle::ConstantTimeEq;

use super::SaslError;

/// Kafka's class name for the SCRAM login module.
pub const SCRAM_LOGIN_MODULE: &str = "org.apache.kafka.common.security.scram.ScramLoginModule";

/// The credential model (hashes, credentials, iteration bounds) is shared
/// with a cluster's controller.
pub use weir_metadata::scram::{
    MAX_ITERATIONS, MIN_ITERATIONS, ScramCredential, ScramHash, salted_password,
};

/// Where SCRAM credentials come from: the static JAAS users of a listener
/// ([`StaticScramCredentials`]), the ones set at run time
/// (`crate::scram_credentials::ScramStore`), or both
/// ([`LayeredScramCredentials`]).
pub trait ScramCredentials: Send + Sync + std::fmt::Debug {
    fn credential(&self, hash: ScramHash, user: &str) -> Option<ScramCredential>;
}

/// Two sources asked in order: a user and mechanism `first` knows is
/// answered from it alone; only otherwise is `then` asked. Consulted at
/// every authentication, so a change to either takes effect for the next
/// one.
#[derive(Debug)]
pub struct LayeredScramCredentials {
    pub first: std::sync::Arc<dyn ScramCredentials>,
    pub then: std::sync::Arc<dyn ScramCredentials>,
}

impl ScramCredentials for LayeredScramCredentials {
    fn credential(&self, hash: ScramHash, user: &str) -> Option<ScramCredential> {
        self.first
            .credential(hash, user)
            .or_else(|| self.then.credential(hash, user))
    }
}

/// Credentials held in memory.
#[derive(Debug, Default, Clone)]
pub struct StaticScramCredentials {
    users: HashMap<(ScramHash, String), ScramCredential>,
}

impl StaticScramCredentials {
    pub fn insert(&mut self, hash: ScramHash, user: &str, credential: ScramCredential) {
        self.users.insert((hash, user.to_string()), credential);
    }

    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

impl ScramCredentials for StaticScramCredentials {
    fn credential(&self, hash: ScramHash, user: &str) -> Option<ScramCredential> {
        self.users.get(&(hash, user.to_string())).cloned()
    }
}

/// Where the exchange is.
#[derive(Debug)]
enum State {
    /// Waiting for client-first.
    First,
    /// server-first sent; waiting for client-final.
    Final(Box<Pending>),
    Done,
}

/// What client-first left for client-final.
#[derive(Debug)]
struct Pending {
    user: String,
    /// None for an unknown user: the exchange goes on with a made-up
    /// credential and fails at the proof, so the answers do not tell
    /// which users exist.
    credential: Option<ScramCredential>,
    fake: ScramCredential,
    gs2_header: String,
    nonce: String,
    /// `client-first-bare,server-first,`
    auth_prefix: String,
}

/// One server-side SCRAM exchange.
#[derive(Debug)]
pub struct ScramServer {
    hash: ScramHash,
    server_nonce: String,
    /// Keys the made-up salt of unknown users (stable per broker, so a
    /// name's salt does not change between attempts).
    secret: [u8; 32],
    state: State,
}

/// The answer to one client message.
#[derive(Debug, PartialEq, Eq)]
pub enum ScramStep {
    /// Send this and wait for the next message.
    Continue(Vec<u8>),
    /// Authenticated as `user`; send `response` (server-final).
    Done { user: String, response: Vec<u8> },
}

impl ScramServer {
    /// `server_nonce`: printable, without `,` (the broker uses 24 random
    /// bytes in base64). `secret`: random, the same for the broker's life.
    pub fn new(hash: ScramHash, server_nonce: String, secret: [u8; 32]) -> ScramServer {
        ScramServer {
            hash,
            server_nonce,
            secret,
            state: State::First,
        }
    }

    pub fn step(
        &mut self,
        message: &[u8],
        credentials: &dyn ScramCredentials,
    ) -> Result<ScramStep, SaslError> {
        let state = std::mem::replace(&mut self.state, State::Done);
        let text = std::str::from_utf8(message)
            .map_err(|_| SaslError::malformed("SCRAM message is not UTF-8"))?;
        match state {
            State::First => self.client_first(text, credentials),
            State::Final(pending) => {
                let Pending {
                    user,
                    credential,
                    fake,
                    gs2_header,
                    nonce,
                    auth_prefix,
                } = *pending;
                let known = credential.is_some();
                let credential = credential.unwrap_or(fake);
                let proof = self.client_final(text, &gs2_header, &nonce)?;
                let (without_proof, proof) = proof;
                let auth_message = format!("{auth_prefix}{without_proof}");
                let client_signature = self
                    .hash
                    .hmac(&credential.stored_key, auth_message.as_bytes());
                if proof.len() != client_signature.len() {
                    return Err(SaslError::failed("SCRAM proof has the wrong length"));
                }
                let client_key: Vec<u8> = proof
                    .iter()
                    .zip(&client_signature)
                    .map(|(a, b)| a ^ b)
                    .collect();
                let matches = bool::from(self.hash.hash(&client_key).ct_eq(&credential.stored_key));
                if !known {
                    return Err(SaslError::failed("SCRAM unknown user"));
                }
                if !matches {
                    return Err(SaslError::failed("SCRAM wrong password"));
                }
                let server_signature = self
                    .hash
                    .hmac(&credential.server_key, auth_message.as_bytes());
                Ok(ScramStep::Done {
                    user,
                    response: format!("v={}", B64.encode(server_signature)).into_bytes(),
                })
            }
            State::Done => Err(SaslError::malformed(
                "SCRAM message after the exchange ended",
            )),
        }
    }

    fn client_first(
        &mut self,
        text: &str,
        credentials: &dyn ScramCredentials,
    ) -> Result<ScramStep, SaslError> {
        // gs2-header: cbind-flag "," [authzid] ","
        let mut parts = text.splitn(3, ',');
        let (Some(cbind), Some(authzid), Some(bare)) = (parts.next(), parts.next(), parts.next())
        else {
            return Err(SaslError::malformed("SCRAM client-first has no GS2 header"));
        };
        if cbind != "n" {
            return Err(SaslError::malformed(
                "SCRAM channel binding is not supported",
            ));
        }
        let mut attrs = bare.split(',');
        let user = attrs
            .next()
            .and_then(|a| a.strip_prefix("n="))
            .ok_or_else(|| SaslError::malformed("SCRAM client-first has no user name"))?;
        let user = decode_saslname(user)?;
        let client_nonce = attrs
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .filter(|n| !n.is_empty())
            .ok_or_else(|| SaslError::malformed("SCRAM client-first has no nonce"))?;
        for ext in attrs {
            let (k, v) = ext
                .split_once('=')
                .ok_or_else(|| SaslError::malformed("SCRAM extension is not key=value"))?;
            if k == "tokenauth" && v.eq_ignore_ascii_case("true") {
                return Err(SaslError::failed(
                    "SCRAM delegation tokens are not supported",
                ));
            }
        }
        if !authzid.is_empty() {
            let authzid = authzid
                .strip_prefix("a=")
                .ok_or_else(|| SaslError::malformed("SCRAM GS2 authzid is not a=<name>"))?;
            if decode_saslname(authzid)? != user {
                return Err(SaslError::failed(
                    "SCRAM authorization id differs from the user name",
                ));
            }
        }
        if user.is_empty() {
            return Err(SaslError::failed("SCRAM user name is empty"));
        }
        let credential = credentials.credential(self.hash, &user);
        if let Some(c) = &credential
            && c.iterations < MIN_ITERATIONS
        {
            return Err(SaslError::failed("SCRAM credential has too few iterations"));
        }
        let fake = self.fake_credential(&user);
        let shown = credential.as_ref().unwrap_or(&fake);
        let nonce = format!("{client_nonce}{}", self.server_nonce);
        let server_first = format!(
            "r={nonce},s={},i={}",
            B64.encode(&shown.salt),
            shown.iterations
        );
        let gs2_header = format!("{cbind},{authzid},");
        self.state = State::Final(Box::new(Pending {
            auth_prefix: format!("{bare},{server_first},"),
            user,
            credential,
            fake,
            gs2_header,
            nonce,
        }));
        Ok(ScramStep::Continue(server_first.into_bytes()))
    }

    /// Checks client-final and splits it into the part the signatures
    /// cover (`client-final-without-proof`) and the decoded proof.
    fn client_final<'a>(
        &self,
        text: &'a str,
        gs2_header: &str,
        nonce: &str,
    ) -> Result<(&'a str, Vec<u8>), SaslError> {
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or_else(|| SaslError::malformed("SCRAM client-final has no proof"))?;
        let mut attrs = without_proof.split(',');
        let binding = attrs
            .next()
            .and_then(|a| a.strip_prefix("c="))
            .ok_or_else(|| SaslError::malformed("SCRAM client-final has no channel binding"))?;
        if binding != B64.encode(gs2_header) {
            return Err(SaslError::failed(
                "SCRAM channel binding does not match the GS2 header",
            ));
        }
        let given_nonce = attrs
            .next()
            .and_then(|a| a.strip_prefix("r="))
            .ok_or_else(|| SaslError::malformed("SCRAM client-final has no nonce"))?;
        if given_nonce != nonce {
            return Err(SaslError::failed("SCRAM nonce does not match"));
        }
        let proof = B64
            .decode(proof)
            .map_err(|_| SaslError::malformed("SCRAM proof is not base64"))?;
        Ok((without_proof, proof))
    }

    /// A credential for a user that does not exist: a salt derived from the
    /// name and the broker's secret (the same at every attempt, as a real
    /// user's is) and keys that match no password.
    fn fake_credential(&self, user: &str) -> ScramCredential {
        let salt = self.hash.hmac(&self.secret, user.as_bytes());
        ScramCredential {
            salt: salt.get(..16).unwrap_or_default().to_vec(),
            iterations: MIN_ITERATIONS,
            stored_key: self.hash.hash(&salt),
            server_key: salt,
        }
    }
}

/// RFC 5802's saslname: `=2C` is `,` and `=3D` is `=`; any other `=` is
/// malformed.
fn decode_saslname(s: &str) -> Result<String, SaslError> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('=') {
        out.push_str(rest.get(..i).unwrap_or_default());
        let after = rest.get(i..).unwrap_or_default();
        if let Some(r) = after.strip_prefix("=2C") {
            out.push(',');
            rest = r;
        } else if let Some(r) = after.strip_prefix("=3D") {
            out.push('=');
            rest = r;
        } else {
            return Err(SaslError::malformed("SCRAM user name has a bad '=' escape"));
        }
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests;
