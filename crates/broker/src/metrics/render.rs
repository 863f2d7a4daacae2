//! Builds the `/metrics` page: the event counters of [`super::BrokerMetrics`]
//! plus state read at scrape time (partitions, groups, cleaner, the
//! cluster snapshot), then the wiring layer's extra families.
//!
//! Blocking (takes the group coordinator's lock and each log's lock
//! briefly); the HTTP layer calls it on a blocking thread.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

use weir_group::{GroupState, OffsetFetchGroup};
use weir_protocol::messages::ApiKey;

use super::text::{Kind, TextWriter};
use crate::broker::Broker;

/// The states a classic group's `weir_group_state` lists.
const CLASSIC_STATES: [GroupState; 5] = [
    GroupState::Empty,
    GroupState::PreparingRebalance,
    GroupState::CompletingRebalance,
    GroupState::Stable,
    GroupState::Dead,
];

/// The states a consumer-protocol (KIP-848) group's `weir_group_state`
/// lists.
const CONSUMER_STATES: [GroupState; 5] = [
    GroupState::Empty,
    GroupState::Assigning,
    GroupState::Reconciling,
    GroupState::Stable,
    GroupState::Dead,
];

/// The whole exposition text for `broker`.
pub fn render(broker: &Broker) -> String {
    let mut w = TextWriter::new();
    process(&mut w, broker);
    requests(&mut w, broker);
    network(&mut w, broker);
    partitions(&mut w, broker);
    groups(&mut w, broker);
    super::transactions::render(&mut w, broker);
    cleaner(&mut w, broker);
    retention(&mut w, broker);
    super::cluster::render(&mut w, broker);
    super::replication::render(&mut w, broker);
    broker.quotas.render_metrics(&mut w);
    broker.metrics.write_extra(&mut w);
    w.finish()
}

fn load(a: &std::sync::atomic::AtomicU64) -> i128 {
    a.load(Ordering::Relaxed) as i128
}

fn process(w: &mut TextWriter, b: &Broker) {
    let m = &b.metrics;
    w.family(
        "weir_build_info",
        Kind::Gauge,
        "Always 1; the version label is the broker's version.",
    );
    w.sample(
        "weir_build_info",
        &[("version", env!("CARGO_PKG_VERSION"))],
        1.0,
    );
    w.family(
        "weir_start_time_seconds",
        Kind::Gauge,
        "Broker start time, seconds since the Unix epoch.",
    );
    w.sample(
        "weir_start_time_seconds",
        &[],
        m.start_time_unix_ms() as f64 / 1000.0,
    );
    w.family(
        "weir_uptime_seconds",
        Kind::Gauge,
        "Seconds since the broker opened its logs.",
    );
    w.sample("weir_uptime_seconds", &[], m.uptime().as_secs_f64());
    w.family(
        "weir_recovery_seconds",
        Kind::Gauge,
        "Time taken at start to open the logs, recovery of an unclean shutdown included.",
    );
    w.sample("weir_recovery_seconds", &[], m.recovery().as_secs_f64());
}

