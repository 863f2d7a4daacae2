//! Request handlers, one file per API. Each takes the decoded request and
//! returns the response body; the connection encodes it.

use std::net::SocketAddr;
use std::sync::Arc;

use weir_protocol::messages::{ApiKey, RequestBody, ResponseBody};
use weir_storage::FileRegion;

use crate::broker::Broker;
use crate::connection::Marker;

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_client_quotas;
pub mod alter_partition_reassignments;
pub mod alter_user_scram_credentials;
pub mod api_versions;
pub mod configs;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_client_quotas;
pub mod describe_cluster;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_transactions;
pub mod describe_user_scram_credentials;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub mod produce;
pub mod sasl;
pub mod sync_group;
pub mod txn_offset_commit;
pub mod write_txn_markers;

/// What a handler gives back.
pub enum Reply {
    /// No response (Produce with acks=0).
    None,
    Body(ResponseBody),
    /// A Fetch response whose `records` fields hold markers to be replaced
    /// by file regions (sent with sendfile).
    WithFiles {
        body: ResponseBody,
        files: Vec<(Marker, Vec<FileRegion>)>,
    },
    /// Close the connection (Kafka closes on requests it cannot parse).
    Close(String),
    /// The answer once work already started has finished (a produce's
    /// syncs). The connection keeps reading and appending later Produce
    /// requests meanwhile and sends answers in request order.
    Later(std::pin::Pin<Box<dyn std::future::Future<Output = Reply> + Send>>),
}

/// Everything a handler may need about the request besides its body.
pub struct RequestContext {
    pub broker: Arc<Broker>,
    pub api_key: ApiKey,
    pub api_version: i16,
    pub correlation_id: i32,
    pub client_id: String,
    pub peer: SocketAddr,
    pub local: Option<SocketAddr>,
    /// The connection's listener and authenticated principal.
    pub session: Arc<crate::session::Session>,
    /// Becomes true when the broker shuts down (ends long polls early).
    pub shutdown: tokio::sync::watch::Receiver<bool>,
}

impl RequestContext {
    /// May this request's client perform `op` on the resource (always,
    /// without an authorizer)? See [`crate::acls`].
    pub fn authorize(
        &self,
        op: weir_acl::Operation,
        rt: weir_acl::ResourceType,
        name: &str,
    ) -> bool {
        self.broker.acls.authorize(&self.session, op, rt, name)
    }

    /// May this request's client perform `op` on the cluster resource?
    pub fn authorize_cluster(&self, op: weir_acl::Operation) -> bool {
        self.authorize(op, weir_acl::ResourceType::Cluster, weir_acl::CLUSTER_NAME)
    }

    /// May this request's client perform `op` on some resource of type
    /// `rt` (Kafka's `authorizeByResourceType`)?
    pub fn authorize_any(&self, op: weir_acl::Operation, rt: weir_acl::ResourceType) -> bool {
        self.broker.acls.authorize_any(&self.session, op, rt)
    }

    /// Where a client of this connection reaches broker `n`: its endpoint
    /// of the listener the client came in on, as Kafka answers (for this
    /// broker the connection's advertised address); None when `n` has no
    /// listener of that name, and the answer must leave it out.
    pub fn node_address(
        &self,
        snap: &crate::cluster::ClusterSnapshot,
        n: &crate::cluster::BrokerNode,
    ) -> Option<(String, i32)> {
        snap.client_endpoint(n, self.broker.config.node_id, &self.session.listener)
            .map(|(host, port)| (host, i32::from(port)))
    }
}

