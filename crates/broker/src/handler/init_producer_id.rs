//! InitProducerId: producer ids for idempotent producers, and for
//! transactional ones through the transaction coordinator (a new epoch of
//! the transactional id's producer, fencing the previous session; see
//! `weir_txn`).
//!
//! A request naming only one of `producer_id` and `producer_epoch` is
//! INVALID_REQUEST, as Kafka's; v0-3 clients get INVALID_PRODUCER_EPOCH
//! where newer ones get PRODUCER_FENCED. An empty transactional id is
//! INVALID_REQUEST, as Kafka's coordinator answers it (an idempotent
//! producer sends none: null).

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{InitProducerIdRequest, InitProducerIdResponse, ResponseBody};
use weir_txn::{ProducerIdAndEpoch, Step};

use super::{Reply, RequestContext};

/// The first InitProducerId version whose clients know PRODUCER_FENCED.
const FENCED_SINCE: i16 = 4;

pub async fn handle(ctx: &RequestContext, req: InitProducerIdRequest) -> Reply {
    let b = &ctx.broker;
    // Kafka: WRITE on the transactional id; without one, IDEMPOTENT_WRITE
    // on the cluster or WRITE on some topic
    match req.transactional_id.as_deref() {
        Some(id) if !ctx.authorize(Operation::Write, AclResource::TransactionalId, id) => {
            return respond(Err(ErrorCode::TransactionalIdAuthorizationFailed));
        }
        None if !ctx.authorize_cluster(Operation::IdempotentWrite)
            && !ctx.authorize_any(Operation::Write, AclResource::Topic) =>
        {
            return respond(Err(ErrorCode::ClusterAuthorizationFailed));
        }
        _ => {}
    }
    let expected = match (req.producer_id, req.producer_epoch) {
        (-1, -1) => None,
        (-1, _) | (_, -1) => return respond(Err(ErrorCode::InvalidRequest)),
        (producer_id, epoch) => Some(ProducerIdAndEpoch { producer_id, epoch }),
    };
    if let Some(id) = req.transactional_id.as_deref() {
        if id.is_empty() {
            return respond(Err(ErrorCode::InvalidRequest));
        }
        let result = transactional(ctx, id, req.transaction_timeout_ms, expected).await;
        let result =
            result.map_err(|e| crate::transactions::fenced_code(e, ctx.api_version, FENCED_SINCE));
        return respond(result);
    }
    let resp = match expected {
        // KIP-360: an idempotent producer bumping its epoch keeps its id
        Some(p) if p.producer_id >= 0 && p.epoch >= 0 && p.epoch < i16::MAX - 1 => {
            Ok(ProducerIdAndEpoch {
                producer_id: p.producer_id,
                epoch: p.epoch + 1,
            })
        }
        _ => new_producer(b.next_producer_id().await),
    };
    respond(resp)
}

/// The transaction coordinator's answer: a new producer id is fetched only
/// when it asks for one.
async fn transactional(
    ctx: &RequestContext,
    id: &str,
    timeout_ms: i32,
    expected: Option<ProducerIdAndEpoch>,
) -> Result<ProducerIdAndEpoch, ErrorCode> {
    let b = &ctx.broker;
    let txns = b.transactions().ok_or(ErrorCode::CoordinatorNotAvailable)?;
    let mut fresh = None;
    // A second NeedProducerId (the id was created meanwhile by another
    // request and then exhausted) fetches another; never more than that.
    for _ in 0..3 {
        let step = txns
            .lock()
            .init_producer_id(id, timeout_ms, expected, fresh, b.now_ms())?;
        match step {
            Step::NeedProducerId => fresh = Some(b.next_producer_id().await?),
            Step::Done(p) => return Ok(p),
            Step::Write(w) => {
                let done = txns.write(b, w).await;
                return crate::transactions::answer_of(&done);
            }
        }
    }
    Err(ErrorCode::ConcurrentTransactions)
}

/// A new producer id at epoch 0, or the error that kept one from being
/// handed out (in a cluster: no block of ids from the controller).
fn new_producer(id: Result<i64, ErrorCode>) -> Result<ProducerIdAndEpoch, ErrorCode> {
    id.map(|producer_id| ProducerIdAndEpoch {
        producer_id,
        epoch: 0,
    })
}

fn respond(r: Result<ProducerIdAndEpoch, ErrorCode>) -> Reply {
    let (code, p) = match r {
        Ok(p) => (ErrorCode::None, p),
        Err(e) => (e, ProducerIdAndEpoch::NONE),
    };
    Reply::Body(ResponseBody::InitProducerId(InitProducerIdResponse {
        error_code: code.code(),
        producer_id: p.producer_id,
        producer_epoch: p.epoch,
        ..Default::default()
    }))
}
