use weir_protocol::codec::{DecodeError, EncodeError};
use weir_protocol::error_code::ErrorCode;

use crate::security::SecurityError;

/// Errors of the client.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot connect to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("i/o error talking to {addr}: {source}")]
    Io {
        addr: String,
        source: std::io::Error,
    },
    #[error("timed out waiting for {what} from {addr}")]
    Timeout { addr: String, what: &'static str },
    #[error("broker {addr} does not support {api} (client supports versions {min}-{max})")]
    UnsupportedApi {
        addr: String,
        api: &'static str,
        min: i16,
        max: i16,
    },
    #[error("could not encode request: {0}")]
    Encode(#[from] EncodeError),
    #[error("could not decode response from {addr}: {source}")]
    Decode { addr: String, source: DecodeError },
    #[error(
        "response frame of {size} bytes from {addr} exceeds the limit of {limit} (is it a Kafka listener?)"
    )]
    FrameTooLarge {
        addr: String,
        size: usize,
        limit: usize,
    },
    #[error("response correlation id {got} does not match request {expected}")]
    CorrelationMismatch { expected: i32, got: i32 },
    #[error("{context}: {code}{}", message.as_deref().map(|m| format!(" ({m})")).unwrap_or_default())]
    Broker {
        context: String,
        code: ErrorCode,
        message: Option<String>,
    },
    #[error("unknown topic {0}")]
    UnknownTopic(String),
    /// A producer asked the broker to create a missing topic and it did not.
    #[error(
        "unknown topic {0} and the broker does not auto-create topics (auto.create.topics.enable=false)"
    )]
    AutoCreateDisabled(String),
    /// A topic to produce to did not become usable in time.
    #[error("topic {topic} is not ready for producing after {waited_ms} ms: {reason}")]
    TopicNotReady {
        topic: String,
        waited_ms: u64,
        reason: String,
    },
    #[error("partition {topic}-{partition} has no leader")]
    NoLeader { topic: String, partition: i32 },
    #[error("invalid records from broker: {0}")]
    Records(String),
    /// A security setting or store that cannot be used.
    #[error(transparent)]
    Security(#[from] SecurityError),
    /// The TLS handshake failed (the broker's certificate was not
    /// trusted, or the broker refused the client's).
    #[error("TLS handshake with {addr} failed: {reason}")]
    Tls { addr: String, reason: String },
    /// A PLAINTEXT or SASL_PLAINTEXT client got a TLS record back.
    #[error(
        "{addr} answered with TLS: it is an SSL or SASL_SSL listener (set security.protocol to match)"
    )]
    TlsExpected { addr: String },
    /// The broker does not offer the configured SASL mechanism.
    #[error("{addr} does not offer SASL mechanism {mechanism} (it offers: {})", enabled.join(", "))]
    SaslMechanism {
        addr: String,
        mechanism: &'static str,
        enabled: Vec<String>,
    },
    /// The broker refused the credentials, or (SCRAM) failed to prove it
    /// knows them.
    #[error("SASL authentication with {mechanism} at {addr} failed: {message}")]
    Authentication {
        addr: String,
        mechanism: &'static str,
        message: String,
    },
}

impl ClientError {
    /// Turns a non-zero Kafka error code into an error.
    pub fn check(
        code: i16,
        context: impl FnOnce() -> String,
        message: Option<String>,
    ) -> Result<(), ClientError> {
        if code == 0 {
            return Ok(());
        }
        Err(ClientError::Broker {
            context: context(),
            code: ErrorCode::from_code_lossy(code),
            message,
        })
    }
}
