//! docs/security.md's walkthrough, step by step, with the same files and
//! commands: a broker with one SASL_SSL listener (SCRAM-SHA-512) and the
//! ACL authorizer; the super user `admin` (a static JAAS user) creates the
//! user `alice`, a topic and her ACLs with the CLI; alice then produces and
//! consumes, and is refused what her ACLs do not grant. Only the
//! certificates (made here by the test's CA instead of openssl) and the
//! port (0: any free one) differ from the document.

use crate::common;

use std::path::Path;

use common::{Broker, Output};
use weir_test_support::pki::TestPki;

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write file");
    path.display().to_string()
}

fn ok(what: &str, out: Output) -> String {
    assert_eq!(out.code, 0, "{what}: {}{}", out.stdout, out.stderr);
    out.stdout
}

fn refused(what: &str, out: Output, code: &str) {
    assert_eq!(out.code, 1, "{what} should be refused: {}", out.stdout);
    assert!(out.stderr.contains(code), "{what}: {}", out.stderr);
}

#[test]
fn sasl_ssl_and_acls_from_scratch() {
    let files = tempfile::tempdir().expect("tempdir");
    let dir = files.path();
    let pki = TestPki::new();
    let keystore = write(
        dir,
        "broker.pem",
        &pki.server("weir-broker-1", 1).keystore_pem(),
    );
    let ca = write(dir, "ca.pem", pki.ca_pem());

    // Step 1: server.properties
    let server = write(
        dir,
        "server.properties",
        &format!(
            "listeners=SASL_SSL://127.0.0.1:0\n\
             ssl.keystore.location={keystore}\n\
             sasl.enabled.mechanisms=SCRAM-SHA-512\n\
             listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=\\\n\
             \x20 org.apache.kafka.common.security.scram.ScramLoginModule required \\\n\
             \x20 user_admin=\"admin-secret\";\n\
             authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer\n\
             super.users=User:admin\n"
        ),
    );
    let b = Broker::start_in(None, &["--config", &server]);

    // Step 2: the administrator's client properties
    let admin = write(
        dir,
        "admin.properties",
        &format!(
            "security.protocol=SASL_SSL\n\
             sasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n\
             \x20 username=\"admin\" password=\"admin-secret\";\n\
             ssl.truststore.location={ca}\n"
        ),
    );
    let as_admin = |args: &[&str]| b.run(&[args, &["--command-config", &admin]].concat());

    // Step 3: the user alice, a topic, her ACLs
    ok(
        "users scram set",
        b.run_stdin(
            &[
                "users",
                "scram",
                "set",
                "--user",
                "alice",
                "--mechanism",
                "SCRAM-SHA-512",
                "--password-stdin",
                "--command-config",
                &admin,
            ],
            "alice-secret\n",
        ),
    );
    ok(
        "topics create",
        as_admin(&["topics", "create", "--topic", "orders", "--partitions", "3"]),
    );
    ok(
        "acls add producer",
        as_admin(&[
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--producer",
            "--topic",
            "orders",
        ]),
    );
    ok(
        "acls add consumer",
        as_admin(&[
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--consumer",
            "--topic",
            "orders",
            "--group",
            "billing",
        ]),
    );
    let listed = ok(
        "acls list",
        as_admin(&["acls", "list", "--topic", "orders"]),
    );
    for op in ["READ", "WRITE", "CREATE", "DESCRIBE"] {
        assert!(
            listed.contains(&format!(
                "(principal=User:alice, host=*, operation={op}, permissionType=ALLOW)"
            )),
            "{listed}"
        );
    }

    // Step 4: alice's client properties; what she may and may not do
    let alice = write(
        dir,
        "alice.properties",
        &format!(
            "security.protocol=SASL_SSL\n\
             sasl.mechanism=SCRAM-SHA-512\n\
             sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n\
             \x20 username=\"alice\" password=\"alice-secret\";\n\
             ssl.truststore.location={ca}\n"
        ),
    );
    let as_alice = |args: &[&str]| b.run(&[args, &["--command-config", &alice]].concat());
    ok(
        "alice produces",
        b.run_stdin(
            &["produce", "--topic", "orders", "--command-config", &alice],
            "first\nsecond\n",
        ),
    );
    let consumed = ok(
        "alice consumes",
        as_alice(&[
            "consume",
            "--topic",
            "orders",
            "--group",
            "billing",
            "--from-beginning",
            "--max-messages",
            "2",
        ]),
    );
    let mut lines: Vec<&str> = consumed.lines().collect();
    lines.sort_unstable();
    assert_eq!(lines, ["first", "second"]);
    refused(
        "alice deletes the topic",
        as_alice(&["topics", "delete", "--topic", "orders"]),
        "TOPIC_AUTHORIZATION_FAILED",
    );
    refused(
        "alice creates a topic",
        as_alice(&["topics", "create", "--topic", "mine"]),
        "TOPIC_AUTHORIZATION_FAILED",
    );
    refused(
        "alice consumes in another group",
        as_alice(&[
            "consume",
            "--topic",
            "orders",
            "--group",
            "audit",
            "--from-beginning",
            "--max-messages",
            "1",
        ]),
        "GROUP_AUTHORIZATION_FAILED",
    );
    refused(
        "alice adds an ACL",
        as_alice(&[
            "acls",
            "add",
            "--allow-principal",
            "User:alice",
            "--operation",
            "All",
            "--topic",
            "*",
        ]),
        "CLUSTER_AUTHORIZATION_FAILED",
    );
    // A wrong password is refused before anything is served.
    let wrong = write(
        dir,
        "wrong.properties",
        &format!(
            "security.protocol=SASL_SSL\nsasl.mechanism=SCRAM-SHA-512\n\
             sasl.username=alice\nsasl.password=guess\nssl.truststore.location={ca}\n"
        ),
    );
    refused(
        "a wrong password",
        b.run(&["topics", "list", "--command-config", &wrong]),
        "uthentication failed",
    );
}
