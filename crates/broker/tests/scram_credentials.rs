//! SCRAM credentials set at run time, over the wire: AlterUserScramCredentials
//! on the PLAINTEXT listener, then a SCRAM login on the SASL_PLAINTEXT
//! listener of the same broker with the new credential; deleted, the login
//! fails; a restarted broker still has them (`weir-scram-credentials.json`);
//! they take precedence over a listener's static JAAS users; Kafka's error
//! codes; a cluster member forwards changes and logs in with what its
//! image holds.

use std::net::SocketAddr;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256, Sha512};
use weir_broker::{ConfigSources, RunningBroker, start};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_user_scram_credentials_request::{
    ScramCredentialDeletion, ScramCredentialUpsertion,
};
use weir_protocol::messages::describe_user_scram_credentials_request::UserName;
use weir_protocol::messages::{
    AlterUserScramCredentialsRequest, DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse, RequestBody, ResponseBody, SaslAuthenticateRequest,
    SaslHandshakeRequest,
};

use crate::common::Client;

const SHA256: i8 = 1;
const SHA512: i8 = 2;

async fn start_sasl(dir: &Path) -> RunningBroker {
    let mut s = ConfigSources::default();
    s.set("log.dirs", &dir.display().to_string());
    s.set("http.listeners", "");
    s.set(
        "listeners",
        "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
    );
    s.set("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512");
    s.set(
        "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config",
        "org.apache.kafka.common.security.scram.ScramLoginModule required \
         user_carol=\"static-secret\";",
    );
    start(s.build().unwrap()).await.unwrap()
}

fn addr(b: &RunningBroker, listener: &str) -> SocketAddr {
    b.listener_addrs
        .iter()
        .find(|(n, _)| n == listener)
        .map(|(_, a)| *a)
        .unwrap()
}

fn hmac(m: i8, key: &[u8], data: &[u8]) -> Vec<u8> {
    if m == SHA256 {
        let mut h = <Hmac<Sha256> as KeyInit>::new_from_slice(key).unwrap();
        h.update(data);
        h.finalize().into_bytes().to_vec()
    } else {
        let mut h = <Hmac<Sha512> as KeyInit>::new_from_slice(key).unwrap();
        h.update(data);
        h.finalize().into_bytes().to_vec()
    }
}

fn salted(m: i8, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
    if m == SHA256 {
        let mut out = vec![0u8; 32];
        pbkdf2::pbkdf2_hmac::<Sha256>(password.as_bytes(), salt, iterations, &mut out);
        out
    } else {
        let mut out = vec![0u8; 64];
        pbkdf2::pbkdf2_hmac::<Sha512>(password.as_bytes(), salt, iterations, &mut out);
        out
    }
}

fn upsert(user: &str, m: i8, password: &str, iterations: i32) -> ScramCredentialUpsertion {
    let salt: [u8; 32] = rand::random();
    ScramCredentialUpsertion {
        name: user.into(),
        mechanism: m,
        iterations,
        salt: salt.to_vec().into(),
        salted_password: salted(m, password, &salt, iterations.clamp(1, 20_000) as u32).into(),
        ..Default::default()
    }
}

fn delete(user: &str, m: i8) -> ScramCredentialDeletion {
    ScramCredentialDeletion {
        name: user.into(),
        mechanism: m,
        ..Default::default()
    }
}

/// Alters on `b`'s PLAINTEXT listener; the result codes by user, sorted.
async fn alter(
    b: &RunningBroker,
    deletions: Vec<ScramCredentialDeletion>,
    upsertions: Vec<ScramCredentialUpsertion>,
) -> Vec<(String, i16, Option<String>)> {
    let mut c = Client::connect(addr(b, "PLAINTEXT")).await;
    let req = AlterUserScramCredentialsRequest {
        deletions,
        upsertions,
        ..Default::default()
    };
    let ResponseBody::AlterUserScramCredentials(r) =
        c.call(RequestBody::AlterUserScramCredentials(req), 0).await
    else {
        panic!("not an AlterUserScramCredentials response")
    };
    let mut out: Vec<_> = r
        .results
        .into_iter()
        .map(|r| (r.user, r.error_code, r.error_message))
        .collect();
    out.sort();
    out
}

async fn describe(
    b: &RunningBroker,
    users: Option<&[&str]>,
) -> DescribeUserScramCredentialsResponse {
    let mut c = Client::connect(addr(b, "PLAINTEXT")).await;
    let req = DescribeUserScramCredentialsRequest {
        users: users.map(|us| {
            us.iter()
                .map(|u| UserName {
                    name: u.to_string(),
                    ..Default::default()
                })
                .collect()
        }),
        ..Default::default()
    };
    let ResponseBody::DescribeUserScramCredentials(r) = c
        .call(RequestBody::DescribeUserScramCredentials(req), 0)
        .await
    else {
        panic!("not a DescribeUserScramCredentials response")
    };
    r
}