fn requests(w: &mut TextWriter, b: &Broker) {
    let m = &b.metrics;
    // supported APIs always appear (zero until used); others only once a
    // client sent one
    let mut keys: Vec<ApiKey> = crate::handler::SUPPORTED.iter().map(|s| s.0).collect();
    for k in 0..=i16::MAX {
        let Some(a) = m.api(k) else { break };
        if a.requests.load(Ordering::Relaxed) > 0
            && let Ok(key) = ApiKey::try_from(k)
            && !keys.contains(&key)
        {
            keys.push(key);
        }
    }
    keys.sort();
    let stats: Vec<(&str, &super::ApiStats)> = keys
        .iter()
        .filter_map(|k| m.api(*k as i16).map(|a| (k.name(), a)))
        .collect();
    w.family(
        "weir_requests_total",
        Kind::Counter,
        "Kafka requests received, by API.",
    );
    for (name, a) in &stats {
        w.sample_int("weir_requests_total", &[("api", name)], load(&a.requests));
    }
    w.family(
        "weir_request_failures_total",
        Kind::Counter,
        "Kafka requests that got no response (invalid request, unsupported version, or the connection failed while answering); the connection is closed.",
    );
    for (name, a) in &stats {
        w.sample_int(
            "weir_request_failures_total",
            &[("api", name)],
            load(&a.failures),
        );
    }
    response_errors(w, b);
    w.family(
        "weir_request_duration_seconds",
        Kind::Histogram,
        "Time from a complete request frame to its response written, by API.",
    );
    for (name, a) in &stats {
        w.histogram(
            "weir_request_duration_seconds",
            &[("api", name)],
            &a.latency.snapshot(),
        );
    }
    let rt = &b.metrics.runtime;
    w.family(
        "weir_runtime_schedule_delay_seconds",
        Kind::Histogram,
        "Time from spawning a probe task onto the async runtime to its start, sampled every 10 ms: long when workers are blocked or all busy.",
    );
    w.histogram(
        "weir_runtime_schedule_delay_seconds",
        &[],
        &rt.delay.snapshot(),
    );
    w.family(
        "weir_runtime_stalls_total",
        Kind::Counter,
        "Probes of the async runtime that waited more than 10 ms to start.",
    );
    w.sample_int("weir_runtime_stalls_total", &[], load(&rt.stalls));
    w.family(
        "weir_runtime_max_schedule_delay_seconds",
        Kind::Gauge,
        "The longest probe delay since the broker started.",
    );
    w.sample(
        "weir_runtime_max_schedule_delay_seconds",
        &[],
        rt.max_us.load(Ordering::Relaxed) as f64 / 1e6,
    );
    w.family(
        "weir_request_stage_seconds",
        Kind::Histogram,
        "Request time by stage (handle: to the handler's return, with a Produce's append; wait: a Produce waiting for its sync or its in-sync replicas; queue: behind earlier answers of the connection; write: to the socket), by API; only APIs that were used.",
    );
    for (name, a) in stats
        .iter()
        .filter(|(_, a)| a.requests.load(Ordering::Relaxed) > 0)
    {
        for (stage, h) in a.stages.named() {
            w.histogram(
                "weir_request_stage_seconds",
                &[("api", name), ("stage", stage)],
                &h.snapshot(),
            );
        }
    }
}

/// `weir_request_errors_total{api, error}`: only series that are non-zero.
fn response_errors(w: &mut TextWriter, b: &Broker) {
    let m = &b.metrics;
    w.family(
        "weir_request_errors_total",
        Kind::Counter,
        "Non-zero error codes in Kafka responses, by API and error (each occurrence: a Produce response with 3 failed partitions adds 3; NONE is not counted).",
    );
    for key in ApiKey::ALL {
        let Some(row) = m.response_errors(key as i16) else {
            continue;
        };
        for (slot, n) in row.iter().enumerate() {
            let n = n.load(Ordering::Relaxed);
            if n == 0 {
                continue;
            }
            w.sample_int(
                "weir_request_errors_total",
                &[
                    ("api", key.name()),
                    ("error", &super::error_slot_label(slot)),
                ],
                i128::from(n),
            );
        }
    }
}

