//! kafka-python against a `weir serve` with Kafka's StandardAuthorizer on a
//! SASL_PLAINTEXT listener: a produce without WRITE raises
//! TopicAuthorizationFailedError and passes after the super user's
//! `create_acls`; a consumer group without READ raises
//! GroupAuthorizationFailedError (`tests/compat/python/acl_check.py`).

use weir_compat_tests::{WeirProcess, run_python_check};

const PLAIN_JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
     user_admin=\"admin-secret\" user_alice=\"alice-secret\";";

#[test]
fn kafka_python_is_refused_without_acls_and_served_with_them() {
    let args: Vec<String> = [
        "listeners=SASL_PLAINTEXT://127.0.0.1:0".to_string(),
        "sasl.enabled.mechanisms=PLAIN".to_string(),
        format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={PLAIN_JAAS}"),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".to_string(),
        "super.users=User:admin".to_string(),
    ]
    .into_iter()
    .flat_map(|kv| ["--set".to_string(), kv])
    .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let b =
        WeirProcess::start_with_args(&args).unwrap_or_else(|e| panic!("weir did not start: {e}"));
    run_python_check(&b, "acl_check.py");
}
