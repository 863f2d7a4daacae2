//! librdkafka (rdkafka crate) with SASL/OAUTHBEARER on a SASL_PLAINTEXT
//! listener of a `weir serve` process:
//!
//! - unsecured tokens, librdkafka's own (`sasl.oauthbearer.config=
//!   principal=alice`), on a listener that names Kafka's unsecured
//!   validator;
//! - signed JWTs (ES256) handed to librdkafka by
//!   `ClientContext::generate_oauth_token`, checked against a JWKS file:
//!   a valid token produces and consumes; an expired one, one signed by
//!   another key and one for another audience are refused with an
//!   authentication error carrying RFC 7628's status, counted as failures,
//!   and the log never shows the token.

use std::error::Error;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use rdkafka::ClientConfig;
use rdkafka::client::{ClientContext, OAuthToken};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use serde_json::{Value, json};
use weir_compat_tests::WeirProcess;

const TIMEOUT: Duration = Duration::from_secs(30);
const JAAS: &str = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;";
const UNSECURED: &str = "org.apache.kafka.common.security.oauthbearer.internals.unsecured.OAuthBearerUnsecuredValidatorCallbackHandler";

fn start(settings: &[String]) -> WeirProcess {
    let args: Vec<String> = [
        "listeners=SASL_PLAINTEXT://127.0.0.1:0".to_string(),
        "sasl.enabled.mechanisms=OAUTHBEARER".to_string(),
        format!("listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config={JAAS}"),
        "http.listeners=127.0.0.1:0".to_string(),
    ]
    .iter()
    .chain(settings)
    .flat_map(|kv| ["--set".to_string(), kv.clone()])
    .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    WeirProcess::start_with_args(&args).unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

fn client(b: &WeirProcess) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", b.bootstrap())
        .set("security.protocol", "SASL_PLAINTEXT")
        .set("sasl.mechanism", "OAUTHBEARER");
    c
}

/// Hands librdkafka a fixed token and keeps the errors it reports.
#[derive(Clone)]
struct Token {
    token: Option<String>,
    errors: Arc<Mutex<Vec<String>>>,
}

impl Token {
    fn new(token: Option<String>) -> Token {
        Token {
            token,
            errors: Arc::default(),
        }
    }
}

impl ClientContext for Token {
    const ENABLE_REFRESH_OAUTH_TOKEN: bool = true;

    fn generate_oauth_token(&self, _config: Option<&str>) -> Result<OAuthToken, Box<dyn Error>> {
        let token = self.token.clone().ok_or("no token")?;
        Ok(OAuthToken {
            token,
            principal_name: "alice".into(),
            lifetime_ms: now_s() * 1000 + 600_000,
        })
    }

