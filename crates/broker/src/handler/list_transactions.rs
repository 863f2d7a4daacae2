//! ListTransactions: the transactional ids this broker coordinates, with
//! Kafka's filters (states, producer ids, and from v1 a minimum running
//! time); state names that are no state come back in
//! `unknown_state_filters`. COORDINATOR_LOAD_IN_PROGRESS while a partition
//! of `__transaction_state` is being loaded.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::list_transactions_response::TransactionState;
use weir_protocol::messages::{ListTransactionsRequest, ListTransactionsResponse, ResponseBody};
use weir_txn::ListFilter;

use super::{Reply, RequestContext};

pub fn handle(ctx: &RequestContext, req: ListTransactionsRequest) -> Reply {
    let b = &ctx.broker;
    let filter = ListFilter {
        states: req.state_filters,
        producer_ids: req.producer_id_filters,
        duration_ms: if ctx.api_version >= 1 {
            req.duration_filter
        } else {
            -1
        },
    };
    let listed = match b.transactions() {
        Some(t) => t.lock().list(&filter, b.now_ms()),
        None => Err(ErrorCode::CoordinatorNotAvailable),
    };
    let resp = match listed {
        Ok((listed, unknown_state_filters)) => ListTransactionsResponse {
            error_code: ErrorCode::None.code(),
            unknown_state_filters,
            transaction_states: listed
                .into_iter()
                // only the ids the client may DESCRIBE (Kafka)
                .filter(|t| {
                    ctx.authorize(
                        Operation::Describe,
                        AclResource::TransactionalId,
                        &t.transactional_id,
                    )
                })
                .map(|t| TransactionState {
                    transactional_id: t.transactional_id,
                    producer_id: t.producer_id,
                    transaction_state: t.state.name().to_string(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        },
        Err(e) => ListTransactionsResponse {
            error_code: e.code(),
            ..Default::default()
        },
    };
    Reply::Body(ResponseBody::ListTransactions(resp))
}