/// Supported versions: Kafka 4.0's minimums (KIP-896 removed older ones),
/// up to the newest version in the message definitions.
pub const SUPPORTED: &[(ApiKey, i16, i16)] = &[
    (ApiKey::Produce, 3, 11),
    (ApiKey::Fetch, 4, 17),
    (ApiKey::ListOffsets, 1, 10),
    (ApiKey::Metadata, 0, 12),
    (ApiKey::ApiVersions, 0, 4),
    (ApiKey::CreateTopics, 2, 7),
    (ApiKey::DeleteTopics, 1, 6),
    (ApiKey::DeleteRecords, 0, 2),
    (ApiKey::InitProducerId, 0, 5),
    (ApiKey::DescribeConfigs, 1, 4),
    (ApiKey::AlterConfigs, 0, 2),
    (ApiKey::DescribeLogDirs, 1, 4),
    (ApiKey::CreatePartitions, 0, 3),
    (ApiKey::ElectLeaders, 0, 2),
    (ApiKey::AlterPartitionReassignments, 0, 0),
    (ApiKey::ListPartitionReassignments, 0, 0),
    (ApiKey::IncrementalAlterConfigs, 0, 1),
    (ApiKey::DescribeCluster, 0, 1),
    (ApiKey::FindCoordinator, 1, 6),
    (ApiKey::JoinGroup, 2, 9),
    (ApiKey::SyncGroup, 0, 5),
    (ApiKey::Heartbeat, 0, 4),
    (ApiKey::LeaveGroup, 0, 5),
    (ApiKey::OffsetCommit, 2, 9),
    (ApiKey::OffsetFetch, 1, 9),
    (ApiKey::ListGroups, 0, 5),
    (ApiKey::DescribeGroups, 0, 5),
    (ApiKey::DeleteGroups, 0, 2),
    (ApiKey::OffsetDelete, 0, 0),
    (ApiKey::OffsetForLeaderEpoch, 2, 4),
    (ApiKey::TxnOffsetCommit, 0, 4),
    // Consumer-protocol groups (KIP-848).
    (ApiKey::ConsumerGroupHeartbeat, 0, 1),
    (ApiKey::ConsumerGroupDescribe, 0, 0),
    // The transaction coordinator. EndTxn stays at v4: v5 would put
    // clients on transaction version 2 (KIP-890 part 2).
    (ApiKey::AddPartitionsToTxn, 0, 5),
    (ApiKey::AddOffsetsToTxn, 0, 4),
    (ApiKey::EndTxn, 0, 4),
    (ApiKey::DescribeTransactions, 0, 0),
    (ApiKey::ListTransactions, 0, 1),
    // SASL (crate::sasl::gate before authentication). Handshake v0, with
    // raw SASL tokens instead of SaslAuthenticate, is not served.
    (ApiKey::SaslHandshake, 1, 1),
    (ApiKey::SaslAuthenticate, 0, 2),
    // SCRAM credentials set at run time (crate::scram_credentials).
    (ApiKey::DescribeUserScramCredentials, 0, 0),
    (ApiKey::AlterUserScramCredentials, 0, 0),
    // ACLs (crate::acls); v0 (literal patterns only) is gone in Kafka 4.
    (ApiKey::CreateAcls, 1, 3),
    (ApiKey::DescribeAcls, 1, 3),
    (ApiKey::DeleteAcls, 1, 3),
    // Client quotas (crate::quotas).
    (ApiKey::DescribeClientQuotas, 0, 1),
    (ApiKey::AlterClientQuotas, 0, 1),
    // Broker to broker: Kafka 4 keeps only v1 (KIP-896).
    (ApiKey::WriteTxnMarkers, 1, 1),
];

pub fn supported_range(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED
        .iter()
        .find(|(k, _, _)| *k == key)
        .map(|(_, lo, hi)| {
            // never claim more than the codec can encode
            let (clo, chi) = key.valid_versions();
            ((*lo).max(clo), (*hi).min(chi))
        })
}

pub fn is_supported(key: ApiKey, version: i16) -> bool {
    supported_range(key).is_some_and(|(lo, hi)| (lo..=hi).contains(&version))
}

/// Runs synchronous file work (creating or deleting partition directories,
/// fsyncs) without stalling the other tasks of this runtime worker: on a
/// multi-threaded runtime via `block_in_place`, otherwise inline.
pub fn blocking<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => tokio::task::block_in_place(f),
        _ => f(),
    }
}

/// Answers one request and counts the error codes of its response
/// (`weir_request_errors_total`).
pub async fn handle(ctx: &RequestContext, body: RequestBody) -> Reply {
    let reply = dispatch(ctx, body).await;
    if let Reply::Later(fut) = reply {
        let broker = ctx.broker.clone();
        let key = ctx.api_key as i16;
        return Reply::Later(Box::pin(async move {
            let reply = fut.await;
            record_errors(&broker, key, &reply);
            reply
        }));
    }
    record_errors(&ctx.broker, ctx.api_key as i16, &reply);
    reply
}

fn record_errors(broker: &Broker, key: i16, reply: &Reply) {
    if let Reply::Body(body) | Reply::WithFiles { body, .. } = reply {
        broker.metrics.record_response_errors(key, body);
    }
}

