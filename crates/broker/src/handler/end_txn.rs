//! EndTxn: commit or abort the producer's transaction. The answer follows
//! the PrepareCommit/PrepareAbort record being durable; the markers are
//! written to the transaction's partitions afterwards, in the background
//! (`transactions::markers`). Advertised up to v4, so clients stay on
//! transaction version 1 (a v5 request would mean KIP-890's per-transaction
//! epoch bump). v0-1 clients get INVALID_PRODUCER_EPOCH where newer ones
//! get PRODUCER_FENCED.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{EndTxnRequest, EndTxnResponse, ResponseBody};
use weir_txn::{ProducerIdAndEpoch, Step, TxnResult};

use super::{Reply, RequestContext};

/// The first version whose clients know PRODUCER_FENCED.
const FENCED_SINCE: i16 = 2;

pub async fn handle(ctx: &RequestContext, req: EndTxnRequest) -> Reply {
    let result = end(ctx, &req).await;
    let (code, p) = match result {
        Ok(p) => (ErrorCode::None, p),
        Err(e) => (
            crate::transactions::fenced_code(e, ctx.api_version, FENCED_SINCE),
            ProducerIdAndEpoch::NONE,
        ),
    };
    Reply::Body(ResponseBody::EndTxn(EndTxnResponse {
        error_code: code.code(),
        producer_id: p.producer_id,
        producer_epoch: p.epoch,
        ..Default::default()
    }))
}

async fn end(ctx: &RequestContext, req: &EndTxnRequest) -> Result<ProducerIdAndEpoch, ErrorCode> {
    let b = &ctx.broker;
    if !ctx.authorize(
        Operation::Write,
        AclResource::TransactionalId,
        &req.transactional_id,
    ) {
        return Err(ErrorCode::TransactionalIdAuthorizationFailed);
    }
    let txns = b.transactions().ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let step = txns.lock().end_txn(
        &req.transactional_id,
        req.producer_id,
        req.producer_epoch,
        TxnResult::from_committed(req.committed),
        b.now_ms(),
    )?;
    match step {
        Step::Done(p) => Ok(p),
        Step::Write(w) => {
            let done = txns.write(b, w).await;
            crate::transactions::answer_of(&done)
        }
        Step::NeedProducerId => Err(ErrorCode::UnknownServerError),
    }
}
