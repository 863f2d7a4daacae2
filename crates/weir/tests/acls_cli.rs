//! `weir acls add/list/remove` against a real `weir serve` with the ACL
//! authorizer on a SASL_PLAINTEXT listener: the super user manages ACLs;
//! a user without DESCRIBE on the cluster cannot list them until an ACL
//! grants it, and cannot add any (ALTER); ACLs survive a restart of the
//! broker; without an authorizer the commands say so.

use crate::common;

use common::{Broker, Output};

const JAAS: &str = "org.apache.kafka.common.security.plain.PlainLoginModule required \
     user_admin=\"admin-secret\" user_alice=\"alice-secret\";";

fn start(data: Option<&std::path::Path>) -> Broker {
    let pairs = [
        "listeners=SASL_PLAINTEXT://127.0.0.1:0".to_string(),
        "sasl.enabled.mechanisms=PLAIN".to_string(),
        format!("listener.name.sasl_plaintext.plain.sasl.jaas.config={JAAS}"),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".to_string(),
        "super.users=User:admin".to_string(),
    ];
    let args: Vec<String> = pairs
        .iter()
        .flat_map(|kv| ["--set".to_string(), kv.clone()])
        .collect();
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Broker::start_in(data, &args)
}

/// A client properties file for `user` in `dir`.
fn config(dir: &std::path::Path, user: &str) -> String {
    let path = dir.join(format!("{user}.properties"));
    std::fs::write(
        &path,
        format!(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n\
             sasl.username={user}\nsasl.password={user}-secret\n"
        ),
    )
    .expect("write properties");
    path.display().to_string()
}

fn as_user(b: &Broker, cfg: &str, args: &[&str]) -> Output {
    b.run(&[args, &["--command-config", cfg]].concat())
}

fn ok(what: &str, out: Output) -> String {
    assert_eq!(out.code, 0, "{what}: {}{}", out.stdout, out.stderr);
    out.stdout
}

#[test]
fn acls_are_added_listed_enforced_and_removed() {
    let keep = tempfile::tempdir().expect("tempdir");
    let data = keep.path().join("data");
    let admin;
    let alice;
    {
        let b = start(Some(&data));
        admin = config(keep.path(), "admin");
        alice = config(keep.path(), "alice");

        // alice may neither list nor add ACLs: she has no ACL on the cluster
        let out = as_user(&b, &alice, &["acls", "list"]);
        assert_eq!(out.code, 1, "{}", out.stdout);
        assert!(
            out.stderr.contains("CLUSTER_AUTHORIZATION_FAILED"),
            "{}",
            out.stderr
        );
        let out = as_user(
            &b,
            &alice,
            &[
                "acls",
                "add",
                "--allow-principal",
                "User:alice",
                "--operation",
                "All",
                "--cluster",
            ],
        );
        assert_eq!(out.code, 1, "{}", out.stdout);
        assert!(
            out.stderr.contains("CLUSTER_AUTHORIZATION_FAILED"),
            "{}",
            out.stderr
        );

        // the super user grants her DESCRIBE on the cluster and a consumer's
        // rights on a prefix of topics
        let added = ok(
            "add",
            as_user(
                &b,
                &admin,
                &[
                    "acls",
                    "add",
                    "--allow-principal",
                    "User:alice",
                    "--operation",
                    "Describe",
                    "--cluster",
                ],
            ),
        );
        assert!(
            added.contains(
                "ResourcePattern(resourceType=CLUSTER, name=kafka-cluster, patternType=LITERAL)"
            ),
            "{added}"
        );
        ok(
            "add consumer",
            as_user(
                &b,
                &admin,
                &[
                    "acls",
                    "add",
                    "--allow-principal",
                    "User:alice",
                    "--consumer",
                    "--topic",
                    "orders-",
                    "--resource-pattern-type",
                    "prefixed",
                    "--group",
                    "billing",
                ],
            ),
        );
        let listed = ok("alice lists", as_user(&b, &alice, &["acls", "list"]));
        assert!(
            listed.contains(
                "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders-, patternType=PREFIXED)`:"
            ),
            "{listed}"
        );
        assert!(
            listed.contains("(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)"),
            "{listed}"
        );
        // DESCRIBE does not imply ALTER: still no adding
        let out = as_user(
            &b,
            &alice,
            &[
                "acls",
                "add",
                "--allow-principal",
                "User:alice",
                "--operation",
                "Alter",
                "--cluster",
            ],
        );
        assert_eq!(out.code, 1, "{}", out.stdout);
    }

    // After a restart the ACLs are still there.
    let b = start(Some(&data));
    let listed = ok(
        "list after restart",
        as_user(&b, &admin, &["acls", "list", "--topic", "orders-"]),
    );
    assert!(listed.contains("operation=DESCRIBE"), "{listed}");
    assert!(
        !listed.contains("kafka-cluster"),
        "the filter selects the topic prefix only: {listed}"
    );
    let listed = ok(
        "alice after restart",
        as_user(&b, &alice, &["acls", "list", "--cluster"]),
    );
    assert!(listed.contains("kafka-cluster"), "{listed}");

    // Removing her cluster ACL takes away her listing.
    let removed = ok(
        "remove",
        as_user(&b, &admin, &["acls", "remove", "--cluster"]),
    );
    assert!(removed.contains("Removed ACLs for resource"), "{removed}");
    let out = as_user(&b, &alice, &["acls", "list"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
}

#[test]
fn without_an_authorizer_acl_commands_say_so() {
    let b = Broker::start();
    let out = b.run(&["acls", "list"]);
    assert_eq!(out.code, 1, "{}", out.stdout);
    assert!(out.stderr.contains("SECURITY_DISABLED"), "{}", out.stderr);
    assert!(
        out.stderr.contains("No Authorizer is configured"),
        "{}",
        out.stderr
    );
}
