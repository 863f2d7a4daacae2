//! Cross-check against an independent implementation, the `kafka-protocol`
//! crate: for every message and version both support, random values
//! encoded here must decode there and re-encode to the same bytes, and
//! decoding those bytes here must give back the original value.

use bytes::{Bytes, BytesMut};
use kafka_protocol::protocol::{
    Decodable as TheirDecodable, Encodable as TheirEncodable, Message as TheirMessage,
};
use weir_protocol::codec::arbitrary::{Random, Rng};
use weir_protocol::{Decodable, Encodable, Message};

const CASES: u64 = 32;

/// (message, version) pairs where the two implementations legitimately
/// differ, with the reason. Checked to be still needed (a listed pair that
/// passes fails the test), so the list cannot go stale.
const EXCLUDED: &[(&str, i16, &str)] = &[
    // kafka-protocol 0.18's generated decoder reads the message's own
    // `Version` field into a variable that shadows the protocol version and
    // then decodes the nested structs with it.
    ("LeaderChangeMessage", 0, SHADOWED_VERSION),
    ("LeaderChangeMessage", 1, SHADOWED_VERSION),
    ("VotersRecord", 0, SHADOWED_VERSION),
    // Unstable in the Kafka 4.0.0-SNAPSHOT definitions used here; Kafka
    // changed v0 (added `LeaderEpoch`) before releasing it, and
    // kafka-protocol follows the released schema.
    (
        "ReadShareGroupStateSummaryResponse",
        0,
        "unstable v0 changed before release",
    ),
];

const SHADOWED_VERSION: &str = "kafka-protocol shadows the version with the `Version` field";

/// Checks one message type in every version both sides support; returns
/// the number of versions checked.
fn check<Ours, Theirs>(failures: &mut Vec<String>) -> usize
where
    Ours: Message + Encodable + Decodable + Random + PartialEq + std::fmt::Debug,
    Theirs: TheirMessage + TheirEncodable + TheirDecodable,
{
    let (lo, hi) = Ours::VALID_VERSIONS;
    let lo = lo.max(Theirs::VERSIONS.min);
    let hi = hi.min(Theirs::VERSIONS.max);
    let mut checked = 0;
    for version in lo..=hi {
        let excluded = EXCLUDED
            .iter()
            .any(|(n, v, _)| *n == Ours::NAME && *v == version);
        match check_version::<Ours, Theirs>(version) {
            Ok(()) if excluded => {
                failures.push(format!("{} v{version}: excluded but agrees", Ours::NAME))
            }
            Ok(()) => checked += 1,
            Err(_) if excluded => {}
            Err(e) => failures.push(format!("{} v{version}: {e}", Ours::NAME)),
        }
    }
    checked
}

fn check_version<Ours, Theirs>(version: i16) -> Result<(), String>
where
    Ours: Message + Encodable + Decodable + Random + PartialEq + std::fmt::Debug,
    Theirs: TheirMessage + TheirEncodable + TheirDecodable,
{
    for case in 0..CASES {
        let mut rng = Rng(0xc0ffee ^ (u64::from(version as u16) << 40) ^ case);
        let ours = Ours::random(&mut rng, version);
        let mut buf = BytesMut::new();
        ours.encode(&mut buf, version)
            .map_err(|e| format!("case {case}: our encode: {e}"))?;
        let ours_bytes = buf.freeze();

        let mut input: Bytes = ours_bytes.clone();
        let theirs = Theirs::decode(&mut input, version)
            .map_err(|e| format!("case {case}: their decode of {ours_bytes:?}: {e}"))?;
        if !input.is_empty() {
            return Err(format!("case {case}: they left {} bytes", input.len()));
        }
        let mut buf = BytesMut::new();
        theirs
            .encode(&mut buf, version)
            .map_err(|e| format!("case {case}: their encode: {e}"))?;
        let theirs_bytes = buf.freeze();
        if theirs_bytes != ours_bytes {
            return Err(format!(
                "case {case}: bytes differ\n ours:   {ours_bytes:?}\n theirs: {theirs_bytes:?}"
            ));
        }
        let mut input = theirs_bytes;
        let back = Ours::decode(&mut input, version)
            .map_err(|e| format!("case {case}: our decode of their bytes: {e}"))?;
        if back != ours {
            return Err(format!(
                "case {case}: decoded value differs: {back:?} vs {ours:?}"
            ));
        }
    }
    Ok(())
}

