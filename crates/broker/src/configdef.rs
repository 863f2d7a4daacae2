//! Definitions of the broker and topic configs weir knows: Kafka names,
//! types, defaults (Kafka 4.x), validation, and the broker-level synonym of
//! each topic config. Pure data and parsing; no I/O.

/// Kafka's config types, as reported by DescribeConfigs (`ConfigType`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean,
    String,
    Int,
    Short,
    Long,
    Double,
    List,
}

impl ConfigType {
    /// DescribeConfigs v3+ `ConfigType` code.
    pub fn code(self) -> i8 {
        match self {
            ConfigType::Boolean => 1,
            ConfigType::String => 2,
            ConfigType::Int => 3,
            ConfigType::Short => 4,
            ConfigType::Long => 5,
            ConfigType::Double => 6,
            ConfigType::List => 7,
        }
    }
}

/// Why a value does not fit a config's definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigValueError(pub String);

/// One config definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfigDef {
    pub name: &'static str,
    pub ty: ConfigType,
    /// Default value in Kafka's string form; None means null.
    pub default: Option<&'static str>,
    /// Smallest allowed value for numeric types.
    pub min: Option<i64>,
    /// Allowed values (case-insensitive) for enumerated string/list configs.
    pub one_of: &'static [&'static str],
    /// For topic configs: the broker config that provides the default.
    pub synonym: Option<&'static str>,
    /// Whether the value is sensitive (never reported).
    pub sensitive: bool,
    /// For broker configs: whether and where it can change at run time.
    pub dynamic: DynamicMode,
}

/// Kafka's "dynamic update mode" of a broker config, as weir implements
/// it: a config is dynamic here only when a change takes effect live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DynamicMode {
    /// Set in the config file only; AlterConfigs refuses it.
    ReadOnly,
    /// Changeable for one broker (`--entity-name <id>`) only.
    PerBroker,
    /// Changeable cluster-wide (`--entity-default`) and per broker.
    ClusterWide,
}

const fn def(name: &'static str, ty: ConfigType, default: Option<&'static str>) -> ConfigDef {
    ConfigDef {
        name,
        ty,
        default,
        min: None,
        one_of: &[],
        synonym: None,
        sensitive: false,
        dynamic: DynamicMode::ReadOnly,
    }
}
const fn min(mut d: ConfigDef, m: i64) -> ConfigDef {
    d.min = Some(m);
    d
}
const fn one_of(mut d: ConfigDef, v: &'static [&'static str]) -> ConfigDef {
    d.one_of = v;
    d
}
const fn syn(mut d: ConfigDef, s: &'static str) -> ConfigDef {
    d.synonym = Some(s);
    d
}
/// A value that is never reported (passwords, keys).
const fn secret(mut d: ConfigDef) -> ConfigDef {
    d.sensitive = true;
    d
}
/// A broker config that can change at run time, cluster-wide or per broker.
const fn cw(mut d: ConfigDef) -> ConfigDef {
    d.dynamic = DynamicMode::ClusterWide;
    d
}

use crate::sasl::oauthbearer;
use ConfigType::{Boolean, Double, Int, List, Long, Short, String as Str};

