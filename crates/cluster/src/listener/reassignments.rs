//! AlterPartitionReassignments (v0) and ListPartitionReassignments (v0):
//! weir-metadata's reassignment decision and listing (see its
//! `controller::reassignment` module for the rules) on the wire.
//!
//! AlterPartitionReassignments is one controller decision for every
//! partition asked, committed as one batch, each partition answered with
//! its own code (UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT,
//! NO_REASSIGNMENT_IN_PROGRESS, …). A failure of the whole request
//! (NOT_CONTROLLER, a timeout) is the top-level error and is also every
//! partition's, so a client that reads only the partitions sees it too.
//! ListPartitionReassignments answers the partitions being reassigned among
//! those asked (all, for null topics); an error is the top-level one.

use std::collections::BTreeMap;

use weir_metadata::controller::{OngoingReassignment, Reassignment};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_partition_reassignments_response::{
    ReassignablePartitionResponse, ReassignableTopicResponse,
};
use weir_protocol::messages::list_partition_reassignments_response::{
    OngoingPartitionReassignment, OngoingTopicReassignment,
};
use weir_protocol::messages::{
    AlterPartitionReassignmentsRequest, AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest, ListPartitionReassignmentsResponse,
};

use super::ListenerContext;
use super::topics::message;

/// One partition's error code and message.
type Answer = (ErrorCode, Option<String>);

pub(super) async fn alter(
    ctx: &ListenerContext,
    req: AlterPartitionReassignmentsRequest,
) -> AlterPartitionReassignmentsResponse {
    let asked: Vec<Reassignment> = req
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(|p| Reassignment {
                topic: t.name.clone(),
                partition: p.partition_index,
                target: p.replicas.clone(),
            })
        })
        .collect();
    // A request-wide failure is every partition's answer too.
    let mut error: Option<(ErrorCode, String)> = None;
    let answers: Vec<Answer> = match ctx
        .controller
        .alter_partition_reassignments(asked.clone())
        .await
    {
        Ok(results) => results
            .into_iter()
            .map(|r| match r.result {
                Ok(()) => (ErrorCode::None, None),
                Err(e) => (e.code, Some(e.message)),
            })
            .collect(),
        Err(e) => {
            let (code, msg) = (e.error_code(), message(&e));
            error = Some((code, msg.clone()));
            asked.iter().map(|_| (code, Some(msg.clone()))).collect()
        }
    };
    let mut responses: Vec<ReassignableTopicResponse> = Vec::new();
    for (r, (code, msg)) in asked.into_iter().zip(answers) {
        let partition = ReassignablePartitionResponse {
            partition_index: r.partition,
            error_code: code.code(),
            error_message: msg,
            ..Default::default()
        };
        match responses.iter_mut().find(|t| t.name == r.topic) {
            Some(t) => t.partitions.push(partition),
            None => responses.push(ReassignableTopicResponse {
                name: r.topic,
                partitions: vec![partition],
                ..Default::default()
            }),
        }
    }
    let (error_code, error_message) = match error {
        Some((code, msg)) => (code.code(), Some(msg)),
        None => (ErrorCode::None.code(), None),
    };
    AlterPartitionReassignmentsResponse {
        error_code,
        error_message,
        responses,
        ..Default::default()
    }
}

pub(super) async fn list(
    ctx: &ListenerContext,
    req: ListPartitionReassignmentsRequest,
) -> ListPartitionReassignmentsResponse {
    let asked: Option<Vec<(String, Vec<i32>)>> = req.topics.map(|topics| {
        topics
            .into_iter()
            .map(|t| (t.name, t.partition_indexes))
            .collect()
    });
    match ctx.controller.list_partition_reassignments(asked).await {
        Ok(ongoing) => ListPartitionReassignmentsResponse {
            topics: by_topic(ongoing),
            ..Default::default()
        },
        Err(e) => ListPartitionReassignmentsResponse {
            error_code: e.error_code().code(),
            error_message: Some(message(&e)),
            ..Default::default()
        },
    }
}

/// The reassignments grouped by topic, in the order listed.
fn by_topic(ongoing: Vec<OngoingReassignment>) -> Vec<OngoingTopicReassignment> {
    let mut topics: BTreeMap<String, Vec<OngoingPartitionReassignment>> = BTreeMap::new();
    for o in ongoing {
        topics
            .entry(o.topic)
            .or_default()
            .push(OngoingPartitionReassignment {
                partition_index: o.partition,
                replicas: o.replicas,
                adding_replicas: o.adding,
                removing_replicas: o.removing,
                ..Default::default()
            });
    }
    topics
        .into_iter()
        .map(|(name, partitions)| OngoingTopicReassignment {
            name,
            partitions,
            ..Default::default()
        })
        .collect()
}
