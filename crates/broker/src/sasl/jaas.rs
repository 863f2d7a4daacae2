//! Kafka's JAAS configuration text, as given in `sasl.jaas.config`:
//!
//! ```text
//! org.apache.kafka.common.security.plain.PlainLoginModule required
//!     user_admin="admin-secret" user_alice="alice-secret";
//! ```
//!
//! One login module: its class name, a control flag (`required`,
//! `requisite`, `sufficient` or `optional`), options `key=value` (the value
//! quoted with `"` or a bare word) and a closing `;`. A broker listener's
//! mechanism takes exactly one module, as in Kafka. The parser is the
//! client's (`weir_client::jaas`), which reads the same text from a
//! client's `sasl.jaas.config` (and is tested there).

pub use weir_client::jaas::{JaasError, JaasModule, parse};
