//! A SASL listener's connection before it is authenticated: which
//! requests it may send and what each does to the exchange. Kafka's order:
//! ApiVersions any number of times, then SaslHandshake (v1) naming a
//! mechanism, then SaslAuthenticate requests carrying the mechanism's
//! messages until it succeeds. Anything else, or anything out of order,
//! closes the connection; a failed authentication is answered with
//! SASL_AUTHENTICATION_FAILED and then closes it.
//!
//! No I/O: the connection feeds decoded requests in and sends what comes
//! out.

use std::sync::Arc;

use bytes::Bytes;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{
    RequestBody, ResponseBody, SaslAuthenticateResponse, SaslHandshakeResponse,
};

use super::{Exchange, ListenerSasl, Mechanism, SaslStep};

/// Most bytes a request may have before the client is authenticated
/// (Kafka's `sasl.server.max.receive.size` default): an unauthenticated
/// client cannot make the broker buffer a large frame.
pub const MAX_UNAUTHENTICATED_REQUEST_BYTES: u32 = 512 * 1024;

/// What the connection does with a request.
#[derive(Debug)]
pub enum Gate {
    /// Handle it as usual (ApiVersions).
    Pass,
    /// Send `body`; then go on, or close (`close` holds the reason, for
    /// the log), or treat the client as `authenticated`.
    Answer {
        body: Box<ResponseBody>,
        after: After,
    },
    /// Close without an answer (a request not allowed before
    /// authentication, as Kafka does).
    Close(String),
}

#[derive(Debug, PartialEq, Eq)]
pub enum After {
    Continue,
    Authenticated {
        user: String,
        mechanism: Mechanism,
        /// When the credential stops being valid (an OAUTHBEARER token's
        /// `exp`), for the session's lifetime (KIP-368).
        expires_at_ms: Option<i64>,
    },
    /// The client failed to authenticate: count, log, close.
    Failed {
        reason: String,
    },
}

#[derive(Debug)]
enum Phase {
    /// Waiting for SaslHandshake.
    Handshake,
    /// Handshake done; SaslAuthenticate carries the exchange's messages.
    Authenticate(Mechanism, Box<Exchange>),
    /// Over (failed); nothing more is accepted.
    Over,
}

/// One connection's authentication in progress.
#[derive(Debug)]
pub struct Authenticating {
    sasl: Arc<ListenerSasl>,
    phase: Phase,
    /// A re-authentication (KIP-368) of a session that authenticated with
    /// this mechanism: the same mechanism is required, and other requests
    /// are served meanwhile.
    reauth: Option<Mechanism>,
}

impl Authenticating {
    pub fn new(sasl: Arc<ListenerSasl>) -> Authenticating {
        Authenticating {
            sasl,
            phase: Phase::Handshake,
            reauth: None,
        }
    }

    /// A re-authentication of a session authenticated with `mechanism`.
    pub fn reauthenticate(sasl: Arc<ListenerSasl>, mechanism: Mechanism) -> Authenticating {
        Authenticating {
            sasl,
            phase: Phase::Handshake,
            reauth: Some(mechanism),
        }
    }

    /// Whether this is a re-authentication (the session is authenticated).
    pub fn is_reauth(&self) -> bool {
        self.reauth.is_some()
    }

