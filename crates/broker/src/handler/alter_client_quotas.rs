//! AlterClientQuotas (KIP-546): sets and removes client quotas with
//! Kafka's validation (`weir_metadata::client_quotas::ClientQuotas::plan_alter`)
//! and stores them durably before answering; the next request of an
//! affected client is measured against them. One result per request entry.
//!
//! Needs ALTER_CONFIGS on the cluster. On a cluster member the request
//! goes to the active controller once that is checked
//! ([`crate::security_admin`]), which decides with the same validation and
//! writes the quotas to the metadata log (nothing with `validate_only`);
//! the answer comes once this broker's image, and so its enforcement,
//! holds the change.

use weir_metadata::client_quotas;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{AlterClientQuotasRequest, ResponseBody};

use super::{Reply, RequestContext};

pub async fn handle(ctx: &RequestContext, req: AlterClientQuotasRequest) -> Reply {
    let results = if !ctx.authorize_cluster(weir_acl::Operation::AlterConfigs) {
        client_quotas::refuse_all(
            &req,
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        )
    } else if let Some(admin) = ctx.broker.security_admin() {
        return Reply::Later(Box::pin(async move {
            Reply::Body(ResponseBody::AlterClientQuotas(
                admin.alter_client_quotas(req).await,
            ))
        }));
    } else {
        let alterations = client_quotas::request_alterations(&req);
        let store = ctx.broker.quotas.clone();
        let validate_only = req.validate_only;
        super::blocking(move || store.alter(&alterations, validate_only))
    };
    Reply::Body(ResponseBody::AlterClientQuotas(
        client_quotas::alter_response(req, results),
    ))
}
