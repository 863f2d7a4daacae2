//! `weir configs` on broker resources against a real `weir serve`: the
//! cluster-wide default (`--entity-default`) and a per-broker value, their
//! precedence over the static config as DescribeConfigs reports it (value,
//! source, synonyms in Kafka's order) on the broker and on a topic that
//! inherits it, and the refusal of read-only configs.

use crate::common;

use common::Broker;

/// The `name=… source=… sensitive=… synonyms={…}` line of `name`.
fn entry(text: &str, name: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| l.starts_with(&format!("{name}=")))
        .unwrap_or_default()
        .to_string()
}

fn describe(b: &Broker, args: &[&str]) -> String {
    let mut all = vec!["configs", "describe", "--all"];
    all.extend_from_slice(args);
    let out = b.run(&all);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout
}

fn alter(b: &Broker, args: &[&str]) -> common::Output {
    let mut all = vec!["configs", "alter", "--entity-type", "brokers"];
    all.extend_from_slice(args);
    b.run(&all)
}

#[test]
fn default_and_per_broker_configs_layer_over_the_static_ones() {
    let b = Broker::start_with(&["--set", "log.retention.hours=2"]);
    assert_eq!(b.run(&["topics", "create", "--topic", "t"]).code, 0);
    let topic = |b: &Broker| describe(b, &["--entity-type", "topics", "--entity-name", "t"]);
    let broker = |b: &Broker| describe(b, &["--entity-type", "brokers", "--entity-name", "1"]);
    assert!(
        entry(&topic(&b), "retention.ms")
            .starts_with("retention.ms=7200000 source=STATIC_BROKER_CONFIG"),
        "{}",
        topic(&b)
    );

    // Cluster-wide default.
    let out = alter(
        &b,
        &[
            "--entity-default",
            "--add-config",
            "log.retention.ms=3600000",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "Completed updating default config for brokers in the cluster.\n"
    );
    let default = describe(&b, &["--entity-type", "brokers", "--entity-default"]);
    assert_eq!(
        default,
        "Default configs for brokers in the cluster are:\n  log.retention.ms=3600000 source=DYNAMIC_DEFAULT_BROKER_CONFIG sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, STATIC_BROKER_CONFIG:log.retention.hours=2, DEFAULT_CONFIG:log.retention.hours=168}\n"
    );
    assert!(
        entry(&topic(&b), "retention.ms")
            .starts_with("retention.ms=3600000 source=DYNAMIC_DEFAULT_BROKER_CONFIG"),
        "{}",
        topic(&b)
    );

    // This broker's value wins over the default.
    let out = alter(
        &b,
        &[
            "--entity-name",
            "1",
            "--add-config",
            "log.retention.ms=60000",
        ],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Completed updating config for broker 1.\n");
    assert_eq!(
        entry(&broker(&b), "log.retention.ms"),
        "log.retention.ms=60000 source=DYNAMIC_BROKER_CONFIG sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=60000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, STATIC_BROKER_CONFIG:log.retention.hours=2, DEFAULT_CONFIG:log.retention.hours=168}"
    );
    assert_eq!(
        entry(&topic(&b), "retention.ms"),
        "retention.ms=60000 source=DYNAMIC_BROKER_CONFIG sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.retention.ms=60000, DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=3600000, STATIC_BROKER_CONFIG:log.retention.hours=2, DEFAULT_CONFIG:retention.ms=604800000}"
    );

    // Read-only configs are refused as a whole, with Kafka's code and message.
    for scope in [&["--entity-name", "1"][..], &["--entity-default"][..]] {
        let mut args = scope.to_vec();
        args.extend(["--add-config", "log.retention.ms=1,node.id=5"]);
        let out = alter(&b, &args);
        assert_eq!(out.code, 1, "{scope:?}: {}", out.stdout);
        assert!(
            out.stderr.contains("INVALID_REQUEST")
                && out
                    .stderr
                    .contains("Cannot update these configs dynamically: Set(node.id)"),
            "{scope:?}: {}",
            out.stderr
        );
    }
    assert!(
        entry(&topic(&b), "retention.ms").starts_with("retention.ms=60000 "),
        "{}",
        topic(&b)
    );
    // So is another broker's id (weir runs one broker).
    let out = alter(
        &b,
        &["--entity-name", "2", "--add-config", "log.retention.ms=1"],
    );
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("Unexpected broker id"),
        "{}",
        out.stderr
    );

    // Deleting the broker's value falls back to the default.
    let out = alter(
        &b,
        &["--entity-name", "1", "--delete-config", "log.retention.ms"],
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        entry(&topic(&b), "retention.ms")
            .starts_with("retention.ms=3600000 source=DYNAMIC_DEFAULT_BROKER_CONFIG"),
        "{}",
        topic(&b)
    );
}

#[test]
fn group_configs_are_set_checked_against_the_broker_bounds_and_described() {
    let b = Broker::start_with(&["--set", "group.consumer.max.session.timeout.ms=90000"]);
    let group = |b: &Broker| describe(b, &["--entity-type", "groups", "--entity-name", "payments"]);
    assert_eq!(
        entry(&group(&b), "consumer.session.timeout.ms"),
        "consumer.session.timeout.ms=45000 source=DEFAULT_CONFIG sensitive=false synonyms={DEFAULT_CONFIG:consumer.session.timeout.ms=45000}"
    );
    let alter = |b: &Broker, args: &[&str]| {
        let mut all = vec![
            "configs",
            "alter",
            "--entity-type",
            "groups",
            "--entity-name",
            "payments",
        ];
        all.extend_from_slice(args);
        b.run(&all)
    };

    // Within the broker's bounds (the maximum raised by the static config).
    let out = alter(&b, &["--add-config", "consumer.session.timeout.ms=80000"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "Completed updating config for group payments.\n"
    );
    assert_eq!(
        entry(&group(&b), "consumer.session.timeout.ms"),
        "consumer.session.timeout.ms=80000 source=GROUP_CONFIG sensitive=false synonyms={GROUP_CONFIG:consumer.session.timeout.ms=80000, DEFAULT_CONFIG:consumer.session.timeout.ms=45000}"
    );
    // Another group is unaffected.
    let other = describe(&b, &["--entity-type", "groups", "--entity-name", "audit"]);
    assert!(
        entry(&other, "consumer.session.timeout.ms").contains("=45000 source=DEFAULT_CONFIG"),
        "{other}"
    );

    // Out of bounds, unknown names and a heartbeat not below the session
    // timeout are refused with INVALID_CONFIG, changing nothing.
    for (config, message) in [
        (
            "consumer.session.timeout.ms=90001",
            "consumer.session.timeout.ms must be less than or equal to group.consumer.max.session.timeout.ms",
        ),
        (
            "consumer.heartbeat.interval.ms=1000",
            "consumer.heartbeat.interval.ms must be greater than or equal to group.consumer.min.heartbeat.interval.ms",
        ),
        (
            "session.timeout.ms=50000",
            "Unknown group config name: session.timeout.ms",
        ),
    ] {
        let out = alter(&b, &["--add-config", config]);
        assert_eq!(out.code, 1, "{config}: {}", out.stdout);
        assert!(
            out.stderr.contains("INVALID_CONFIG") && out.stderr.contains(message),
            "{config}: {}",
            out.stderr
        );
    }
    assert!(
        entry(&group(&b), "consumer.session.timeout.ms").contains("=80000 source=GROUP_CONFIG"),
        "{}",
        group(&b)
    );

    // Deleting it returns to the broker's default.
    let out = alter(&b, &["--delete-config", "consumer.session.timeout.ms"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        entry(&group(&b), "consumer.session.timeout.ms").contains("=45000 source=DEFAULT_CONFIG"),
        "{}",
        group(&b)
    );
}
