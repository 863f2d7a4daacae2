//! AlterUserScramCredentials (KIP-554): sets and deletes SCRAM credentials
//! with Kafka's validation (`weir_metadata::scram::ScramUsers::plan_alter`)
//! and stores them durably before answering; the next SCRAM login on any
//! SASL listener uses them. One result per user named in the request.
//!
//! Needs ALTER on the cluster. On a cluster member the request goes to the
//! active controller once that is checked ([`crate::security_admin`]),
//! which decides with the same validation and writes the credentials to
//! the metadata log; the answer comes once this broker's image, and so its
//! SCRAM logins, hold the change.

use weir_metadata::scram;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ResponseBody,
};

use super::{Reply, RequestContext};

pub async fn handle(ctx: &RequestContext, req: AlterUserScramCredentialsRequest) -> Reply {
    let results = if !ctx.authorize_cluster(weir_acl::Operation::Alter) {
        scram::refuse_all(
            &req,
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        )
    } else if let Some(admin) = ctx.broker.security_admin() {
        return Reply::Later(Box::pin(async move {
            Reply::Body(ResponseBody::AlterUserScramCredentials(
                admin.alter_user_scram_credentials(req).await,
            ))
        }));
    } else {
        let (deletions, upsertions) = scram::request_changes(&req);
        let store = ctx.broker.scram.clone();
        scram::alter_results(super::blocking(move || {
            store.alter(&deletions, &upsertions)
        }))
    };
    Reply::Body(ResponseBody::AlterUserScramCredentials(
        AlterUserScramCredentialsResponse {
            results,
            ..Default::default()
        },
    ))
}
