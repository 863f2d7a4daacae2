//! AlterClientQuotas (KIP-546): sets and removes client quotas with
//! Kafka's validation (`crate::quotas::ClientQuotas::plan_alter`) and
//! stores them durably before answering; the next request of an affected
//! client is measured against them. One result per request entry.
//!
//! Needs ALTER_CONFIGS on the cluster. A cluster member refuses every
//! entry with INVALID_REQUEST: quotas are kept per broker for now.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_client_quotas_response::{EntityData, EntryData};
use weir_protocol::messages::{AlterClientQuotasRequest, AlterClientQuotasResponse, ResponseBody};

use super::{Reply, RequestContext};
use crate::quotas::{Alteration, Op, Refusal};

/// The refusal of a cluster member.
pub const CLUSTER_REFUSAL: &str = "client quotas are set on single-node brokers only for now";

pub async fn handle(ctx: &RequestContext, req: AlterClientQuotasRequest) -> Reply {
    let alterations: Vec<Alteration> = req
        .entries
        .iter()
        .map(|e| Alteration {
            entity: e
                .entity
                .iter()
                .map(|d| (d.entity_type.clone(), d.entity_name.clone()))
                .collect(),
            ops: e
                .ops
                .iter()
                .map(|o| Op {
                    key: o.key.clone(),
                    value: o.value,
                    remove: o.remove,
                })
                .collect(),
        })
        .collect();
    let refuse_all = |code: ErrorCode, message: &str| {
        alterations
            .iter()
            .map(|_| {
                Err(Refusal {
                    code,
                    message: message.to_string(),
                })
            })
            .collect::<Vec<_>>()
    };
    let results = if !ctx.authorize_cluster(weir_acl::Operation::AlterConfigs) {
        refuse_all(
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        )
    } else if ctx.broker.config.is_cluster() {
        refuse_all(ErrorCode::InvalidRequest, CLUSTER_REFUSAL)
    } else {
        let store = ctx.broker.quotas.clone();
        let validate_only = req.validate_only;
        let alterations = alterations.clone();
        super::blocking(move || store.alter(&alterations, validate_only))
    };
    let entries = req
        .entries
        .into_iter()
        .zip(results)
        .map(|(e, r)| {
            let (code, message) = match r {
                Ok(()) => (ErrorCode::None, None),
                Err(r) => (r.code, Some(r.message)),
            };
            EntryData {
                error_code: code.code(),
                error_message: message,
                entity: e
                    .entity
                    .into_iter()
                    .map(|d| EntityData {
                        entity_type: d.entity_type,
                        entity_name: d.entity_name,
                        ..Default::default()
                    })
                    .collect(),
                ..Default::default()
            }
        })
        .collect();
    Reply::Body(ResponseBody::AlterClientQuotas(AlterClientQuotasResponse {
        entries,
        ..Default::default()
    }))
}
