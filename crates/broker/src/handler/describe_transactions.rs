//! DescribeTransactions: the state of each transactional id this broker
//! coordinates (NOT_COORDINATOR for the others, TRANSACTIONAL_ID_NOT_FOUND
//! for an unknown one), with the partitions of its transaction.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::describe_transactions_response::{TopicData, TransactionState};
use weir_protocol::messages::{
    DescribeTransactionsRequest, DescribeTransactionsResponse, ResponseBody,
};

use super::{Reply, RequestContext};

pub fn handle(ctx: &RequestContext, req: DescribeTransactionsRequest) -> Reply {
    let txns = ctx.broker.transactions();
    let transaction_states = req
        .transactional_ids
        .into_iter()
        .map(|id| {
            if !ctx.authorize(Operation::Describe, AclResource::TransactionalId, &id) {
                return TransactionState {
                    error_code: ErrorCode::TransactionalIdAuthorizationFailed.code(),
                    transactional_id: id,
                    ..Default::default()
                };
            }
            let described = match txns {
                Some(t) => t.lock().describe(&id),
                None => Err(ErrorCode::CoordinatorNotAvailable),
            };
            match described {
                Ok(d) => {
                    let mut topics: Vec<TopicData> = Vec::new();
                    // only the topics the client may DESCRIBE (Kafka)
                    for tp in d.partitions.into_iter().filter(|tp| {
                        ctx.authorize(Operation::Describe, AclResource::Topic, &tp.topic)
                    }) {
                        match topics.last_mut() {
                            Some(t) if t.topic == tp.topic => t.partitions.push(tp.partition),
                            _ => topics.push(TopicData {
                                topic: tp.topic,
                                partitions: vec![tp.partition],
                                ..Default::default()
                            }),
                        }
                    }
                    TransactionState {
                        error_code: ErrorCode::None.code(),
                        transactional_id: id,
                        transaction_state: d.state.name().to_string(),
                        transaction_timeout_ms: d.timeout_ms,
                        transaction_start_time_ms: d.start_ms,
                        producer_id: d.producer_id,
                        producer_epoch: d.producer_epoch,
                        topics,
                        ..Default::default()
                    }
                }
                Err(e) => TransactionState {
                    error_code: e.code(),
                    transactional_id: id,
                    ..Default::default()
                },
            }
        })
        .collect();
    Reply::Body(ResponseBody::DescribeTransactions(
        DescribeTransactionsResponse {
            transaction_states,
            ..Default::default()
        },
    ))
}