/// A whole SCRAM exchange (RFC 5802) on a new connection to the SASL
/// listener: whether the broker accepted `password` (and proved it holds
/// the credential with its server signature).
async fn login(b: &RunningBroker, m: i8, user: &str, password: &str) -> bool {
    let mut c = Client::connect(addr(b, "SASL_PLAINTEXT")).await;
    let mechanism = if m == SHA256 {
        "SCRAM-SHA-256"
    } else {
        "SCRAM-SHA-512"
    };
    let ResponseBody::SaslHandshake(h) = c
        .call(
            RequestBody::SaslHandshake(SaslHandshakeRequest {
                mechanism: mechanism.into(),
                ..Default::default()
            }),
            1,
        )
        .await
    else {
        panic!("not a SaslHandshake response")
    };
    assert_eq!(h.error_code, 0);
    let client_nonce = "fyko+d2lbbFgONRv9qkxdawL";
    let first_bare = format!("n={user},r={client_nonce}");
    let server_first = match authenticate(&mut c, format!("n,,{first_bare}").into_bytes()).await {
        Ok(r) => String::from_utf8(r).unwrap(),
        Err(_) => return false,
    };
    let mut nonce = "";
    let mut salt = Vec::new();
    let mut iterations = 0u32;
    for attr in server_first.split(',') {
        if let Some(v) = attr.strip_prefix("r=") {
            nonce = v;
        } else if let Some(v) = attr.strip_prefix("s=") {
            salt = B64.decode(v).unwrap();
        } else if let Some(v) = attr.strip_prefix("i=") {
            iterations = v.parse().unwrap();
        }
    }
    assert!(nonce.starts_with(client_nonce), "{server_first}");
    let salted = salted(m, password, &salt, iterations);
    let client_key = hmac(m, &salted, b"Client Key");
    let stored_key = if m == SHA256 {
        Sha256::digest(&client_key).to_vec()
    } else {
        Sha512::digest(&client_key).to_vec()
    };
    let without_proof = format!("c=biws,r={nonce}");
    let auth_message = format!("{first_bare},{server_first},{without_proof}");
    let signature = hmac(m, &stored_key, auth_message.as_bytes());
    let proof: Vec<u8> = client_key
        .iter()
        .zip(&signature)
        .map(|(a, b)| a ^ b)
        .collect();
    let last = format!("{without_proof},p={}", B64.encode(proof));
    match authenticate(&mut c, last.into_bytes()).await {
        Ok(server_final) => {
            let server_key = hmac(m, &salted, b"Server Key");
            let want = hmac(m, &server_key, auth_message.as_bytes());
            assert_eq!(
                String::from_utf8(server_final).unwrap(),
                format!("v={}", B64.encode(want))
            );
            true
        }
        Err(_) => false,
    }
}