fn network(w: &mut TextWriter, b: &Broker) {
    let m = &b.metrics;
    let counters = [
        (
            "weir_bytes_in_total",
            "Bytes of Kafka request frames received (size prefix included).",
            load(&m.bytes_in),
        ),
        (
            "weir_bytes_out_total",
            "Bytes of Kafka responses sent (size prefix and file data included).",
            load(&m.bytes_out),
        ),
        (
            "weir_sendfile_bytes_total",
            "Bytes of record data sent with sendfile(2) (part of weir_bytes_out_total).",
            crate::connection::SENDFILE_BYTES.load(Ordering::Relaxed) as i128,
        ),
        (
            "weir_connections_accepted_total",
            "Kafka connections accepted.",
            load(&m.connections_accepted),
        ),
        (
            "weir_connections_rejected_total",
            "Kafka connections closed at once because max.connections or max.connections.per.ip was reached.",
            load(&m.connections_rejected),
        ),
        (
            "weir_sasl_authentications_total",
            "SASL authentications that succeeded.",
            load(&m.sasl_authentications),
        ),
        (
            "weir_sasl_authentication_failures_total",
            "SASL authentications refused (the connection was closed).",
            load(&m.sasl_authentication_failures),
        ),
        (
            "weir_sasl_reauthentications_total",
            "SASL re-authentications (KIP-368, connections.max.reauth.ms) that succeeded.",
            load(&m.sasl_reauthentications),
        ),
        (
            "weir_sasl_sessions_expired_total",
            "Connections closed because their SASL session expired without a re-authentication.",
            load(&m.sasl_sessions_expired),
        ),
        (
            "weir_producer_state_loads_ahead_total",
            "Partitions' producer states loaded on a blocking thread before the idempotent produce that needed them.",
            load(&b.replicas.producer_loads().ahead),
        ),
        (
            "weir_producer_state_loads_inline_total",
            "Partitions' producer states loaded inline by the code that needed them (markers, transactional offsets, after a failed append).",
            load(&b.replicas.producer_loads().inline),
        ),
        (
            "weir_fetch_wakeups_total",
            "Parked fetches woken by an append to one of their partitions (each re-reads its partitions).",
            load(&m.fetch_wakeups),
        ),
        (
            "weir_http_requests_total",
            "Requests served by the HTTP listener (metrics and console).",
            load(&m.http_requests),
        ),
        (
            "weir_http_auth_failures_total",
            "HTTP requests refused with 401 for wrong basic-auth credentials (http.basic.auth.file).",
            load(&m.http_auth_failures),
        ),
    ];
    for (name, help, v) in counters {
        w.family(name, Kind::Counter, help);
        w.sample_int(name, &[], v);
    }
    w.family(
        "weir_connections_open",
        Kind::Gauge,
        "Kafka connections open now.",
    );
    w.sample_int("weir_connections_open", &[], m.open_connections() as i128);
    w.family(
        "weir_fetch_parked",
        Kind::Gauge,
        "Fetch requests waiting for data now (long polls up to max_wait_ms).",
    );
    w.sample_int("weir_fetch_parked", &[], m.parked_fetches() as i128);
    let gauges = [
        (
            "weir_request_memory_reserved_bytes",
            "Bytes of request frames being received or handled, reserved from queued.max.request.bytes.",
            load(&m.request_memory.reserved),
        ),
        (
            "weir_request_memory_waiting_connections",
            "Kafka connections waiting for room in queued.max.request.bytes before reading on.",
            load(&m.request_memory.waiting),
        ),
    ];
    for (name, help, v) in gauges {
        w.family(name, Kind::Gauge, help);
        w.sample_int(name, &[], v);
    }
}

fn partitions(w: &mut TextWriter, b: &Broker) {
    struct Row {
        topic: String,
        partition: String,
        values: [i128; 6],
    }
    let mut rows: Vec<Row> = b
        .replicas
        .logs()
        .logs()
        .iter()
        .map(|log| {
            let tp = log.topic_partition();
            Row {
                topic: tp.topic.clone(),
                partition: tp.partition.to_string(),
                values: [
                    log.log_start_offset() as i128,
                    log.high_watermark() as i128,
                    log.log_end_offset() as i128,
                    log.size_bytes() as i128,
                    log.segment_count() as i128,
                    log.damage().len() as i128,
                ],
            }
        })
        .collect();
    rows.sort_by(|a, b| {
        (&a.topic, a.partition.parse::<i32>().ok()).cmp(&(&b.topic, b.partition.parse().ok()))
    });
    // one family per column of `Row::values`
    let families: [(&str, &str); 6] = [
        (
            "weir_partition_log_start_offset",
            "Oldest offset still available in the partition.",
        ),
        (
            "weir_partition_high_watermark",
            "High watermark: consumers read below it.",
        ),
        (
            "weir_partition_log_end_offset",
            "Log end offset: the next offset to be written.",
        ),
        (
            "weir_partition_size_bytes",
            "Bytes of the partition's .log segment files.",
        ),
        (
            "weir_partition_segments",
            "Number of segments of the partition.",
        ),
        (
            "weir_partition_damaged_segments",
            "Segments of the partition found damaged (reads stop before the damage and fail at it).",
        ),
    ];
    for (i, (name, help)) in families.iter().enumerate() {
        w.family(name, Kind::Gauge, help);
        for r in &rows {
            if let Some(&value) = r.values.get(i) {
                w.sample_int(
                    name,
                    &[("topic", &r.topic), ("partition", &r.partition)],
                    value,
                );
            }
        }
    }
    w.family(
        "weir_partitions_offline",
        Kind::Gauge,
        "Partitions whose log failed to open.",
    );
    w.sample_int(
        "weir_partitions_offline",
        &[],
        b.replicas.logs().failed_logs().len() as i128,
    );
    w.family(
        "weir_log_dirs_offline",
        Kind::Gauge,
        "Log dirs taken offline at start (cannot be listed, or the clean-shutdown marker cannot be removed); DescribeLogDirs answers KAFKA_STORAGE_ERROR for them.",
    );
    w.sample_int(
        "weir_log_dirs_offline",
        &[],
        b.replicas.logs().offline_dirs().len() as i128,
    );
}

