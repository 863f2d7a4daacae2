//! InitProducerId: hands out producer ids for idempotent producers.
//! Transactions are not supported: a request with a transactional id gets
//! TRANSACTIONAL_ID_AUTHORIZATION_FAILED, which clients treat as fatal (see
//! `find_coordinator`), instead of a retriable code they would retry until
//! their timeout.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ResponseBody};

use super::{Reply, RequestContext};

pub fn handle(ctx: &RequestContext, req: InitProducerIdRequest) -> Reply {
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
            InitProducerIdResponse {
                error_code: ErrorCode::None.code(),
                producer_id: b.allocate_producer_id(),
                producer_epoch: 0,
                ..Default::default()
            }
        }
    } else {
        InitProducerIdResponse {
            error_code: ErrorCode::None.code(),
            producer_id: b.allocate_producer_id(),
            producer_epoch: 0,
            ..Default::default()
        }
    };
    Reply::Body(ResponseBody::InitProducerId(resp))
}