async fn authenticate(c: &mut Client, bytes: Vec<u8>) -> Result<Vec<u8>, String> {
    let ResponseBody::SaslAuthenticate(r) = c
        .call(
            RequestBody::SaslAuthenticate(SaslAuthenticateRequest {
                auth_bytes: bytes.into(),
                ..Default::default()
            }),
            2,
        )
        .await
    else {
        panic!("not a SaslAuthenticate response")
    };
    match r.error_code {
        0 => Ok(r.auth_bytes.to_vec()),
        58 => Err(r.error_message.unwrap_or_default()),
        other => panic!("SaslAuthenticate error {other}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_credential_logs_in_deleted_one_does_not_and_both_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_sasl(dir.path()).await;
    assert!(
        !login(&b, SHA512, "alice", "alice-pw").await,
        "no credential yet"
    );
    assert_eq!(
        alter(&b, vec![], vec![upsert("alice", SHA512, "alice-pw", 8192)]).await,
        [("alice".to_string(), 0, None)]
    );
    // the next login uses it, without a restart
    assert!(login(&b, SHA512, "alice", "alice-pw").await);
    assert!(!login(&b, SHA512, "alice", "wrong").await);
    assert!(
        !login(&b, SHA256, "alice", "alice-pw").await,
        "set for SHA-512 only"
    );
    let d = describe(&b, Some(&["alice"])).await;
    assert_eq!(d.results[0].error_code, 0);
    let infos: Vec<(i8, i32)> = d.results[0]
        .credential_infos
        .iter()
        .map(|c| (c.mechanism, c.iterations))
        .collect();
    assert_eq!(infos, [(SHA512, 8192)]);
    b.shutdown().await.unwrap();

    // durable: a restarted broker knows alice
    let b = start_sasl(dir.path()).await;
    assert!(
        login(&b, SHA512, "alice", "alice-pw").await,
        "the credential did not survive a restart"
    );
    assert_eq!(
        alter(&b, vec![delete("alice", SHA512)], vec![]).await,
        [("alice".to_string(), 0, None)]
    );
    assert!(!login(&b, SHA512, "alice", "alice-pw").await, "deleted");
    b.shutdown().await.unwrap();

    let b = start_sasl(dir.path()).await;
    assert!(
        !login(&b, SHA512, "alice", "alice-pw").await,
        "deleted before the restart"
    );
    assert!(describe(&b, None).await.results.is_empty());
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_set_at_run_time_wins_over_the_static_jaas_user() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_sasl(dir.path()).await;
    assert!(login(&b, SHA256, "carol", "static-secret").await);
    // static users are configuration, not listed
    let d = describe(&b, Some(&["carol"])).await;
    assert_eq!(d.results[0].error_code, ErrorCode::ResourceNotFound.code());
    assert_eq!(
        alter(
            &b,
            vec![],
            vec![upsert("carol", SHA256, "new-secret", 4096)]
        )
        .await,
        [("carol".to_string(), 0, None)]
    );
    assert!(login(&b, SHA256, "carol", "new-secret").await);
    assert!(!login(&b, SHA256, "carol", "static-secret").await);
    // deleted: the static user is back
    assert_eq!(
        alter(&b, vec![delete("carol", SHA256)], vec![]).await,
        [("carol".to_string(), 0, None)]
    );
    assert!(login(&b, SHA256, "carol", "static-secret").await);
    // the static user cannot be deleted: it is not a stored credential
    assert_eq!(
        alter(&b, vec![delete("carol", SHA256)], vec![]).await[0].1,
        ErrorCode::ResourceNotFound.code()
    );
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kafkas_error_codes_over_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let b = start_sasl(dir.path()).await;
    let got = alter(
        &b,
        vec![delete("nobody", SHA256)],
        vec![
            upsert("few", SHA256, "p", 4095),
            upsert("many", SHA512, "p", 16385),
            upsert("", SHA256, "p", 4096),
            upsert("mech", 0, "p", 4096),
            // a user twice, even for two mechanisms: refused whole
            upsert("dup", SHA512, "p", 4096),
            upsert("dup", SHA256, "p", 4096),
            upsert("ok", SHA256, "p", 4096),
        ],
    )
    .await;
    let codes: Vec<(&str, i16)> = got.iter().map(|(u, c, _)| (u.as_str(), *c)).collect();
    assert_eq!(
        codes,
        [
            ("", ErrorCode::UnacceptableCredential.code()),
            ("dup", ErrorCode::DuplicateResource.code()),
            ("few", ErrorCode::UnacceptableCredential.code()),
            ("many", ErrorCode::UnacceptableCredential.code()),
            ("mech", ErrorCode::UnsupportedSaslMechanism.code()),
            ("nobody", ErrorCode::ResourceNotFound.code()),
            ("ok", 0),
        ]
    );
    assert_eq!(got[2].2.as_deref(), Some("Too few iterations"));
    let d = describe(&b, Some(&["ok", "ghost", "ok"])).await;
    let codes: Vec<(&str, i16)> = d
        .results
        .iter()
        .map(|r| (r.user.as_str(), r.error_code))
        .collect();
    assert_eq!(
        codes,
        [
            ("ok", ErrorCode::DuplicateResource.code()),
            ("ghost", ErrorCode::ResourceNotFound.code())
        ]
    );
    let all = describe(&b, None).await;
    assert_eq!(all.error_code, 0);
    assert_eq!(all.results.len(), 1);
    assert_eq!(all.results[0].user, "ok");
    b.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_credentials_file_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("weir-scram-credentials.json"),
        b"{\"version\": 1, \"users\": [",
    )
    .unwrap();
    let mut s = ConfigSources::default();
    s.set("log.dirs", &dir.path().display().to_string());
    s.set("http.listeners", "");
    s.set("listeners", "PLAINTEXT://127.0.0.1:0");
    let e = match start(s.build().unwrap()).await {
        Ok(_) => panic!("started over a corrupt credentials file"),
        Err(e) => e.to_string(),
    };
    assert!(
        e.contains("corrupt SCRAM credentials file") && e.contains("weir-scram-credentials.json"),
        "{e}"
    );
}

/// A cluster member's security admin standing in for the controller and
/// the metadata image: it decides with the shared models and hands the
/// result to the broker's stores, as `weir serve` does once the image
/// holds the change.
pub(crate) struct ImageAdmin {
    pub scram: std::sync::Arc<weir_broker::scram_credentials::ScramStore>,
    pub quotas: std::sync::Arc<weir_broker::quotas::QuotaStore>,
    /// How many requests were forwarded.
    pub forwarded: std::sync::atomic::AtomicUsize,
}

impl weir_broker::security_admin::SecurityAdmin for ImageAdmin {
    fn create_acls(
        &self,
        _: weir_protocol::messages::CreateAclsRequest,
    ) -> weir_broker::security_admin::SecurityFuture<weir_protocol::messages::CreateAclsResponse>
    {
        Box::pin(async { Default::default() })
    }

    fn delete_acls(
        &self,
        _: weir_protocol::messages::DeleteAclsRequest,
    ) -> weir_broker::security_admin::SecurityFuture<weir_protocol::messages::DeleteAclsResponse>
    {
        Box::pin(async { Default::default() })
    }

    fn alter_user_scram_credentials(
        &self,
        req: AlterUserScramCredentialsRequest,
    ) -> weir_broker::security_admin::SecurityFuture<
        weir_protocol::messages::AlterUserScramCredentialsResponse,
    > {
        use weir_metadata::scram;
        self.forwarded
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (deletions, upsertions) = scram::request_changes(&req);
        let plan = self.scram.snapshot().plan_alter(&deletions, &upsertions);
        self.scram.replace(plan.next);
        let results = scram::alter_results(plan.results);
        Box::pin(async move {
            weir_protocol::messages::AlterUserScramCredentialsResponse {
                results,
                ..Default::default()
            }
        })
    }

    fn alter_client_quotas(
        &self,
        req: weir_protocol::messages::AlterClientQuotasRequest,
    ) -> weir_broker::security_admin::SecurityFuture<
        weir_protocol::messages::AlterClientQuotasResponse,
    > {
        use weir_metadata::client_quotas;
        self.forwarded
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let plan = self
            .quotas
            .snapshot()
            .quotas
            .plan_alter(&client_quotas::request_alterations(&req));
        if !req.validate_only {
            self.quotas.replace(plan.next);
        }
        let response = client_quotas::alter_response(req, plan.results);
        Box::pin(async move { response })
    }
}

/// A broker configured as a cluster member (its controller address is only
/// configuration: this process starts no quorum) with an [`ImageAdmin`].
pub(crate) async fn start_member(dir: &Path) -> (RunningBroker, std::sync::Arc<ImageAdmin>) {
    // a port just freed keeps the controller address from naming a live one
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut s = ConfigSources::default();
    s.set(
        "listeners",
        &format!(
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}"
        ),
    );
    s.set("sasl.enabled.mechanisms", "SCRAM-SHA-256,SCRAM-SHA-512");
    s.set("controller.listener.names", "CONTROLLER");
    s.set("process.roles", "broker,controller");
    s.set("node.id", "1");
    s.set(
        "controller.quorum.voters",
        &format!("1@127.0.0.1:{port},2@127.0.0.1:{}", port.wrapping_add(1)),
    );
    s.set("log.dirs", &dir.display().to_string());
    s.set("http.listeners", "");
    let config = s.build().unwrap();
    assert!(config.is_cluster());
    let b = start(config).await.unwrap();
    let admin = std::sync::Arc::new(ImageAdmin {
        scram: b.broker.scram.clone(),
        quotas: b.broker.quotas.clone(),
        forwarded: Default::default(),
    });
    b.broker.set_security_admin(admin.clone());
    (b, admin)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cluster_member_forwards_changes_and_logs_in_from_its_image() {
    let dir = tempfile::tempdir().unwrap();
    let (b, admin) = start_member(dir.path()).await;
    // Nothing before the image has credentials.
    let d = describe(&b, None).await;
    assert_eq!(d.error_code, 0);
    assert!(d.results.is_empty());
    let got = alter(
        &b,
        vec![delete("a", SHA256)],
        vec![upsert("b", SHA512, "secret", 4096)],
    )
    .await;
    assert_eq!(
        admin.forwarded.load(std::sync::atomic::Ordering::Relaxed),
        1
    );
    let codes: Vec<(&str, i16)> = got.iter().map(|(u, c, _)| (u.as_str(), *c)).collect();
    assert_eq!(codes, [("a", ErrorCode::ResourceNotFound.code()), ("b", 0)]);
    // No file: a cluster member's credentials live in the metadata log.
    assert!(!dir.path().join("weir-scram-credentials.json").exists());
    let d = describe(&b, Some(&["b"])).await;
    assert_eq!(d.results[0].error_code, 0);
    assert_eq!(d.results[0].credential_infos[0].mechanism, SHA512);
    assert!(login(&b, SHA512, "b", "secret").await);
    assert!(!login(&b, SHA512, "b", "wrong").await);
    b.shutdown().await.unwrap();
}
