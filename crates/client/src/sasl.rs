//! The client side of a SASL exchange (PLAIN, SCRAM-SHA-256/512) as pure
//! steps: the connection carries each message in a SaslAuthenticate
//! request and feeds the broker's answer back; nothing here does I/O.

use crate::scram::{ScramClient, ScramError, ScramHash};
use crate::security::{SaslMechanism, SaslSettings};

/// One authentication in progress.
#[derive(Debug)]
pub(crate) enum SaslExchange {
    /// PLAIN (RFC 4616): one message, answered with nothing.
    Plain,
    Scram(Box<ScramClient>),
}

impl SaslExchange {
    /// Starts the exchange; returns it and the first message to send.
    /// `nonce`: the SCRAM client nonce (printable, without `,`).
    pub(crate) fn start(s: &SaslSettings, nonce: String) -> (SaslExchange, Vec<u8>) {
        let hash = match s.mechanism {
            SaslMechanism::Plain => {
                // authzid (empty: the user's own), user, password
                let message = format!("\0{}\0{}", s.username, s.password.0).into_bytes();
                return (SaslExchange::Plain, message);
            }
            SaslMechanism::ScramSha256 => ScramHash::Sha256,
            SaslMechanism::ScramSha512 => ScramHash::Sha512,
        };
        let (client, first) = ScramClient::start(hash, &s.username, &s.password.0, nonce);
        (SaslExchange::Scram(Box::new(client)), first)
    }

    /// Takes the broker's answer to the last message: the next message to
    /// send, or None when the exchange is complete (for SCRAM: the broker
    /// proved it knows the credential).
    pub(crate) fn step(&mut self, answer: &[u8]) -> Result<Option<Vec<u8>>, ScramError> {
        match self {
            SaslExchange::Plain => Ok(None),
            SaslExchange::Scram(c) => c.step(answer),
        }
    }
}

/// A fresh SCRAM client nonce: 24 random bytes in base64.
pub(crate) fn client_nonce() -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 24]>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::security::Secret;

    #[test]
    fn plain_is_one_message() {
        let s = SaslSettings {
            mechanism: SaslMechanism::Plain,
            username: "alice".into(),
            password: Secret("pw".into()),
        };
        let (mut e, first) = SaslExchange::start(&s, client_nonce());
        assert_eq!(first, b"\0alice\0pw");
        assert_eq!(e.step(b""), Ok(None));
    }

    #[test]
    fn nonces_are_fresh_and_printable() {
        let (a, b) = (client_nonce(), client_nonce());
        assert_ne!(a, b);
        assert!(a.len() >= 32 && !a.contains(','), "{a}");
    }
}