    /// Decides about one decoded request. `nonce` makes a SCRAM server
    /// nonce when a SCRAM exchange starts.
    pub fn request(&mut self, body: &RequestBody, nonce: impl FnOnce() -> String) -> Gate {
        let sasl_request = matches!(
            body,
            RequestBody::SaslHandshake(_) | RequestBody::SaslAuthenticate(_)
        );
        if self.reauth.is_some() && !sasl_request {
            // the session stays authenticated while it re-authenticates
            return Gate::Pass;
        }
        match (body, &mut self.phase) {
            (RequestBody::ApiVersions(_), Phase::Handshake) => Gate::Pass,
            (RequestBody::SaslHandshake(r), Phase::Handshake)
                if self
                    .reauth
                    .is_some_and(|m| Mechanism::from_name(&r.mechanism) != Some(m)) =>
            {
                self.phase = Phase::Over;
                let reason = format!(
                    "re-authentication with {:?}, not the session's mechanism",
                    r.mechanism
                );
                Gate::Answer {
                    body: Box::new(ResponseBody::SaslHandshake(SaslHandshakeResponse {
                        error_code: ErrorCode::IllegalSaslState.code(),
                        mechanisms: self.reauth.iter().map(|m| m.name().to_string()).collect(),
                        ..Default::default()
                    })),
                    after: After::Failed { reason },
                }
            }
            (RequestBody::SaslHandshake(r), Phase::Handshake) => {
                let mechanisms: Vec<String> = self
                    .sasl
                    .mechanisms
                    .iter()
                    .map(|m| m.name().to_string())
                    .collect();
                let started = Mechanism::from_name(&r.mechanism)
                    .and_then(|m| Some((m, self.sasl.start(m, nonce())?)));
                let (error_code, after) = match started {
                    Some((m, exchange)) => {
                        self.phase = Phase::Authenticate(m, Box::new(exchange));
                        (ErrorCode::None, After::Continue)
                    }
                    None => {
                        self.phase = Phase::Over;
                        (
                            ErrorCode::UnsupportedSaslMechanism,
                            After::Failed {
                                reason: format!("mechanism {:?} is not enabled", r.mechanism),
                            },
                        )
                    }
                };
                Gate::Answer {
                    body: Box::new(ResponseBody::SaslHandshake(SaslHandshakeResponse {
                        error_code: error_code.code(),
                        mechanisms,
                        ..Default::default()
                    })),
                    after,
                }
            }
            (RequestBody::SaslAuthenticate(r), Phase::Authenticate(mechanism, exchange)) => {
                let mechanism = *mechanism;
                match exchange.step(&r.auth_bytes) {
                    Ok(SaslStep::Continue(bytes)) => Gate::Answer {
                        body: authenticate_response(ErrorCode::None, None, bytes),
                        after: After::Continue,
                    },
                    // The session's lifetime (KIP-368) is set by the
                    // connection, which knows the time.
                    Ok(SaslStep::Done {
                        user,
                        response,
                        expires_at_ms,
                    }) => Gate::Answer {
                        body: authenticate_response(ErrorCode::None, None, response),
                        after: After::Authenticated {
                            user,
                            mechanism,
                            expires_at_ms,
                        },
                    },
                    Err(e) => {
                        self.phase = Phase::Over;
                        Gate::Answer {
                            body: authenticate_response(
                                ErrorCode::SaslAuthenticationFailed,
                                Some(e.client_message()),
                                Vec::new(),
                            ),
                            after: After::Failed {
                                reason: format!("{}: {e}", mechanism.name()),
                            },
                        }
                    }
                }
            }
            (RequestBody::SaslAuthenticate(_), _) => {
                self.phase = Phase::Over;
                Gate::Answer {
                    body: authenticate_response(
                        ErrorCode::IllegalSaslState,
                        Some("SaslAuthenticate before SaslHandshake".to_string()),
                        Vec::new(),
                    ),
                    after: After::Failed {
                        reason: "SaslAuthenticate before SaslHandshake".to_string(),
                    },
                }
            }
            (other, _) => Gate::Close(format!(
                "{} request before SASL authentication",
                other.api_key().name()
            )),
        }
    }
}

