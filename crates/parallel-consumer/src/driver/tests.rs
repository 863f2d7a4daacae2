use super::*;
use crate::scheduler::ConfigError;

#[test]
fn ownership_errors_are_told_apart_from_transient_ones() {
    for code in [
        RDKafkaErrorCode::IllegalGeneration,
        RDKafkaErrorCode::UnknownMemberId,
        RDKafkaErrorCode::FencedInstanceId,
        RDKafkaErrorCode::AssignmentLost,
    ] {
        assert!(is_ownership_error(code), "{code:?}");
    }
    for code in [
        RDKafkaErrorCode::RequestTimedOut,
        RDKafkaErrorCode::CoordinatorNotAvailable,
        RDKafkaErrorCode::NotCoordinator,
        RDKafkaErrorCode::RebalanceInProgress,
        RDKafkaErrorCode::BrokerTransportFailure,
    ] {
        assert!(!is_ownership_error(code), "{code:?}");
    }
}

#[test]
fn the_builder_checks_settings_before_connecting() {
    let base = || {
        ParallelConsumer::builder()
            .bootstrap_servers("127.0.0.1:1")
            .group_id("g")
            .topic("t")
    };
    // No runtime given and none current.
    assert!(matches!(base().build().err(), Some(DriverError::NoRuntime)));
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let base = || base().runtime(rt.handle().clone());
    assert!(base().build().is_ok());
    let no_topics = ParallelConsumer::builder()
        .bootstrap_servers("127.0.0.1:1")
        .group_id("g")
        .runtime(rt.handle().clone());
    assert!(matches!(
        no_topics.build().err(),
        Some(DriverError::NoTopics)
    ));
    let no_group = base().group_id("");
    assert!(matches!(
        no_group.build().err(),
        Some(DriverError::NoGroupId)
    ));
    let zero = base().commit_interval(Duration::ZERO).build().err();
    assert!(
        matches!(
            zero,
            Some(DriverError::Config(ConfigError::Zero {
                name: "commit_interval"
            }))
        ),
        "{zero:?}"
    );
    let buffers = base().buffers(10, 10).build().err();
    assert!(
        matches!(
            buffers,
            Some(DriverError::Config(ConfigError::ResumeNotBelowMax { .. }))
        ),
        "{buffers:?}"
    );
    let eos = base()
        .exactly_once(ExactlyOnceConfig::new(""))
        .build()
        .err();
    assert!(
        matches!(eos, Some(DriverError::NoTransactionalId)),
        "{eos:?}"
    );
    let uncommitted = base()
        .set("isolation.level", "read_uncommitted")
        .exactly_once(ExactlyOnceConfig::new("t-0"))
        .build()
        .err();
    assert!(
        matches!(uncommitted, Some(DriverError::ForbiddenSetting { .. })),
        "{uncommitted:?}"
    );
    // Built inside a runtime without one given: that one.
    let inside = rt
        .block_on(async {
            ParallelConsumer::builder()
                .bootstrap_servers("127.0.0.1:1")
                .group_id("g")
                .topic("t")
                .build()
        })
        .expect("build");
    assert_eq!(inside.client().get("enable.auto.commit"), Some("false"));
    // A plain handler can not start an exactly-once transform.
    let h = |_r: Record, _cx: HandlerContext| async { Ok(Vec::new()) };
    assert!(matches!(
        base().start_transform(h).err(),
        Some(DriverError::NoTransactionalId)
    ));
    // Nor a batch transform.
    let h = |_r: Vec<Record>, _cx: HandlerContext| async { Ok(Vec::new()) };
    assert!(matches!(
        base().max_batch(4).start_transform_batch(h).err(),
        Some(DriverError::NoTransactionalId)
    ));
}

#[test]
fn config_is_checked_before_connecting() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let handler = |_r: Record| async { Ok::<(), String>(()) };
    let mut client = ClientConfig::new();
    client.set("bootstrap.servers", "127.0.0.1:1");
    let err = ParallelConsumer::start(
        client.clone(),
        &["t"],
        DriverConfig::default(),
        rt.handle().clone(),
        handler,
    )
    .err();
    assert!(matches!(err, Some(DriverError::NoGroupId)), "{err:?}");
    client
        .set("group.id", "g")
        .set("enable.auto.commit", "true");
    let err = ParallelConsumer::start(
        client.clone(),
        &["t"],
        DriverConfig::default(),
        rt.handle().clone(),
        handler,
    )
    .err();
    assert!(
        matches!(err, Some(DriverError::ForbiddenSetting { .. })),
        "{err:?}"
    );
    let mut config = DriverConfig::default();
    config.retry.max_attempts = 0;
    client.set("enable.auto.commit", "false");
    let err = ParallelConsumer::start(client, &["t"], config, rt.handle().clone(), handler).err();
    assert!(matches!(err, Some(DriverError::Config(_))), "{err:?}");
}