async fn dispatch(ctx: &RequestContext, body: RequestBody) -> Reply {
    match body {
        RequestBody::ApiVersions(r) => api_versions::handle(ctx, r),
        RequestBody::Metadata(r) => metadata::handle(ctx, r).await,
        RequestBody::Produce(r) => produce::handle(ctx, r).await,
        RequestBody::Fetch(r) => fetch::handle(ctx, r).await,
        RequestBody::ListOffsets(r) => list_offsets::handle(ctx, r),
        RequestBody::CreateTopics(r) => create_topics::handle(ctx, r).await,
        RequestBody::DeleteTopics(r) => delete_topics::handle(ctx, r).await,
        RequestBody::CreatePartitions(r) => create_partitions::handle(ctx, r).await,
        RequestBody::ElectLeaders(r) => elect_leaders::handle(ctx, r).await,
        RequestBody::AlterPartitionReassignments(r) => {
            alter_partition_reassignments::handle(ctx, r).await
        }
        RequestBody::ListPartitionReassignments(r) => {
            list_partition_reassignments::handle(ctx, r).await
        }
        RequestBody::DeleteRecords(r) => delete_records::handle(ctx, r),
        RequestBody::InitProducerId(r) => init_producer_id::handle(ctx, r).await,
        RequestBody::DescribeConfigs(r) => configs::describe(ctx, r),
        RequestBody::AlterConfigs(r) => configs::alter(ctx, r).await,
        RequestBody::IncrementalAlterConfigs(r) => configs::incremental_alter(ctx, r).await,
        RequestBody::DescribeLogDirs(r) => describe_log_dirs::handle(ctx, r),
        RequestBody::DescribeCluster(r) => describe_cluster::handle(ctx, r),
        RequestBody::FindCoordinator(r) => find_coordinator::handle(ctx, r).await,
        RequestBody::JoinGroup(r) => join_group::handle(ctx, r).await,
        RequestBody::SyncGroup(r) => sync_group::handle(ctx, r).await,
        RequestBody::Heartbeat(r) => heartbeat::handle(ctx, r),
        RequestBody::LeaveGroup(r) => leave_group::handle(ctx, r).await,
        RequestBody::OffsetCommit(r) => offset_commit::handle(ctx, r).await,
        RequestBody::OffsetFetch(r) => offset_fetch::handle(ctx, r),
        RequestBody::ListGroups(r) => list_groups::handle(ctx, r),
        RequestBody::DescribeGroups(r) => describe_groups::handle(ctx, r),
        RequestBody::DeleteGroups(r) => delete_groups::handle(ctx, r).await,
        RequestBody::ConsumerGroupHeartbeat(r) => consumer_group_heartbeat::handle(ctx, r).await,
        RequestBody::ConsumerGroupDescribe(r) => consumer_group_describe::handle(ctx, r),
        RequestBody::OffsetDelete(r) => offset_delete::handle(ctx, r).await,
        RequestBody::OffsetForLeaderEpoch(r) => offset_for_leader_epoch::handle(ctx, r),
        RequestBody::TxnOffsetCommit(r) => txn_offset_commit::handle(ctx, r).await,
        RequestBody::AddPartitionsToTxn(r) => add_partitions_to_txn::handle(ctx, r).await,
        RequestBody::AddOffsetsToTxn(r) => add_offsets_to_txn::handle(ctx, r).await,
        RequestBody::EndTxn(r) => end_txn::handle(ctx, r).await,
        RequestBody::DescribeTransactions(r) => describe_transactions::handle(ctx, r),
        RequestBody::ListTransactions(r) => list_transactions::handle(ctx, r),
        RequestBody::WriteTxnMarkers(r) => write_txn_markers::handle(ctx, r).await,
        RequestBody::CreateAcls(r) => acls::create(ctx, r),
        RequestBody::DescribeAcls(r) => acls::describe(ctx, r),
        RequestBody::DeleteAcls(r) => acls::delete(ctx, r),
        RequestBody::DescribeClientQuotas(r) => describe_client_quotas::handle(ctx, r),
        RequestBody::AlterClientQuotas(r) => alter_client_quotas::handle(ctx, r).await,
        RequestBody::SaslHandshake(r) => sasl::handshake(ctx, r),
        RequestBody::SaslAuthenticate(r) => sasl::authenticate(ctx, r),
        RequestBody::DescribeUserScramCredentials(r) => {
            describe_user_scram_credentials::handle(ctx, r)
        }
        RequestBody::AlterUserScramCredentials(r) => {
            alter_user_scram_credentials::handle(ctx, r).await
        }
        other => Reply::Close(format!("unsupported request {:?}", other.api_key())),
    }
}