fn authenticate_response(
    error: ErrorCode,
    message: Option<String>,
    bytes: Vec<u8>,
) -> Box<ResponseBody> {
    Box::new(ResponseBody::SaslAuthenticate(SaslAuthenticateResponse {
        error_code: error.code(),
        error_message: message,
        auth_bytes: Bytes::from(bytes),
        // set by the connection on success with connections.max.reauth.ms
        session_lifetime_ms: 0,
        ..Default::default()
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_protocol::messages::{
        ApiVersionsRequest, MetadataRequest, SaslAuthenticateRequest, SaslHandshakeRequest,
    };

    fn gate() -> Authenticating {
        let sasl = ListenerSasl::parse("SASL", &|name| match name {
            "sasl.enabled.mechanisms" => Some("PLAIN,SCRAM-SHA-256".into()),
            "listener.name.sasl.plain.sasl.jaas.config" => Some(
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_u=\"p\";"
                    .into(),
            ),
            _ => None,
        })
        .unwrap();
        Authenticating::new(Arc::new(sasl))
    }

    fn handshake(m: &str) -> RequestBody {
        RequestBody::SaslHandshake(SaslHandshakeRequest {
            mechanism: m.into(),
            ..Default::default()
        })
    }

    fn auth(b: &[u8]) -> RequestBody {
        RequestBody::SaslAuthenticate(SaslAuthenticateRequest {
            auth_bytes: Bytes::copy_from_slice(b),
            ..Default::default()
        })
    }

    fn answer(g: Gate) -> (i16, After) {
        let Gate::Answer { body, after } = g else {
            panic!("{g:?}");
        };
        match *body {
            ResponseBody::SaslHandshake(r) => (r.error_code, after),
            ResponseBody::SaslAuthenticate(r) => (r.error_code, after),
            other => panic!("{other:?}"),
        }
    }

    fn nonce() -> String {
        "n".into()
    }

    #[test]
    fn plain_in_order() {
        let mut g = gate();
        let versions = RequestBody::ApiVersions(ApiVersionsRequest::default());
        assert!(matches!(g.request(&versions, nonce), Gate::Pass));
        assert_eq!(
            answer(g.request(&handshake("PLAIN"), nonce)),
            (0, After::Continue)
        );
        assert_eq!(
            answer(g.request(&auth(b"\0u\0p"), nonce)),
            (
                0,
                After::Authenticated {
                    user: "u".into(),
                    mechanism: Mechanism::Plain,
                    expires_at_ms: None,
                }
            )
        );
    }

    #[test]
    fn reauthentication_keeps_serving_and_the_mechanism() {
        let Authenticating { sasl, .. } = gate();
        let mut g = Authenticating::reauthenticate(sasl.clone(), Mechanism::Plain);
        assert!(g.is_reauth());
        // other requests are served while it re-authenticates
        let metadata = RequestBody::Metadata(MetadataRequest::default());
        assert!(matches!(g.request(&metadata, nonce), Gate::Pass));
        assert_eq!(
            answer(g.request(&handshake("PLAIN"), nonce)),
            (0, After::Continue)
        );
        assert!(matches!(g.request(&metadata, nonce), Gate::Pass));
        assert!(matches!(
            answer(g.request(&auth(b"\0u\0p"), nonce)),
            (0, After::Authenticated { .. })
        ));
        // another mechanism than the session's is refused
        let mut g = Authenticating::reauthenticate(sasl, Mechanism::Plain);
        let (code, after) = answer(g.request(&handshake("SCRAM-SHA-256"), nonce));
        assert_eq!(code, ErrorCode::IllegalSaslState.code());
        assert!(matches!(after, After::Failed { .. }));
    }

    #[test]
    fn refusals() {
        let metadata = RequestBody::Metadata(MetadataRequest::default());
        // nothing else before authentication
        assert!(matches!(gate().request(&metadata, nonce), Gate::Close(_)));
        let mut g = gate();
        g.request(&handshake("PLAIN"), nonce);
        assert!(matches!(g.request(&metadata, nonce), Gate::Close(_)));
        // a wrong password
        let mut g = gate();
        g.request(&handshake("PLAIN"), nonce);
        let (code, after) = answer(g.request(&auth(b"\0u\0x"), nonce));
        assert_eq!(code, ErrorCode::SaslAuthenticationFailed.code());
        assert!(matches!(after, After::Failed { .. }));
        // a mechanism not enabled (names are case-sensitive)
        for m in ["SCRAM-SHA-512", "plain", "GSSAPI"] {
            let (code, after) = answer(gate().request(&handshake(m), nonce));
            assert_eq!(code, ErrorCode::UnsupportedSaslMechanism.code());
            assert!(matches!(after, After::Failed { .. }));
        }
        // out of order
        let (code, _) = answer(gate().request(&auth(b"\0u\0p"), nonce));
        assert_eq!(code, ErrorCode::IllegalSaslState.code());
        let mut g = gate();
        g.request(&handshake("PLAIN"), nonce);
        assert!(matches!(
            g.request(&handshake("PLAIN"), nonce),
            Gate::Close(_)
        ));
    }

    /// A refused OAUTHBEARER token: the error status as auth bytes with no
    /// error code, then, after the client's %x01, SASL_AUTHENTICATION_FAILED
    /// with the same status as the message (what librdkafka reports).
    #[test]
    fn oauthbearer_refusal_takes_two_steps() {
        let sasl = ListenerSasl::parse("SASL", &|name| match name {
            "sasl.enabled.mechanisms" => Some("OAUTHBEARER".into()),
            "listener.name.sasl.oauthbearer.sasl.jaas.config" => Some(
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;"
                    .into(),
            ),
            "listener.name.sasl.oauthbearer.sasl.server.callback.handler.class" => {
                Some(crate::sasl::oauthbearer::UNSECURED_VALIDATOR_CLASS.into())
            }
            _ => None,
        })
        .unwrap();
        let mut g = Authenticating::new(Arc::new(sasl));
        assert_eq!(
            answer(g.request(&handshake("OAUTHBEARER"), nonce)),
            (0, After::Continue)
        );
        // e30 is {}: no alg, so not an unsecured token
        let Gate::Answer { body, after } =
            g.request(&auth(b"n,,\x01auth=Bearer e30.e30.\x01\x01"), nonce)
        else {
            panic!()
        };
        let ResponseBody::SaslAuthenticate(r) = *body else {
            panic!()
        };
        assert_eq!((r.error_code, after), (0, After::Continue));
        assert_eq!(&r.auth_bytes[..], br#"{"status":"invalid_token"}"#);
        let Gate::Answer { body, after } = g.request(&auth(b"\x01"), nonce) else {
            panic!()
        };
        let ResponseBody::SaslAuthenticate(r) = *body else {
            panic!()
        };
        assert_eq!(r.error_code, ErrorCode::SaslAuthenticationFailed.code());
        assert_eq!(
            r.error_message.as_deref(),
            Some(r#"{"status":"invalid_token"}"#)
        );
        assert!(matches!(after, After::Failed { .. }));
    }
}
