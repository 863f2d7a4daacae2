//! Where quotas meet the connection: what an answered request is charged
//! ([`Charge`]), the throttle time that results ([`apply`]), and putting
//! it into the answer's `throttle_time_ms` ([`set_throttle_time`]). The
//! connection then reads nothing more from the client for that long
//! (KIP-219: the answer goes out at once and the client is expected to
//! wait as well).

use weir_protocol::messages::{ApiKey, FetchResponse, RequestBody, ResponseBody};

use super::{QuotaStore, QuotaType};
use crate::handler::Reply;
use crate::session::Session;

/// What a request costs against its client's quotas, noted before its
/// body goes to the handler.
#[derive(Debug)]
pub struct Charge {
    pub client_id: String,
    /// A Produce request: its size in bytes.
    produce_bytes: Option<usize>,
    /// A consumer's Fetch (a follower's fetches are not charged).
    consumer_fetch: bool,
    /// Whether the request counts against `request_percentage`.
    request_time: bool,
    /// Time the handler ran (polls of its future), in nanoseconds.
    pub handler_nanos: u64,
}

impl Charge {
    /// The charge of `body` (of `size` bytes, header included) for
    /// `client_id`; None for requests no quota applies to: a follower's
    /// fetches, the SASL exchange and broker-to-broker requests.
    pub fn of(body: &RequestBody, version: i16, size: usize, client_id: String) -> Option<Charge> {
        let mut charge = Charge {
            client_id,
            produce_bytes: None,
            consumer_fetch: false,
            request_time: true,
            handler_nanos: 0,
        };
        match body {
            RequestBody::Produce(_) => charge.produce_bytes = Some(size),
            RequestBody::Fetch(r) => {
                let replica = if version >= 15 {
                    r.replica_state.replica_id
                } else {
                    r.replica_id
                };
                if replica >= 0 {
                    return None;
                }
                charge.consumer_fetch = true;
            }
            RequestBody::SaslHandshake(_)
            | RequestBody::SaslAuthenticate(_)
            | RequestBody::WriteTxnMarkers(_) => return None,
            _ => {}
        }
        Some(charge)
    }

    /// Whether the handler's time needs measuring.
    pub fn times_handler(&self, store: &QuotaStore) -> bool {
        self.request_time && store.has(QuotaType::Request)
    }
}

/// Record bytes of a Fetch answer: its inline records and the file
/// regions to be spliced in (a 16-byte `records` field is a file marker;
/// a record batch is never that short).
fn fetched_bytes(reply: &Reply) -> Option<usize> {
    let (body, files) = match reply {
        Reply::Body(b) => (b, 0),
        Reply::WithFiles { body, files } => (
            body,
            files
                .iter()
                .flat_map(|(_, r)| r)
                .map(weir_storage::FileRegion::len)
                .sum(),
        ),
        _ => return None,
    };
    let ResponseBody::Fetch(f) = body else {
        return None;
    };
    let inline: usize = f
        .responses
        .iter()
        .flat_map(|t| &t.partitions)
        .filter_map(|p| p.records.as_ref())
        .map(|r| r.len())
        .filter(|&n| n != 16)
        .sum();
    Some(inline + files)
}

/// Records `charge` against the quotas of `session`'s user at `now_ms`
/// (Kafka's `KafkaApis` order: bandwidth, then request time) and returns
/// the throttle time, 0 when within every quota. A throttled consumer
/// fetch is answered with no data (and its bytes are taken back), as
/// Kafka answers it; the throttle time is set in the answer.
pub fn apply(
    store: &QuotaStore,
    session: &Session,
    key: ApiKey,
    charge: &Charge,
    reply: &mut Reply,
    now_ms: i64,
) -> i64 {
    let user = session.principal.name.as_str();
    let client = charge.client_id.as_str();
    let mut bandwidth = (QuotaType::Produce, 0);
    if let Some(bytes) = charge.produce_bytes {
        let t = store.record(QuotaType::Produce, user, client, bytes as f64, now_ms);
        bandwidth = (QuotaType::Produce, t);
    }
    let mut fetched = 0;
    if charge.consumer_fetch && store.has(QuotaType::Fetch) {
        fetched = fetched_bytes(reply).unwrap_or(0);
        let t = store.record(QuotaType::Fetch, user, client, fetched as f64, now_ms);
        bandwidth = (QuotaType::Fetch, t);
    }
    // acks=0 (no answer) is not charged request time, as in Kafka
    let request = if charge.request_time && !matches!(reply, Reply::None) {
        let percent_seconds = charge.handler_nanos as f64 * 100.0 / 1e9;
        store.record(QuotaType::Request, user, client, percent_seconds, now_ms)
    } else {
        0
    };
    let throttle = bandwidth.1.max(request);
    if throttle <= 0 {
        return 0;
    }
    store.count_throttle(
        if bandwidth.1 > request {
            bandwidth.0
        } else {
            QuotaType::Request
        },
        throttle,
    );
    let ms = i32::try_from(throttle).unwrap_or(i32::MAX);
    if charge.consumer_fetch && key == ApiKey::Fetch {
        store.unrecord(QuotaType::Fetch, user, client, fetched as f64, now_ms);
        *reply = Reply::Body(ResponseBody::Fetch(FetchResponse {
            throttle_time_ms: ms,
            ..Default::default()
        }));
        return throttle;
    }
    if let Reply::Body(body) | Reply::WithFiles { body, .. } = reply {
        set_throttle_time(body, ms);
    }
    throttle
}