const LONG_MAX: &str = "9223372036854775807";
const CLEANUP: &[&str] = &["delete", "compact"];
const TS_TYPES: &[&str] = &["CreateTime", "LogAppendTime"];
const COMPRESSION: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// Broker configs weir reads or reports.
pub static BROKER_CONFIGS: &[ConfigDef] = &[
    min(def("node.id", Int, Some("1")), 0),
    // KRaft roles and quorum (see docs/configuration.md, "KRaft names"):
    // every weir node is broker and controller; a quorum of several voters
    // is a cluster (docs/cluster.md).
    def("process.roles", List, Some("broker,controller")),
    def("controller.quorum.voters", List, Some("")),
    min(
        def("controller.quorum.election.timeout.ms", Int, Some("1000")),
        10,
    ),
    one_of(
        def("auto.leader.rebalance.enable", Boolean, Some("true")),
        &["true", "false"],
    ),
    min(
        def("leader.imbalance.check.interval.seconds", Long, Some("300")),
        1,
    ),
    min(def("broker.heartbeat.interval.ms", Int, Some("2000")), 1),
    min(def("broker.session.timeout.ms", Int, Some("9000")), 1),
    def("broker.rack", Str, None),
    // the id in meta.properties (Kafka's storage format step sets it)
    def("cluster.id", Str, None),
    def("controller.quorum.bootstrap.servers", List, Some("")),
    def("controller.listener.names", List, None),
    def("inter.broker.listener.name", Str, None),
    def("listeners", List, Some("PLAINTEXT://127.0.0.1:9092")),
    def("advertised.listeners", List, None),
    // listener name → security protocol; PLAINTEXT and SSL are served
    def(
        "listener.security.protocol.map",
        Str,
        Some("PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"),
    ),
    // TLS of SSL listeners (crate::tls); each may also be given per
    // listener as listener.name.<name>.ssl.*. The store types have no
    // default: weir tells PEM from PKCS12 by the file's content.
    one_of(
        def("ssl.keystore.type", Str, None),
        &["PEM", "PKCS12", "JKS"],
    ),
    def("ssl.keystore.location", Str, None),
    secret(def("ssl.keystore.password", Str, None)),
    secret(def("ssl.key.password", Str, None)),
    secret(def("ssl.keystore.certificate.chain", Str, None)),
    secret(def("ssl.keystore.key", Str, None)),
    one_of(
        def("ssl.truststore.type", Str, None),
        &["PEM", "PKCS12", "JKS"],
    ),
    def("ssl.truststore.location", Str, None),
    secret(def("ssl.truststore.password", Str, None)),
    secret(def("ssl.truststore.certificates", Str, None)),
    one_of(
        def("ssl.client.auth", Str, Some("none")),
        &["none", "requested", "required"],
    ),
    def("ssl.principal.mapping.rules", Str, Some("DEFAULT")),
    def("ssl.enabled.protocols", List, Some("TLSv1.2,TLSv1.3")),
    // SASL of SASL_PLAINTEXT and SASL_SSL listeners (crate::sasl); also per
    // listener as listener.name.<name>.sasl.enabled.mechanisms. Kafka's
    // default, GSSAPI, is not served, so there is none.
    def("sasl.enabled.mechanisms", List, None),
    // OAUTHBEARER's signed-token validation (crate::sasl::oauthbearer); also
    // per listener, as listener.name.<name>[.oauthbearer].<config>. Only
    // file:// JWKS URLs are served.
    def(oauthbearer::JWKS_ENDPOINT_URL, Str, None),
    min(
        def(
            oauthbearer::JWKS_ENDPOINT_REFRESH_MS,
            Long,
            Some(oauthbearer::DEFAULT_JWKS_ENDPOINT_REFRESH_MS),
        ),
        0,
    ),
    min(
        def(
            oauthbearer::CLOCK_SKEW_SECONDS,
            Int,
            Some(oauthbearer::DEFAULT_CLOCK_SKEW_SECONDS),
        ),
        0,
    ),
    def(oauthbearer::EXPECTED_AUDIENCE, List, None),
    def(oauthbearer::EXPECTED_ISSUER, Str, None),
    def(
        oauthbearer::SCOPE_CLAIM_NAME,
        Str,
        Some(oauthbearer::DEFAULT_SCOPE_CLAIM_NAME),
    ),
    def(
        oauthbearer::SUB_CLAIM_NAME,
        Str,
        Some(oauthbearer::DEFAULT_SUB_CLAIM_NAME),
    ),
    // Authorization (crate::acls): Kafka's StandardAuthorizer class name
    // turns ACLs on; empty = no authorizer (everyone may do everything).
    def("authorizer.class.name", Str, Some("")),
    def("super.users", Str, None),
    one_of(
        def("allow.everyone.if.no.acl.found", Boolean, Some("false")),
        &["true", "false"],
    ),
    // weir-specific: the HTTP listener for /metrics and the console
    def("http.listeners", Str, Some("127.0.0.1:9644")),
    // weir-specific: Host names the HTTP listener answers besides IPs,
    // dotless names and its own host (`*`: any)
    def("http.allowed.hosts", List, Some("")),
    // weir-specific: TLS of an https:// HTTP listener (crate::http::security),
    // Kafka's ssl.* names under http.
    one_of(
        def("http.ssl.keystore.type", Str, None),
        &["PEM", "PKCS12", "JKS"],
    ),
    def("http.ssl.keystore.location", Str, None),
    secret(def("http.ssl.keystore.password", Str, None)),
    secret(def("http.ssl.key.password", Str, None)),
    secret(def("http.ssl.keystore.certificate.chain", Str, None)),
    secret(def("http.ssl.keystore.key", Str, None)),
    one_of(
        def("http.ssl.truststore.type", Str, None),
        &["PEM", "PKCS12", "JKS"],
    ),
    def("http.ssl.truststore.location", Str, None),
    secret(def("http.ssl.truststore.password", Str, None)),
    secret(def("http.ssl.truststore.certificates", Str, None)),
    one_of(
        def("http.ssl.client.auth", Str, Some("none")),
        &["none", "requested", "required"],
    ),
    def("http.ssl.enabled.protocols", List, Some("TLSv1.2,TLSv1.3")),
    // weir-specific: HTTP basic authentication (crate::http::basic_auth):
    // a file of user:$pbkdf2-sha256$… lines; whether /metrics asks too
    def("http.basic.auth.file", Str, None),
    one_of(
        def("http.basic.auth.metrics", Boolean, Some("true")),
        &["true", "false"],
    ),
    // weir-specific: serve an address other than loopback without TLS and
    // without authentication
    one_of(
        def("http.insecure.allow", Boolean, Some("false")),
        &["true", "false"],
    ),
    def("log.dirs", List, Some("./weir-data")),
    one_of(
        def("auto.create.topics.enable", Boolean, Some("true")),
        &["true", "false"],
    ),
    one_of(
        def("delete.topic.enable", Boolean, Some("true")),
        &["true", "false"],
    ),
    min(def("num.partitions", Int, Some("1")), 1),
    min(def("default.replication.factor", Int, Some("1")), 1),
    cw(min(def("min.insync.replicas", Int, Some("1")), 1)),
    min(def("socket.request.max.bytes", Int, Some("104857600")), 1),
    // Kafka's default is -1 (unbounded); weir bounds the memory of request
    // frames being received by default. -1 = unbounded, 0 is refused.
    min(def("queued.max.request.bytes", Long, Some("268435456")), -1),
    // weir-specific: fetch responses with at most this many bytes of record
    // data are copied into one write instead of sendfile (0: always sendfile)
    min(def("fetch.inline.max.bytes", Int, Some("32768")), 0),
    // Client quotas (docs/security.md, "Quotas"); not dynamic.
    min(def("quota.window.num", Int, Some("11")), 1),
    min(def("quota.window.size.seconds", Int, Some("1")), 1),
    cw(min(def("max.connections", Int, Some("2147483647")), 1)),
    cw(min(
        def("max.connections.per.ip", Int, Some("2147483647")),
        1,
    )),
    min(def("connections.max.idle.ms", Long, Some("600000")), 1),
    // KIP-368: a SASL session lasts at most this long, then the client
    // re-authenticates on the same connection or is disconnected; 0: forever
    min(def("connections.max.reauth.ms", Long, Some("0")), 0),
    // a failed authentication's answer (and the close) waits this long;
    // weir doubles it per further failure from the address within a
    // minute, up to 32 times (crate::sasl::throttle)
    min(
        def(
            "connection.failed.authentication.delay.ms",
            Int,
            Some("100"),
        ),
        0,
    ),
    min(def("num.recovery.threads.per.data.dir", Int, Some("2")), 1),
    cw(min(def("message.max.bytes", Int, Some("1048588")), 0)),
    cw(min(def("log.segment.bytes", Int, Some("1073741824")), 14)),
    cw(min(def("log.roll.ms", Long, None), 1)),
    min(def("log.roll.hours", Int, Some("168")), 1),
    cw(min(def("log.roll.jitter.ms", Long, None), 0)),
    min(def("log.roll.jitter.hours", Int, Some("0")), 0),
    cw(min(
        def("log.index.size.max.bytes", Int, Some("10485760")),
        4,
    )),
    cw(min(def("log.index.interval.bytes", Int, Some("4096")), 0)),
    cw(min(
        def("log.flush.interval.messages", Long, Some(LONG_MAX)),
        1,
    )),
    cw(min(def("log.flush.interval.ms", Long, None), 0)),
    min(
        def("log.flush.scheduler.interval.ms", Long, Some(LONG_MAX)),
        1,
    ),
    cw(def("log.retention.ms", Long, None)),
    def("log.retention.minutes", Int, None),
    def("log.retention.hours", Int, Some("168")),
    cw(def("log.retention.bytes", Long, Some("-1"))),
    min(
        def("log.retention.check.interval.ms", Long, Some("300000")),
        1,
    ),
    cw(one_of(
        def("log.cleanup.policy", List, Some("delete")),
        CLEANUP,
    )),
    cw(min(
        def("log.cleaner.delete.retention.ms", Long, Some("86400000")),
        0,
    )),
    cw(min(
        def("log.cleaner.min.compaction.lag.ms", Long, Some("0")),
        0,
    )),
    cw(min(
        def("log.cleaner.max.compaction.lag.ms", Long, Some(LONG_MAX)),
        1,
    )),
    cw(def("log.cleaner.min.cleanable.ratio", Double, Some("0.5"))),
    def("log.cleaner.enable", Boolean, Some("true")),
    cw(min(def("log.cleaner.threads", Int, Some("1")), 0)),
    cw(min(
        def("log.cleaner.dedupe.buffer.size", Long, Some("134217728")),
        0,
    )),
    cw(def(
        "log.cleaner.io.max.bytes.per.second",
        Double,
        Some("1.7976931348623157E308"),
    )),
    cw(min(def("log.cleaner.backoff.ms", Long, Some("15000")), 0)),
    cw(min(
        def("log.segment.delete.delay.ms", Long, Some("60000")),
        0,
    )),
    cw(one_of(
        def("log.message.timestamp.type", Str, Some("CreateTime")),
        TS_TYPES,
    )),
    cw(min(
        def("log.message.timestamp.before.max.ms", Long, Some(LONG_MAX)),
        0,
    )),
    cw(min(
        def("log.message.timestamp.after.max.ms", Long, Some("3600000")),
        0,
    )),
    cw(one_of(
        def("log.preallocate", Boolean, Some("false")),
        &["true", "false"],
    )),
    cw(one_of(
        def("compression.type", Str, Some("producer")),
        COMPRESSION,
    )),
    cw(one_of(
        def("unclean.leader.election.enable", Boolean, Some("false")),
        &["true", "false"],
    )),
    min(def("fetch.max.bytes", Int, Some("57671680")), 0),
    // Replication (docs/configuration.md, "Replication"); not dynamic.
    min(def("replica.lag.time.max.ms", Long, Some("30000")), 1),
    min(def("replica.fetch.max.bytes", Int, Some("1048576")), 0),
    min(
        def("replica.fetch.response.max.bytes", Int, Some("10485760")),
        0,
    ),
    min(def("replica.fetch.wait.max.ms", Int, Some("500")), 0),
    min(def("replica.fetch.min.bytes", Int, Some("1")), 0),
    min(def("replica.fetch.backoff.ms", Int, Some("1000")), 0),
    min(def("num.replica.fetchers", Int, Some("1")), 1),
    min(
        def(
            "replica.high.watermark.checkpoint.interval.ms",
            Long,
            Some("5000"),
        ),
        1,
    ),
    min(def("offsets.topic.num.partitions", Int, Some("50")), 1),
    // a cluster caps it at its number of nodes
    min(def("offsets.topic.replication.factor", Int, Some("3")), 1),
    min(def("offsets.retention.minutes", Int, Some("10080")), 1),
    // how long an offset commit waits for the ISR of its partition
    min(def("offsets.commit.timeout.ms", Int, Some("5000")), 1),
    min(
        def("offsets.retention.check.interval.ms", Long, Some("600000")),
        1,
    ),
    min(
        def("offsets.topic.segment.bytes", Int, Some("104857600")),
        1,
    ),
    min(def("offset.metadata.max.bytes", Int, Some("4096")), 0),
    min(
        def("group.initial.rebalance.delay.ms", Int, Some("3000")),
        0,
    ),
    min(def("group.min.session.timeout.ms", Int, Some("6000")), 0),
    min(def("group.max.session.timeout.ms", Int, Some("1800000")), 0),
    min(def("group.max.size", Int, Some("2147483647")), 1),
    // Consumer-protocol groups (KIP-848) and the defaults and bounds of
    // the group configs (`GROUP_CONFIGS`). Assignors are named `uniform`
    // and `range` (or by Kafka's class names); the first is the default.
    def(
        "group.consumer.assignors",
        List,
        Some(
            "org.apache.kafka.coordinator.group.assignor.UniformAssignor,org.apache.kafka.coordinator.group.assignor.RangeAssignor",
        ),
    ),
    min(def("group.consumer.max.size", Int, Some("2147483647")), 1),
    // Online upgrade/downgrade between classic and consumer groups.
    one_of(
        def(
            "group.consumer.migration.policy",
            Str,
            Some("bidirectional"),
        ),
        &["bidirectional", "upgrade", "downgrade", "disabled"],
    ),
    min(
        def("group.consumer.session.timeout.ms", Int, Some("45000")),
        1,
    ),
    min(
        def("group.consumer.min.session.timeout.ms", Int, Some("45000")),
        1,
    ),
    min(
        def("group.consumer.max.session.timeout.ms", Int, Some("60000")),
        1,
    ),
    min(
        def("group.consumer.heartbeat.interval.ms", Int, Some("5000")),
        1,
    ),
    min(
        def(
            "group.consumer.min.heartbeat.interval.ms",
            Int,
            Some("5000"),
        ),
        1,
    ),
    min(
        def(
            "group.consumer.max.heartbeat.interval.ms",
            Int,
            Some("15000"),
        ),
        1,
    ),
    min(def("group.share.session.timeout.ms", Int, Some("45000")), 1),
    min(
        def("group.share.min.session.timeout.ms", Int, Some("45000")),
        1,
    ),
    min(
        def("group.share.max.session.timeout.ms", Int, Some("60000")),
        1,
    ),
    min(
        def("group.share.heartbeat.interval.ms", Int, Some("5000")),
        1,
    ),
    min(
        def("group.share.min.heartbeat.interval.ms", Int, Some("5000")),
        1,
    ),
    min(
        def("group.share.max.heartbeat.interval.ms", Int, Some("15000")),
        1,
    ),
    min(
        def("group.share.record.lock.duration.ms", Int, Some("30000")),
        1,
    ),
    min(
        def(
            "group.share.min.record.lock.duration.ms",
            Int,
            Some("15000"),
        ),
        1,
    ),
    min(
        def(
            "group.share.max.record.lock.duration.ms",
            Int,
            Some("60000"),
        ),
        1,
    ),
    // The transaction coordinator (docs/transactions.md); a cluster caps
    // the replication factor at its live brokers, and min.insync.replicas
    // of the topic at that factor.
    min(
        def("transaction.state.log.num.partitions", Int, Some("50")),
        1,
    ),
    min(
        def("transaction.state.log.replication.factor", Short, Some("3")),
        1,
    ),
    min(def("transaction.state.log.min.isr", Int, Some("2")), 1),
    min(
        def(
            "transaction.state.log.segment.bytes",
            Int,
            Some("104857600"),
        ),
        1,
    ),
    min(def("transaction.max.timeout.ms", Int, Some("900000")), 1),
    min(
        def(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            Int,
            Some("10000"),
        ),
        1,
    ),
    min(
        def(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            Int,
            Some("3600000"),
        ),
        1,
    ),
    min(
        def("transactional.id.expiration.ms", Int, Some("604800000")),
        1,
    ),
    min(def("producer.id.expiration.ms", Int, Some("86400000")), 1),
];

