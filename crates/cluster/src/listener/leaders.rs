//! ElectLeaders: one controller decision for every partition asked, each
//! with its result. A request-wide failure (NOT_CONTROLLER, an unknown
//! election type, a timeout) goes in the top-level error code where the
//! version has it (v1+) and in every partition's result, so a v0 client
//! sees it too.

use std::collections::BTreeMap;

use weir_metadata::controller::ElectionType;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::elect_leaders_response::{PartitionResult, ReplicaElectionResult};
use weir_protocol::messages::{ElectLeadersRequest, ElectLeadersResponse};

use super::ListenerContext;
use super::topics::message;

pub(super) async fn elect(
    ctx: &ListenerContext,
    req: ElectLeadersRequest,
    version: i16,
) -> ElectLeadersResponse {
    let asked: Option<Vec<(String, i32)>> = req.topic_partitions.as_ref().map(|topics| {
        topics
            .iter()
            .flat_map(|t| t.partitions.iter().map(|p| (t.topic.clone(), *p)))
            .collect()
    });
    let outcome = match ElectionType::from_wire(req.election_type) {
        None => Err((
            ErrorCode::InvalidRequest,
            format!("unknown election type {}", req.election_type),
        )),
        Some(election) => ctx
            .controller
            .elect_leaders(election, asked.clone())
            .await
            .map_err(|e| (e.error_code(), message(&e))),
    };
    let mut by_topic: BTreeMap<String, Vec<PartitionResult>> = BTreeMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut add = |topic: String, result: PartitionResult| {
        if !by_topic.contains_key(&topic) {
            order.push(topic.clone());
        }
        by_topic.entry(topic).or_default().push(result);
    };
    let error_code = match outcome {
        Ok(results) => {
            for r in results {
                let (code, msg) = match r.result {
                    Ok(()) => (ErrorCode::None, None),
                    Err(e) => (e.code, Some(e.message)),
                };
                add(
                    r.topic,
                    PartitionResult {
                        partition_id: r.partition,
                        error_code: code.code(),
                        error_message: msg,
                        ..Default::default()
                    },
                );
            }
            ErrorCode::None
        }
        Err((code, msg)) => {
            for (topic, partition) in asked.unwrap_or_default() {
                add(
                    topic,
                    PartitionResult {
                        partition_id: partition,
                        error_code: code.code(),
                        error_message: Some(msg.clone()),
                        ..Default::default()
                    },
                );
            }
            code
        }
    };
    ElectLeadersResponse {
        error_code: if version >= 1 { error_code.code() } else { 0 },
        replica_election_results: order
            .into_iter()
            .map(|topic| ReplicaElectionResult {
                partition_result: by_topic.remove(&topic).unwrap_or_default(),
                topic,
                ..Default::default()
            })
            .collect(),
        ..Default::default()
    }
}