macro_rules! all {
    ($($t:ident),* $(,)?) => {{
        let mut failures = Vec::new();
        let mut pairs = 0;
        let mut messages = 0;
        $(
            pairs += check::<weir_protocol::messages::$t, kafka_protocol::messages::$t>(&mut failures);
            messages += 1;
        )*
        (pairs, messages, failures)
    }};
}

#[test]
fn agrees_with_kafka_protocol_crate() {
    // The messages both implementations define.
    let (pairs, messages, failures) = all!(
        AddOffsetsToTxnRequest,
        AddOffsetsToTxnResponse,
        AddPartitionsToTxnRequest,
        AddPartitionsToTxnResponse,
        AddRaftVoterRequest,
        AddRaftVoterResponse,
        AllocateProducerIdsRequest,
        AllocateProducerIdsResponse,
        AlterClientQuotasRequest,
        AlterClientQuotasResponse,
        AlterConfigsRequest,
        AlterConfigsResponse,
        AlterPartitionReassignmentsRequest,
        AlterPartitionReassignmentsResponse,
        AlterPartitionRequest,
        AlterPartitionResponse,
        AlterReplicaLogDirsRequest,
        AlterReplicaLogDirsResponse,
        AlterUserScramCredentialsRequest,
        AlterUserScramCredentialsResponse,
        ApiVersionsRequest,
        ApiVersionsResponse,
        AssignReplicasToDirsRequest,
        AssignReplicasToDirsResponse,
        BeginQuorumEpochRequest,
        BeginQuorumEpochResponse,
        BrokerHeartbeatRequest,
        BrokerHeartbeatResponse,
        BrokerRegistrationRequest,
        BrokerRegistrationResponse,
        ConsumerGroupDescribeRequest,
        ConsumerGroupDescribeResponse,
        ConsumerGroupHeartbeatRequest,
        ConsumerGroupHeartbeatResponse,
        ConsumerProtocolAssignment,
        ConsumerProtocolSubscription,
        ControllerRegistrationRequest,
        ControllerRegistrationResponse,
        CreateAclsRequest,
        CreateAclsResponse,
        CreateDelegationTokenRequest,
        CreateDelegationTokenResponse,
        CreatePartitionsRequest,
        CreatePartitionsResponse,
        CreateTopicsRequest,
        CreateTopicsResponse,
        DefaultPrincipalData,
        DeleteAclsRequest,
        DeleteAclsResponse,
        DeleteGroupsRequest,
        DeleteGroupsResponse,
        DeleteRecordsRequest,
        DeleteRecordsResponse,
        DeleteShareGroupStateRequest,
        DeleteShareGroupStateResponse,
        DeleteTopicsRequest,
        DeleteTopicsResponse,
        DescribeAclsRequest,
        DescribeAclsResponse,
        DescribeClientQuotasRequest,
        DescribeClientQuotasResponse,
        DescribeClusterRequest,
        DescribeClusterResponse,
        DescribeConfigsRequest,
        DescribeConfigsResponse,
        DescribeDelegationTokenRequest,
        DescribeDelegationTokenResponse,
        DescribeGroupsRequest,
        DescribeGroupsResponse,
        DescribeLogDirsRequest,
        DescribeLogDirsResponse,
        DescribeProducersRequest,
        DescribeProducersResponse,
        DescribeQuorumRequest,
        DescribeQuorumResponse,
        DescribeTopicPartitionsRequest,
        DescribeTopicPartitionsResponse,
        DescribeTransactionsRequest,
        DescribeTransactionsResponse,
        DescribeUserScramCredentialsRequest,
        DescribeUserScramCredentialsResponse,
        ElectLeadersRequest,
        ElectLeadersResponse,
        EndQuorumEpochRequest,
        EndQuorumEpochResponse,
        EndTxnRequest,
        EndTxnResponse,
        EnvelopeRequest,
        EnvelopeResponse,
        ExpireDelegationTokenRequest,
        ExpireDelegationTokenResponse,
        FetchRequest,
        FetchResponse,
        FetchSnapshotRequest,
        FetchSnapshotResponse,
        FindCoordinatorRequest,
        FindCoordinatorResponse,
        GetTelemetrySubscriptionsRequest,
        GetTelemetrySubscriptionsResponse,
        HeartbeatRequest,
        HeartbeatResponse,
        IncrementalAlterConfigsRequest,
        IncrementalAlterConfigsResponse,
        InitProducerIdRequest,
        InitProducerIdResponse,
        InitializeShareGroupStateRequest,
        InitializeShareGroupStateResponse,
        JoinGroupRequest,
        JoinGroupResponse,
        KRaftVersionRecord,
        LeaderChangeMessage,
        LeaveGroupRequest,
        LeaveGroupResponse,
        ListGroupsRequest,
        ListGroupsResponse,
        ListOffsetsRequest,
        ListOffsetsResponse,
        ListPartitionReassignmentsRequest,
        ListPartitionReassignmentsResponse,
        ListTransactionsRequest,
        ListTransactionsResponse,
        MetadataRequest,
        MetadataResponse,
        OffsetCommitRequest,
        OffsetCommitResponse,
        OffsetDeleteRequest,
        OffsetDeleteResponse,
        OffsetFetchRequest,
        OffsetFetchResponse,
        OffsetForLeaderEpochRequest,
        OffsetForLeaderEpochResponse,
        ProduceRequest,
        ProduceResponse,
        PushTelemetryRequest,
        PushTelemetryResponse,
        ReadShareGroupStateRequest,
        ReadShareGroupStateResponse,
        ReadShareGroupStateSummaryRequest,
        ReadShareGroupStateSummaryResponse,
        RemoveRaftVoterRequest,
        RemoveRaftVoterResponse,
        RenewDelegationTokenRequest,
        RenewDelegationTokenResponse,
        RequestHeader,
        ResponseHeader,
        SaslAuthenticateRequest,
        SaslAuthenticateResponse,
        SaslHandshakeRequest,
        SaslHandshakeResponse,
        ShareAcknowledgeRequest,
        ShareAcknowledgeResponse,
        ShareFetchRequest,
        ShareFetchResponse,
        ShareGroupDescribeRequest,
        ShareGroupDescribeResponse,
        ShareGroupHeartbeatRequest,
        ShareGroupHeartbeatResponse,
        SnapshotFooterRecord,
        SnapshotHeaderRecord,
        SyncGroupRequest,
        SyncGroupResponse,
        TxnOffsetCommitRequest,
        TxnOffsetCommitResponse,
        UnregisterBrokerRequest,
        UnregisterBrokerResponse,
        UpdateFeaturesRequest,
        UpdateFeaturesResponse,
        UpdateRaftVoterRequest,
        UpdateRaftVoterResponse,
        VoteRequest,
        VoteResponse,
        VotersRecord,
        WriteShareGroupStateRequest,
        WriteShareGroupStateResponse,
        WriteTxnMarkersRequest,
        WriteTxnMarkersResponse
    );
    eprintln!(
        "cross-checked {pairs} (message, version) pairs of {messages} messages against kafka-protocol ({CASES} random values each); {} pairs excluded",
        EXCLUDED.len()
    );
    for (name, version, why) in EXCLUDED {
        eprintln!("excluded {name} v{version}: {why}");
    }
    for f in &failures {
        eprintln!("MISMATCH {f}");
    }
    assert!(failures.is_empty(), "{} mismatches", failures.len());
    assert!(pairs > 500);
}