/// Topic configs, with their broker synonyms.
pub static TOPIC_CONFIGS: &[ConfigDef] = &[
    syn(
        one_of(def("cleanup.policy", List, Some("delete")), CLEANUP),
        "log.cleanup.policy",
    ),
    syn(
        one_of(def("compression.type", Str, Some("producer")), COMPRESSION),
        "compression.type",
    ),
    syn(
        min(def("delete.retention.ms", Long, Some("86400000")), 0),
        "log.cleaner.delete.retention.ms",
    ),
    syn(
        min(def("file.delete.delay.ms", Long, Some("60000")), 0),
        "log.segment.delete.delay.ms",
    ),
    syn(
        min(def("flush.messages", Long, Some(LONG_MAX)), 1),
        "log.flush.interval.messages",
    ),
    syn(
        min(def("flush.ms", Long, Some(LONG_MAX)), 0),
        "log.flush.interval.ms",
    ),
    syn(
        min(def("index.interval.bytes", Int, Some("4096")), 0),
        "log.index.interval.bytes",
    ),
    syn(
        min(def("max.compaction.lag.ms", Long, Some(LONG_MAX)), 1),
        "log.cleaner.max.compaction.lag.ms",
    ),
    syn(
        min(def("max.message.bytes", Int, Some("1048588")), 0),
        "message.max.bytes",
    ),
    syn(
        min(
            def("message.timestamp.after.max.ms", Long, Some("3600000")),
            0,
        ),
        "log.message.timestamp.after.max.ms",
    ),
    syn(
        min(
            def("message.timestamp.before.max.ms", Long, Some(LONG_MAX)),
            0,
        ),
        "log.message.timestamp.before.max.ms",
    ),
    syn(
        one_of(
            def("message.timestamp.type", Str, Some("CreateTime")),
            TS_TYPES,
        ),
        "log.message.timestamp.type",
    ),
    syn(
        def("min.cleanable.dirty.ratio", Double, Some("0.5")),
        "log.cleaner.min.cleanable.ratio",
    ),
    syn(
        min(def("min.compaction.lag.ms", Long, Some("0")), 0),
        "log.cleaner.min.compaction.lag.ms",
    ),
    syn(
        min(def("min.insync.replicas", Int, Some("1")), 1),
        "min.insync.replicas",
    ),
    syn(
        one_of(
            def("preallocate", Boolean, Some("false")),
            &["true", "false"],
        ),
        "log.preallocate",
    ),
    syn(
        min(def("retention.bytes", Long, Some("-1")), -1),
        "log.retention.bytes",
    ),
    syn(
        min(def("retention.ms", Long, Some("604800000")), -1),
        "log.retention.ms",
    ),
    syn(
        min(def("segment.bytes", Int, Some("1073741824")), 14),
        "log.segment.bytes",
    ),
    syn(
        min(def("segment.index.bytes", Int, Some("10485760")), 4),
        "log.index.size.max.bytes",
    ),
    syn(
        min(def("segment.jitter.ms", Long, Some("0")), 0),
        "log.roll.jitter.ms",
    ),
    syn(
        min(def("segment.ms", Long, Some("604800000")), 1),
        "log.roll.ms",
    ),
    syn(
        one_of(
            def("unclean.leader.election.enable", Boolean, Some("false")),
            &["true", "false"],
        ),
        "unclean.leader.election.enable",
    ),
];

