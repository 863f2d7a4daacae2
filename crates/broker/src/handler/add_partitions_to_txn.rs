//! AddPartitionsToTxn: the partitions a transactional producer is about to
//! write to join its transaction (durable in `__transaction_state` before
//! the answer). v0-3 come from clients, one transaction per request; v4+
//! from partition leaders, a batch of transactions, each either added or
//! only verified (`verify_only`).
//!
//! As Kafka's request layer: a partition of a topic that does not exist is
//! UNKNOWN_TOPIC_OR_PARTITION, one of an internal topic (from a client)
//! TOPIC_AUTHORIZATION_FAILED, and then every other partition of that
//! transaction OPERATION_NOT_ATTEMPTED; otherwise every partition gets the
//! coordinator's answer. v0-1 clients get INVALID_PRODUCER_EPOCH where
//! newer ones get PRODUCER_FENCED.

use std::collections::BTreeSet;

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use weir_protocol::messages::add_partitions_to_txn_response::{
    AddPartitionsToTxnPartitionResult, AddPartitionsToTxnResult, AddPartitionsToTxnTopicResult,
};
use weir_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ResponseBody,
};
use weir_txn::{Step, TopicPartition};

use super::{Reply, RequestContext};

/// The first version whose clients know PRODUCER_FENCED.
const FENCED_SINCE: i16 = 2;
/// The first version of the batched, broker-to-broker form.
const BATCHED_SINCE: i16 = 4;

pub async fn handle(ctx: &RequestContext, req: AddPartitionsToTxnRequest) -> Reply {
    let v = ctx.api_version;
    if v < BATCHED_SINCE {
        let results = one(
            ctx,
            &req.v3_and_below_transactional_id,
            req.v3_and_below_producer_id,
            req.v3_and_below_producer_epoch,
            false,
            &req.v3_and_below_topics,
        )
        .await;
        return Reply::Body(ResponseBody::AddPartitionsToTxn(
            AddPartitionsToTxnResponse {
                results_by_topic_v3_and_below: by_topic(results),
                ..Default::default()
            },
        ));
    }
    // the batched form comes from brokers verifying a produce: Kafka asks
    // for CLUSTER_ACTION and refuses the whole request
    if !ctx.authorize_cluster(Operation::ClusterAction) {
        return Reply::Body(ResponseBody::AddPartitionsToTxn(
            AddPartitionsToTxnResponse {
                error_code: ErrorCode::ClusterAuthorizationFailed.code(),
                ..Default::default()
            },
        ));
    }
    let mut results_by_transaction = Vec::with_capacity(req.transactions.len());
    for t in &req.transactions {
        let results = one(
            ctx,
            &t.transactional_id,
            t.producer_id,
            t.producer_epoch,
            t.verify_only,
            &t.topics,
        )
        .await;
        results_by_transaction.push(AddPartitionsToTxnResult {
            transactional_id: t.transactional_id.clone(),
            topic_results: by_topic(results),
            ..Default::default()
        });
    }
    Reply::Body(ResponseBody::AddPartitionsToTxn(
        AddPartitionsToTxnResponse {
            error_code: ErrorCode::None.code(),
            results_by_transaction,
            ..Default::default()
        },
    ))
}

/// One transaction's partitions and their answers, in request order.
async fn one(
    ctx: &RequestContext,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    verify_only: bool,
    topics: &[AddPartitionsToTxnTopic],
) -> Vec<(TopicPartition, ErrorCode)> {
    let b = &ctx.broker;
    let requested: Vec<TopicPartition> = topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| TopicPartition::new(t.name.clone(), *p))
        })
        .collect();
    let snap = b.cluster();
    let from_client = ctx.api_version < BATCHED_SINCE;
    if from_client
        && !ctx.authorize(
            Operation::Write,
            AclResource::TransactionalId,
            transactional_id,
        )
    {
        return requested
            .into_iter()
            .map(|tp| (tp, ErrorCode::TransactionalIdAuthorizationFailed))
            .collect();
    }
    let refused: Vec<Option<ErrorCode>> = requested
        .iter()
        .map(|tp| {
            // a client never adds an internal topic; others need WRITE
            if from_client
                && (crate::groups::is_internal_topic(&tp.topic)
                    || !ctx.authorize(Operation::Write, AclResource::Topic, &tp.topic))
            {
                Some(ErrorCode::TopicAuthorizationFailed)
            } else if snap.partition(&tp.topic, tp.partition).is_none() {
                Some(ErrorCode::UnknownTopicOrPartition)
            } else {
                None
            }
        })
        .collect();
    if refused.iter().any(Option::is_some) {
        return requested
            .into_iter()
            .zip(refused)
            .map(|(tp, e)| (tp, e.unwrap_or(ErrorCode::OperationNotAttempted)))
            .collect();
    }
    let partitions: BTreeSet<TopicPartition> = requested.iter().cloned().collect();
    let all = |code: ErrorCode| -> Vec<(TopicPartition, ErrorCode)> {
        let code = crate::transactions::fenced_code(code, ctx.api_version, FENCED_SINCE);
        requested.iter().map(|tp| (tp.clone(), code)).collect()
    };
    let Some(txns) = b.transactions() else {
        return all(ErrorCode::CoordinatorNotAvailable);
    };
    if verify_only {
        let verified = txns.lock().verify_partitions(
            transactional_id,
            producer_id,
            producer_epoch,
            &partitions,
        );
        return match verified {
            Ok(per_partition) => requested
                .iter()
                .map(|tp| {
                    let code = per_partition
                        .iter()
                        .find(|(p, _)| p == tp)
                        .map_or(ErrorCode::UnknownServerError, |(_, c)| *c);
                    (tp.clone(), code)
                })
                .collect(),
            Err(e) => all(e),
        };
    }
    let step = txns.lock().add_partitions(
        transactional_id,
        producer_id,
        producer_epoch,
        &partitions,
        b.now_ms(),
    );
    let code = match step {
        Ok(Step::Done(_)) => ErrorCode::None,
        Ok(Step::Write(w)) => {
            let done = txns.write(b, w).await;
            crate::transactions::answer_of(&done)
                .err()
                .unwrap_or(ErrorCode::None)
        }
        Ok(Step::NeedProducerId) => ErrorCode::UnknownServerError,
        Err(e) => e,
    };
    all(code)
}

/// Answers grouped by topic, topics and partitions in request order.
fn by_topic(results: Vec<(TopicPartition, ErrorCode)>) -> Vec<AddPartitionsToTxnTopicResult> {
    let mut out: Vec<AddPartitionsToTxnTopicResult> = Vec::new();
    for (tp, code) in results {
        let entry = AddPartitionsToTxnPartitionResult {
            partition_index: tp.partition,
            partition_error_code: code.code(),
            ..Default::default()
        };
        match out.iter_mut().find(|t| t.name == tp.topic) {
            Some(t) => t.results_by_partition.push(entry),
            None => out.push(AddPartitionsToTxnTopicResult {
                name: tp.topic,
                results_by_partition: vec![entry],
                ..Default::default()
            }),
        }
    }
    out
}