/// What the group metrics need, copied out under the coordinator's lock.
struct GroupRow {
    id: String,
    /// `classic` or `consumer` (KIP-848).
    group_type: &'static str,
    state: GroupState,
    members: usize,
    /// (topic, partition) → committed offset (the next offset to read).
    committed: BTreeMap<(String, i32), i64>,
}

/// The group rows and the coordinator's consumer-protocol epoch bumps.
fn group_rows(b: &Broker) -> (Vec<GroupRow>, u64) {
    let Some(groups) = b.groups() else {
        return (Vec::new(), 0);
    };
    // one shard (`__consumer_offsets` partition) locked at a time
    let mut rows: Vec<GroupRow> = Vec::new();
    let mut bumps = 0;
    groups.for_each_shard(|coordinator| {
        let listed = coordinator.list_groups(&[], &[]);
        let ids: Vec<String> = listed.iter().map(|g| g.group_id.clone()).collect();
        let consumer_ids: Vec<String> = listed
            .iter()
            .filter(|g| g.group_type == "consumer")
            .map(|g| g.group_id.clone())
            .collect();
        // DescribeGroups reports a consumer-protocol group Dead with no
        // members; ConsumerGroupDescribe has its members.
        let mut consumer_members: BTreeMap<String, usize> = coordinator
            .describe_consumer_groups(&consumer_ids)
            .into_iter()
            .map(|d| (d.group_id, d.members.len()))
            .collect();
        let described = coordinator.describe_groups(&ids);
        let fetch: Vec<OffsetFetchGroup> = ids
            .iter()
            .map(|id| OffsetFetchGroup {
                group_id: id.clone(),
                partitions: None,
            })
            .collect();
        let offsets = coordinator.fetch_offsets(&fetch);
        bumps += coordinator.consumer_epoch_bumps();
        rows.extend(
            listed
                .into_iter()
                .zip(described)
                .zip(offsets)
                .map(|((l, d), o)| GroupRow {
                    members: if l.group_type == "consumer" {
                        consumer_members.remove(&l.group_id).unwrap_or(0)
                    } else {
                        d.members.len()
                    },
                    id: l.group_id,
                    group_type: l.group_type,
                    state: l.state,
                    committed: o
                        .partitions
                        .into_iter()
                        .filter(|p| p.offset >= 0)
                        .map(|p| ((p.topic, p.partition), p.offset))
                        .collect(),
                }),
        );
    });
    rows.sort_by(|a, b| a.id.cmp(&b.id));
    (rows, bumps)
}

fn groups(w: &mut TextWriter, b: &Broker) {
    let (rows, bumps) = group_rows(b);
    w.family(
        "weir_group_type",
        Kind::Gauge,
        "1 for each group, labelled with its type: classic or consumer (KIP-848).",
    );
    for g in &rows {
        w.sample_int(
            "weir_group_type",
            &[("group", &g.id), ("type", g.group_type)],
            1,
        );
    }
    w.family(
        "weir_group_members",
        Kind::Gauge,
        "Members of a consumer group.",
    );
    for g in &rows {
        w.sample_int("weir_group_members", &[("group", &g.id)], g.members as i128);
    }
    w.family(
        "weir_group_state",
        Kind::Gauge,
        "1 for the group's current state, 0 for the others.",
    );
    for g in &rows {
        let states = if g.group_type == "consumer" {
            CONSUMER_STATES
        } else {
            CLASSIC_STATES
        };
        for s in states {
            let v = if s == g.state { 1 } else { 0 };
            w.sample_int(
                "weir_group_state",
                &[("group", &g.id), ("state", s.name())],
                v,
            );
        }
    }
    w.family(
        "weir_consumer_group_rebalances_total",
        Kind::Counter,
        "Group epoch bumps of consumer-protocol (KIP-848) groups coordinated here: a member joined, left, was fenced or changed its subscription, or the subscribed topics changed.",
    );
    w.sample_int("weir_consumer_group_rebalances_total", &[], bumps as i128);
    w.family(
        "weir_consumer_group_assignment_seconds",
        Kind::Histogram,
        "Time the server-side assignor took to compute a consumer-protocol group's target assignment.",
    );
    w.histogram(
        "weir_consumer_group_assignment_seconds",
        &[],
        &b.metrics.consumer_group_assignment.snapshot(),
    );
    // (group, topic, partition, committed, high watermark)
    let mut lag = Vec::new();
    for g in &rows {
        for ((topic, partition), committed) in &g.committed {
            if let Some(log) = b.replicas.log(topic, *partition) {
                lag.push((
                    g.id.as_str(),
                    topic.as_str(),
                    partition.to_string(),
                    *committed,
                    log.high_watermark(),
                ));
            }
        }
    }
    w.family(
        "weir_group_committed_offset",
        Kind::Gauge,
        "Committed offset (the next offset the group reads) per partition with a commit.",
    );
    for (g, t, p, c, _) in &lag {
        w.sample_int(
            "weir_group_committed_offset",
            &[("group", g), ("topic", t), ("partition", p)],
            *c as i128,
        );
    }
    w.family(
        "weir_group_lag",
        Kind::Gauge,
        "High watermark minus committed offset, per partition with a commit.",
    );
    for (g, t, p, c, hw) in &lag {
        w.sample_int(
            "weir_group_lag",
            &[("group", g), ("topic", t), ("partition", p)],
            *hw as i128 - *c as i128,
        );
    }
}