    fn error(&self, error: KafkaError, reason: &str) {
        self.errors
            .lock()
            .unwrap()
            .push(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for Token {}

/// librdkafka's own unsecured token, and its error log.
#[derive(Clone, Default)]
struct Errors(Arc<Mutex<Vec<String>>>);

impl ClientContext for Errors {
    fn error(&self, error: KafkaError, reason: &str) {
        self.0.lock().unwrap().push(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for Errors {}

fn now_s() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

async fn produce<C: ClientContext + 'static>(
    config: &ClientConfig,
    context: C,
    topic: &str,
    values: &[String],
) {
    let producer: FutureProducer<C> = config
        .clone()
        .set("acks", "all")
        .set("message.timeout.ms", "30000")
        .create_with_context(context)
        .expect("producer");
    for v in values {
        producer
            .send(
                FutureRecord::<(), _>::to(topic).payload(v).partition(0),
                TIMEOUT,
            )
            .await
            .unwrap_or_else(|(e, _)| panic!("produce over OAUTHBEARER: {e}"));
    }
}

fn consume<C: ConsumerContext + 'static>(
    config: &ClientConfig,
    context: C,
    topic: &str,
    n: usize,
) -> Vec<String> {
    let consumer: BaseConsumer<C> = config
        .clone()
        .set("group.id", format!("oauth-{topic}"))
        .set("enable.auto.commit", "false")
        .create_with_context(context)
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset(topic, 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    let mut got = Vec::new();
    while got.len() < n {
        assert!(Instant::now() < deadline, "consumed {} of {n}", got.len());
        // poll also hands librdkafka the token
        if let Some(m) = consumer.poll(Duration::from_millis(200)) {
            let m = m.expect("consume");
            got.push(String::from_utf8_lossy(m.payload().unwrap_or_default()).into_owned());
        }
    }
    got
}

fn failures(b: &WeirProcess) -> f64 {
    b.metric("weir_sasl_authentication_failures_total", &[])
        .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn rdkafka_unsecured_tokens_when_the_listener_names_the_validator() {
    let b = start(&[format!(
        "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class={UNSECURED}"
    )]);
    let mut c = client(&b);
    c.set("enable.sasl.oauthbearer.unsecure.jwt", "true")
        .set("sasl.oauthbearer.config", "principal=alice");
    let values: Vec<String> = (0..200).map(|i| format!("unsecured-{i}")).collect();
    produce(&c, Errors::default(), "oauth-unsecured", &values).await;
    assert_eq!(
        consume(&c, Errors::default(), "oauth-unsecured", values.len()),
        values
    );
    assert_eq!(failures(&b), 0.0);
    assert!(b.metric("weir_sasl_authentications_total", &[]).unwrap() >= 2.0);
}

/// An EC P-256 key, its JWKS with key id `kid`, and tokens it signs.
struct Issuer {
    kid: String,
    key: EncodingKey,
}

impl Issuer {
    fn new(kid: &str) -> Issuer {
        let pair = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        Issuer {
            kid: kid.to_string(),
            key: EncodingKey::from_ec_der(&pair.serialize_der()),
        }
    }

    fn jwks(&self) -> String {
        let mut jwk =
            serde_json::to_value(Jwk::from_encoding_key(&self.key, Algorithm::ES256).unwrap())
                .unwrap();
        jwk["kid"] = json!(self.kid);
        json!({ "keys": [jwk] }).to_string()
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        encode(&header, claims, &self.key).unwrap()
    }
}

/// A client whose token is refused: librdkafka reports an authentication
/// error with the broker's status, and no metadata is served.
fn assert_refused(b: &WeirProcess, token: &str, what: &str) {
    let before = failures(b);
    let context = Token::new(Some(token.to_string()));
    let consumer: BaseConsumer<Token> = client(b)
        .set("group.id", "oauth-refused")
        .create_with_context(context.clone())
        .expect("consumer");
    let mut tpl = TopicPartitionList::new();
    tpl.add_partition_offset("oauth-signed", 0, Offset::Beginning)
        .unwrap();
    consumer.assign(&tpl).unwrap();
    let deadline = Instant::now() + TIMEOUT;
    loop {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(100)) {
            panic!("{what}: served a record at offset {}", m.offset());
        }
        let seen = context.errors.lock().unwrap().clone();
        if seen.iter().any(|e| e.contains("invalid_token")) {
            assert!(
                seen.iter().any(|e| e.contains("uthentication")),
                "{what}: {seen:?}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: no authentication error, only {seen:?}"
        );
    }
    let deadline = Instant::now() + TIMEOUT;
    while failures(b) <= before {
        assert!(Instant::now() < deadline, "{what}: failure not counted");
        std::thread::yield_now();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rdkafka_signed_tokens_against_a_jwks_file() {
    let dir = tempfile::tempdir().unwrap();
    let jwks = dir.path().join("jwks.json");
    let issuer = Issuer::new("weir-test-1");
    std::fs::write(&jwks, issuer.jwks()).unwrap();
    let b = start(&[
        format!(
            "sasl.oauthbearer.jwks.endpoint.url=file://{}",
            jwks.display()
        ),
        "sasl.oauthbearer.expected.audience=weir".to_string(),
        "sasl.oauthbearer.expected.issuer=https://issuer.test".to_string(),
    ]);
    let now = now_s();
    let claims = |iat: i64, exp: i64| {
        json!({
            "sub": "alice", "iat": iat, "exp": exp,
            "aud": "weir", "iss": "https://issuer.test", "scope": "kafka"
        })
    };
    let good = issuer.sign(&claims(now - 5, now + 600));
    let values: Vec<String> = (0..200).map(|i| format!("signed-{i}")).collect();
    let c = client(&b);
    produce(&c, Token::new(Some(good.clone())), "oauth-signed", &values).await;
    assert_eq!(
        consume(
            &c,
            Token::new(Some(good.clone())),
            "oauth-signed",
            values.len()
        ),
        values
    );
    assert_eq!(failures(&b), 0.0);

    let expired = issuer.sign(&claims(now - 7200, now - 3600));
    assert_refused(&b, &expired, "an expired token");
    let forged = Issuer::new("weir-test-1").sign(&claims(now - 5, now + 600));
    assert_refused(&b, &forged, "a token signed by another key");
    let other_audience = issuer.sign(&json!({
        "sub": "alice", "iat": now, "exp": now + 600, "aud": "elsewhere",
        "iss": "https://issuer.test"
    }));
    assert_refused(&b, &other_audience, "a token for another audience");

    let log = b.stderr_tail();
    assert!(log.contains("SASL authentication failed"), "{log}");
    for token in [&good, &expired, &forged] {
        let signature = token.rsplit('.').next().unwrap();
        assert!(!log.contains(signature), "the log shows a token: {log}");
    }
}
