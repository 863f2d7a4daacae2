//! KIP-368 re-authentication (`connections.max.reauth.ms`) on a
//! SASL_PLAINTEXT listener, on a broker with a manual clock: the session
//! lifetime is announced in SaslAuthenticate; a re-authentication on the
//! same connection renews it and keeps serving; one as another user, or
//! with another mechanism, is refused and closes the connection; a request
//! after the session expired closes the connection; without the setting
//! there is no lifetime and a SaslHandshake after authentication is
//! ILLEGAL_SASL_STATE, as before.

use crate::common::*;

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

use bytes::Bytes;
use weir_broker::config::ConfigSources;
use weir_protocol::messages::{
    MetadataRequest, RequestBody, ResponseBody, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest,
};

const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
     user_alice=\"alice-secret\" user_bob=\"bob-secret\";";
const SASL_AUTHENTICATION_FAILED: i16 = 58;
const ILLEGAL_SASL_STATE: i16 = 34;

struct Broker {
    b: weir_broker::server::RunningBroker,
    now: Arc<AtomicI64>,
    _dir: tempfile::TempDir,
}

async fn start(reauth_ms: Option<&str>) -> Broker {
    let dir = tempfile::tempdir().unwrap();
    let mut s = ConfigSources::default();
    s.set("log.dirs", &dir.path().display().to_string());
    s.set("http.listeners", "");
    s.set("listeners", "SASL_PLAINTEXT://127.0.0.1:0");
    s.set("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256");
    s.set("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS);
    s.set(
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config",
        "org.apache.kafka.common.security.scram.ScramLoginModule required user_alice=\"x\";",
    );
    if let Some(ms) = reauth_ms {
        s.set("connections.max.reauth.ms", ms);
    }
    let now = Arc::new(AtomicI64::new(1_800_000_000_000));
    let clock = {
        let now = now.clone();
        Arc::new(move || now.load(Ordering::SeqCst))
    };
    let b = weir_broker::server::start_with_clock(s.build().unwrap(), clock)
        .await
        .unwrap();
    Broker { b, now, _dir: dir }
}

async fn handshake(c: &mut Client, mechanism: &str) -> i16 {
    match c
        .call(
            RequestBody::SaslHandshake(SaslHandshakeRequest {
                mechanism: mechanism.into(),
                ..Default::default()
            }),
            1,
        )
        .await
    {
        ResponseBody::SaslHandshake(h) => h.error_code,
        other => panic!("{other:?}"),
    }
}

/// SaslAuthenticate v2 with PLAIN's message for `user`.
async fn authenticate(c: &mut Client, user: &str) -> SaslAuthenticateResponse {
    let token = format!("\0{user}\0{user}-secret");
    match c
        .call(
            RequestBody::SaslAuthenticate(SaslAuthenticateRequest {
                auth_bytes: Bytes::from(token.into_bytes()),
                ..Default::default()
            }),
            2,
        )
        .await
    {
        ResponseBody::SaslAuthenticate(r) => r,
        other => panic!("{other:?}"),
    }
}

async fn login(b: &Broker, user: &str) -> (Client, SaslAuthenticateResponse) {
    let addr = b.b.listener_addr("SASL_PLAINTEXT").unwrap();
    let mut c = Client::connect(addr).await;
    assert_eq!(handshake(&mut c, "PLAIN").await, 0);
    let r = authenticate(&mut c, user).await;
    assert_eq!(r.error_code, 0, "{user} logs in: {:?}", r.error_message);
    (c, r)
}

async fn metadata_ok(c: &mut Client) {
    match c
        .call(RequestBody::Metadata(MetadataRequest::default()), 12)
        .await
    {
        ResponseBody::Metadata(m) => assert_eq!(m.brokers.len(), 1),
        other => panic!("{other:?}"),
    }
}

fn metric(
    b: &Broker,
    f: impl Fn(&weir_broker::metrics::BrokerMetrics) -> &std::sync::atomic::AtomicU64,
) -> u64 {
    f(&b.b.broker.metrics).load(Ordering::SeqCst)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_renewed_on_the_same_connection_and_expires_without() {
    let b = start(Some("60000")).await;
    let (mut c, r) = login(&b, "alice").await;
    assert_eq!(r.session_lifetime_ms, 60_000);
    metadata_ok(&mut c).await;

    // 50 s later: re-authenticate, same user, same connection
    b.now.fetch_add(50_000, Ordering::SeqCst);
    assert_eq!(handshake(&mut c, "PLAIN").await, 0);
    // the session is still served while it re-authenticates
    metadata_ok(&mut c).await;
    let r = authenticate(&mut c, "alice").await;
    assert_eq!(
        (r.error_code, r.session_lifetime_ms),
        (0, 60_000),
        "{:?}",
        r.error_message
    );
    assert_eq!(metric(&b, |m| &m.sasl_reauthentications), 1);
    // past the first session's end, within the renewed one
    b.now.fetch_add(30_000, Ordering::SeqCst);
    metadata_ok(&mut c).await;

    // past the renewed session's end: the next request closes the connection
    b.now.fetch_add(31_000, Ordering::SeqCst);
    c.send_only(RequestBody::Metadata(MetadataRequest::default()), 12)
        .await;
    assert!(c.is_closed().await, "an expired session is closed");
    assert_eq!(metric(&b, |m| &m.sasl_sessions_expired), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reauthentication_may_change_neither_principal_nor_mechanism() {
    let b = start(Some("60000")).await;
    let (mut c, _) = login(&b, "alice").await;
    assert_eq!(handshake(&mut c, "PLAIN").await, 0);
    let r = authenticate(&mut c, "bob").await;
    assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
    assert!(
        r.error_message
            .as_deref()
            .is_some_and(|m| m.contains("cannot change the principal")),
        "{:?}",
        r.error_message
    );
    assert!(c.is_closed().await);

    let (mut c, _) = login(&b, "alice").await;
    assert_eq!(handshake(&mut c, "SCRAM-SHA-256").await, ILLEGAL_SASL_STATE);
    assert!(c.is_closed().await);
    assert_eq!(metric(&b, |m| &m.sasl_reauthentications), 0);
    assert_eq!(metric(&b, |m| &m.sasl_authentication_failures), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_max_reauth_a_session_lasts_and_a_second_handshake_is_refused() {
    let b = start(None).await;
    let (mut c, r) = login(&b, "alice").await;
    assert_eq!(r.session_lifetime_ms, 0);
    b.now.fetch_add(365 * 24 * 3600 * 1000, Ordering::SeqCst);
    metadata_ok(&mut c).await;
    assert_eq!(handshake(&mut c, "PLAIN").await, ILLEGAL_SASL_STATE);
    metadata_ok(&mut c).await;
}

/// Kafka's `connection.failed.authentication.delay.ms` (100 ms here), and
/// weir's doubling per further failure from the same address: three wrong
/// passwords in a row are answered no sooner than 100, 200 and 400 ms
/// after they were sent, then the connection is closed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_authentications_from_one_address_are_answered_ever_later() {
    let b = start(None).await;
    let addr = b.b.listener_addr("SASL_PLAINTEXT").unwrap();
    for at_least_ms in [100, 200, 400] {
        let mut c = Client::connect(addr).await;
        assert_eq!(handshake(&mut c, "PLAIN").await, 0);
        let sent = std::time::Instant::now();
        let r = match c
            .call(
                RequestBody::SaslAuthenticate(SaslAuthenticateRequest {
                    auth_bytes: Bytes::from_static(b"\0alice\0guess"),
                    ..Default::default()
                }),
                2,
            )
            .await
        {
            ResponseBody::SaslAuthenticate(r) => r,
            other => panic!("{other:?}"),
        };
        let waited = sent.elapsed();
        assert_eq!(r.error_code, SASL_AUTHENTICATION_FAILED);
        assert!(
            waited >= std::time::Duration::from_millis(at_least_ms),
            "answered after {waited:?}, expected at least {at_least_ms} ms"
        );
        assert!(c.is_closed().await);
    }
    assert_eq!(metric(&b, |m| &m.sasl_authentication_failures), 3);
}