/// Per-group configs (Kafka 4.0 `GroupConfig`, resource type GROUP), with
/// the broker config that gives each its default. The bounds each must lie
/// within are `GROUP_CONFIG_BOUNDS`.
pub static GROUP_CONFIGS: &[ConfigDef] = &[
    syn(
        def("consumer.session.timeout.ms", Int, Some("45000")),
        "group.consumer.session.timeout.ms",
    ),
    syn(
        def("consumer.heartbeat.interval.ms", Int, Some("5000")),
        "group.consumer.heartbeat.interval.ms",
    ),
    syn(
        def("share.session.timeout.ms", Int, Some("45000")),
        "group.share.session.timeout.ms",
    ),
    syn(
        def("share.heartbeat.interval.ms", Int, Some("5000")),
        "group.share.heartbeat.interval.ms",
    ),
    syn(
        def("share.record.lock.duration.ms", Int, Some("30000")),
        "group.share.record.lock.duration.ms",
    ),
    one_of(
        def("share.auto.offset.reset", Str, Some("latest")),
        &["latest", "earliest"],
    ),
];

/// Group config → the broker configs bounding it (minimum, maximum).
pub static GROUP_CONFIG_BOUNDS: &[(&str, &str, &str)] = &[
    (
        "consumer.session.timeout.ms",
        "group.consumer.min.session.timeout.ms",
        "group.consumer.max.session.timeout.ms",
    ),
    (
        "consumer.heartbeat.interval.ms",
        "group.consumer.min.heartbeat.interval.ms",
        "group.consumer.max.heartbeat.interval.ms",
    ),
    (
        "share.session.timeout.ms",
        "group.share.min.session.timeout.ms",
        "group.share.max.session.timeout.ms",
    ),
    (
        "share.heartbeat.interval.ms",
        "group.share.min.heartbeat.interval.ms",
        "group.share.max.heartbeat.interval.ms",
    ),
    (
        "share.record.lock.duration.ms",
        "group.share.min.record.lock.duration.ms",
        "group.share.max.record.lock.duration.ms",
    ),
];