fn cleaner(w: &mut TextWriter, b: &Broker) {
    let Some(c) = b.metrics.cleaner() else {
        return;
    };
    let m = c.metrics();
    let counters = [
        (
            "weir_cleaner_cleanings_total",
            "Log cleanings completed.",
            &m.cleanings,
        ),
        (
            "weir_cleaner_failures_total",
            "Log cleanings that failed.",
            &m.failures,
        ),
        (
            "weir_cleaner_read_bytes_total",
            "Bytes read by the log cleaner.",
            &m.bytes_read,
        ),
        (
            "weir_cleaner_written_bytes_total",
            "Bytes written by the log cleaner.",
            &m.bytes_written,
        ),
        (
            "weir_cleaner_records_kept_total",
            "Records kept by log cleanings.",
            &m.records_kept,
        ),
        (
            "weir_cleaner_records_dropped_total",
            "Records dropped by log cleanings (older values and expired tombstones).",
            &m.records_dropped,
        ),
    ];
    for (name, help, v) in counters {
        w.family(name, Kind::Counter, help);
        w.sample_int(name, &[], load(v));
    }
    w.family(
        "weir_cleaner_last_duration_seconds",
        Kind::Gauge,
        "Duration of the last completed log cleaning.",
    );
    w.sample(
        "weir_cleaner_last_duration_seconds",
        &[],
        m.last_duration_ms.load(Ordering::Relaxed) as f64 / 1000.0,
    );
    w.family(
        "weir_cleaner_cleanings_in_progress",
        Kind::Gauge,
        "Logs being cleaned right now.",
    );
    w.sample_int(
        "weir_cleaner_cleanings_in_progress",
        &[],
        c.cleanings_in_progress() as i128,
    );
    let now = b.now_ms();
    let max_ratio = b
        .replicas
        .logs()
        .logs()
        .iter()
        .filter(|log| log.config().compact())
        .map(|log| {
            let s = log.clean_section(c.checkpoint_of(log.topic_partition()), now);
            let total = s.clean_bytes + s.dirty_bytes;
            if total == 0 {
                0.0
            } else {
                s.dirty_bytes as f64 / total as f64
            }
        })
        .fold(0.0f64, f64::max);
    w.family(
        "weir_cleaner_max_dirty_ratio",
        Kind::Gauge,
        "Highest dirty ratio (dirty bytes / cleanable bytes) among compacted partitions.",
    );
    w.sample("weir_cleaner_max_dirty_ratio", &[], max_ratio);
}

fn retention(w: &mut TextWriter, b: &Broker) {
    let r = &b.metrics.retention;
    let counters = [
        (
            "weir_retention_runs_total",
            "Retention checks run (every log.retention.check.interval.ms).",
            &r.runs,
        ),
        (
            "weir_retention_failures_total",
            "Retention checks or delayed unlinks that failed.",
            &r.failures,
        ),
        (
            "weir_retention_segments_deleted_total",
            "Segments deleted by retention.",
            &r.segments_deleted,
        ),
        (
            "weir_retention_deleted_bytes_total",
            "Bytes of .log files deleted by retention.",
            &r.bytes_deleted,
        ),
        (
            "weir_retention_files_unlinked_total",
            "Files renamed .deleted and unlinked after file.delete.delay.ms.",
            &r.files_unlinked,
        ),
    ];
    for (name, help, v) in counters {
        w.family(name, Kind::Counter, help);
        w.sample_int(name, &[], load(v));
    }
}
