//! InitProducerId: hands out producer ids for idempotent producers.
//! Transactions are not supported: a request with a transactional id gets
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients treat as fatal (see
//! `find_coordinator`), instead of a retriable code they would retry until
//! their timeout.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ResponseBody};

use super::{Reply, RequestContext};

pub async fn handle(ctx: &RequestContext, req: InitProducerIdRequest) -> Reply {
    let b = &ctx.broker;
    let resp = if req
        .transactional_id
        .as_deref()
        .is_some_and(|t| !t.is_empty())
    {
        InitProducerIdResponse {
            error_code: ErrorCode::TransactionalIdAuthorizationFailed.code(),
            producer_id: -1,
            producer_epoch: -1,
            ..Default::default()
        }
    } else if req.producer_id >= 0 && req.producer_epoch >= 0 {
        // KIP-360: an idempotent producer bumping its epoch keeps its id
        if req.producer_epoch < i16::MAX - 1 {
            InitProducerIdResponse {
                error_code: ErrorCode::None.code(),
                producer_id: req.producer_id,
                producer_epoch: req.producer_epoch + 1,
                ..Default::default()
            }
        } else {
            new_producer(b.next_producer_id().await)
        }
    } else {
        new_producer(b.next_producer_id().await)
    };
    Reply::Body(ResponseBody::InitProducerId(resp))
}

/// A new producer id at epoch 0, or the error that kept one from being
/// handed out (in a cluster: no block of ids from the controller).
fn new_producer(id: Result<i64, ErrorCode>) -> InitProducerIdResponse {
    match id {
        Ok(producer_id) => InitProducerIdResponse {
            error_code: ErrorCode::None.code(),
            producer_id,
            producer_epoch: 0,
            ..Default::default()
        },
        Err(code) => InitProducerIdResponse {
            error_code: code.code(),
            producer_id: -1,
            producer_epoch: -1,
            ..Default::default()
        },
    }
}