pub fn group_def(name: &str) -> Option<&'static ConfigDef> {
    GROUP_CONFIGS.iter().find(|d| d.name == name)
}

/// `listener.name.<name>.<mechanism>.sasl.jaas.config`: a listener's login
/// module for one mechanism, with its users' passwords. Only read in that
/// per-listener form, so it is not among [`BROKER_CONFIGS`].
pub static LISTENER_SASL_JAAS_CONFIG: ConfigDef = secret(def("sasl.jaas.config", Str, None));

/// `listener.name.<name>.<mechanism>.sasl.server.callback.handler.class`:
/// which of Kafka's validators an OAUTHBEARER listener uses. Only read in
/// that per-listener form.
pub static LISTENER_SASL_SERVER_CALLBACK_HANDLER_CLASS: ConfigDef =
    def("sasl.server.callback.handler.class", Str, None);

pub fn broker_def(name: &str) -> Option<&'static ConfigDef> {
    BROKER_CONFIGS.iter().find(|d| d.name == name)
}

pub fn topic_def(name: &str) -> Option<&'static ConfigDef> {
    TOPIC_CONFIGS.iter().find(|d| d.name == name)
}

/// The broker configs that set the same thing as `name`, in Kafka's order
/// (`DynamicBrokerConfig.brokerConfigSynonyms`): the finer unit first.
pub fn broker_synonyms(name: &str) -> &'static [&'static str] {
    const RETENTION: &[&str] = &[
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
    ];
    const ROLL: &[&str] = &["log.roll.ms", "log.roll.hours"];
    const JITTER: &[&str] = &["log.roll.jitter.ms", "log.roll.jitter.hours"];
    const FLUSH: &[&str] = &["log.flush.interval.ms", "log.flush.scheduler.interval.ms"];
    match name {
        "log.retention.ms" | "log.retention.minutes" | "log.retention.hours" => RETENTION,
        "log.roll.ms" | "log.roll.hours" => ROLL,
        "log.roll.jitter.ms" | "log.roll.jitter.hours" => JITTER,
        "log.flush.interval.ms" => FLUSH,
        _ => &[],
    }
}