/// Sets `throttle_time_ms` in any response that has the field (encoded
/// only in the versions that carry it); false for the few that have none
/// (SASL, broker-to-broker).
pub fn set_throttle_time(body: &mut ResponseBody, ms: i32) -> bool {
    macro_rules! with_throttle {
        ($($v:ident),* $(,)?) => {
            match body {
                $(ResponseBody::$v(r) => {
                    r.throttle_time_ms = ms;
                    true
                })*
                _ => false,
            }
        };
    }
    with_throttle!(
        Produce,
        Fetch,
        ListOffsets,
        Metadata,
        OffsetCommit,
        OffsetFetch,
        FindCoordinator,
        JoinGroup,
        Heartbeat,
        LeaveGroup,
        SyncGroup,
        DescribeGroups,
        ListGroups,
        ApiVersions,
        CreateTopics,
        DeleteTopics,
        DeleteRecords,
        InitProducerId,
        OffsetForLeaderEpoch,
        AddPartitionsToTxn,
        AddOffsetsToTxn,
        EndTxn,
        TxnOffsetCommit,
        DescribeAcls,
        CreateAcls,
        DeleteAcls,
        DescribeConfigs,
        AlterConfigs,
        AlterReplicaLogDirs,
        DescribeLogDirs,
        CreatePartitions,
        CreateDelegationToken,
        RenewDelegationToken,
        ExpireDelegationToken,
        DescribeDelegationToken,
        DeleteGroups,
        ElectLeaders,
        IncrementalAlterConfigs,
        AlterPartitionReassignments,
        ListPartitionReassignments,
        OffsetDelete,
        DescribeClientQuotas,
        AlterClientQuotas,
        DescribeUserScramCredentials,
        AlterUserScramCredentials,
        AlterPartition,
        UpdateFeatures,
        FetchSnapshot,
        DescribeCluster,
        DescribeProducers,
        BrokerRegistration,
        BrokerHeartbeat,
        UnregisterBroker,
        DescribeTransactions,
        ListTransactions,
        AllocateProducerIds,
        ConsumerGroupHeartbeat,
        ConsumerGroupDescribe,
        ControllerRegistration,
        GetTelemetrySubscriptions,
        PushTelemetry,
        AssignReplicasToDirs,
        ListClientMetricsResources,
        DescribeTopicPartitions,
        ShareGroupHeartbeat,
        ShareGroupDescribe,
        ShareFetch,
        ShareAcknowledge,
        AddRaftVoter,
        RemoveRaftVoter,
        UpdateRaftVoter,
    )
}

/// A future that adds up the time spent in its polls: the time a
/// handler actually ran, without the time it waited (a long-polling
/// fetch, a produce waiting for replicas).
pub struct Timed<'a, F> {
    inner: std::pin::Pin<Box<F>>,
    nanos: &'a mut u64,
}

impl<'a, F> Timed<'a, F> {
    pub fn new(inner: F, nanos: &'a mut u64) -> Self {
        Timed {
            inner: Box::pin(inner),
            nanos,
        }
    }
}

impl<F: std::future::Future> std::future::Future for Timed<'_, F> {
    type Output = F::Output;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let started = std::time::Instant::now();
        let r = self.inner.as_mut().poll(cx);
        *self.nanos += started.elapsed().as_nanos() as u64;
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use weir_protocol::messages::ProduceResponse;

    #[test]
    fn throttle_time_is_set_on_the_responses_that_have_it() {
        let mut b = ResponseBody::Produce(ProduceResponse::default());
        assert!(set_throttle_time(&mut b, 250));
        let ResponseBody::Produce(p) = &b else {
            unreachable!()
        };
        assert_eq!(p.throttle_time_ms, 250);
        let mut f = ResponseBody::Fetch(FetchResponse::default());
        assert!(set_throttle_time(&mut f, 7));
        let mut s = ResponseBody::SaslHandshake(Default::default());
        assert!(!set_throttle_time(&mut s, 7));
    }
}