impl ConfigDef {
    /// Checks that `value` is a valid value for this config.
    pub fn validate(&self, value: &str) -> Result<(), ConfigValueError> {
        let v = value.trim();
        let err = |m: String| Err(ConfigValueError(m));
        match self.ty {
            Boolean => {
                if !v.eq_ignore_ascii_case("true") && !v.eq_ignore_ascii_case("false") {
                    return err("expected true or false".into());
                }
            }
            Int | Short | Long => {
                let n: i64 = match v.parse() {
                    Ok(n) => n,
                    Err(_) => return err("expected an integer".into()),
                };
                let (lo, hi) = match self.ty {
                    Int => (i32::MIN as i64, i32::MAX as i64),
                    Short => (i16::MIN as i64, i16::MAX as i64),
                    _ => (i64::MIN, i64::MAX),
                };
                if n < lo || n > hi {
                    return err(format!("out of range for {:?}", self.ty));
                }
                if let Some(m) = self.min
                    && n < m
                {
                    return err(format!("must be at least {m}"));
                }
            }
            Double => {
                let d: f64 = match v.parse() {
                    Ok(d) => d,
                    Err(_) => return err("expected a number".into()),
                };
                if !(0.0..=1.0).contains(&d) && self.name.contains("ratio") {
                    return err("must be between 0 and 1".into());
                }
            }
            Str | List => {
                if !self.one_of.is_empty() {
                    let items: Vec<&str> = if self.ty == List {
                        v.split(',').map(str::trim).collect()
                    } else {
                        vec![v]
                    };
                    for item in items {
                        if !self.one_of.iter().any(|o| o.eq_ignore_ascii_case(item)) {
                            return err(format!("must be one of {}", self.one_of.join(", ")));
                        }
                    }
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_valid_and_every_synonym_exists() {
        for d in BROKER_CONFIGS.iter().chain(TOPIC_CONFIGS) {
            if let Some(v) = d.default {
                d.validate(v)
                    .unwrap_or_else(|e| panic!("{}: {e:?}", d.name));
            }
        }
        for d in TOPIC_CONFIGS {
            let s = d.synonym.unwrap();
            assert!(broker_def(s).is_some(), "{s}");
            // a topic default changes live: every log's config is rebuilt
            // (and produce reads min.insync.replicas from the config in effect)
            assert_eq!(
                broker_def(s).unwrap().dynamic,
                DynamicMode::ClusterWide,
                "{s}"
            );
        }
        for d in TOPIC_CONFIGS {
            assert_eq!(d.dynamic, DynamicMode::ReadOnly, "{}", d.name);
        }
        for d in GROUP_CONFIGS {
            if let Some(s) = d.synonym {
                let b = broker_def(s).unwrap();
                assert_eq!(b.default, d.default, "{s}");
            }
        }
        for (g, lo, hi) in GROUP_CONFIG_BOUNDS {
            assert!(group_def(g).is_some() && broker_def(lo).is_some() && broker_def(hi).is_some());
        }
        // Numeric defaults parse: code reading them through
        // `BrokerConfig::number`/`integer` never needs a default of its own.
        for d in BROKER_CONFIGS {
            match (d.ty, d.default) {
                (Int | Long | Short, Some(v)) => assert!(v.parse::<i64>().is_ok(), "{}", d.name),
                (Double, Some(v)) => assert!(v.parse::<f64>().is_ok(), "{}", d.name),
                _ => {}
            }
        }
    }

    #[test]
    fn validation_table() {
        let seg = topic_def("segment.bytes").unwrap();
        assert!(seg.validate("1048576").is_ok());
        assert!(seg.validate("13").is_err());
        assert!(seg.validate("99999999999").is_err());
        assert!(seg.validate("x").is_err());
        let cp = topic_def("cleanup.policy").unwrap();
        assert!(cp.validate("compact,delete").is_ok());
        assert!(cp.validate("compact,shred").is_err());
        let ts = topic_def("message.timestamp.type").unwrap();
        assert!(ts.validate("LogAppendTime").is_ok());
        assert!(ts.validate("Other").is_err());
        assert!(
            topic_def("min.cleanable.dirty.ratio")
                .unwrap()
                .validate("1.5")
                .is_err()
        );
    }
}
