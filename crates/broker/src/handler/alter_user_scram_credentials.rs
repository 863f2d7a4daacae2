//! AlterUserScramCredentials (KIP-554): sets and deletes SCRAM credentials
//! with Kafka's validation (`crate::scram_credentials::ScramUsers::plan_alter`)
//! and stores them durably before answering; the next SCRAM login on any
//! SASL listener uses them. One result per user named in the request.
//!
//! A cluster member refuses every entry with INVALID_REQUEST: credentials
//! are kept per broker, and the brokers of a cluster would disagree.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_user_scram_credentials_response::AlterUserScramCredentialsResult;
use weir_protocol::messages::{
    AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse, ResponseBody,
};

use super::{Reply, RequestContext};
use crate::scram_credentials::{Deletion, Upsertion};

/// The refusal of a cluster member.
pub const CLUSTER_REFUSAL: &str = "SCRAM credentials are managed on single-node brokers only for now \
     (a cluster's SASL listeners take the static JAAS users)";

pub async fn handle(ctx: &RequestContext, req: AlterUserScramCredentialsRequest) -> Reply {
    let results = if !ctx.authorize_cluster(weir_acl::Operation::Alter) {
        refuse_all(
            &req,
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.",
        )
    } else if ctx.broker.config.is_cluster() {
        refuse_all(&req, ErrorCode::InvalidRequest, CLUSTER_REFUSAL)
    } else {
        let deletions: Vec<Deletion> = req
            .deletions
            .into_iter()
            .map(|d| Deletion {
                user: d.name,
                mechanism: d.mechanism,
            })
            .collect();
        let upsertions: Vec<Upsertion> = req
            .upsertions
            .into_iter()
            .map(|u| Upsertion {
                user: u.name,
                mechanism: u.mechanism,
                iterations: u.iterations,
                salt: u.salt.to_vec(),
                salted_password: u.salted_password.to_vec(),
            })
            .collect();
        let store = ctx.broker.scram.clone();
        super::blocking(move || store.alter(&deletions, &upsertions))
            .into_iter()
            .map(|(user, r)| match r {
                Ok(()) => result(user, ErrorCode::None, None),
                Err(r) => result(user, r.code, Some(r.message)),
            })
            .collect()
    };
    Reply::Body(ResponseBody::AlterUserScramCredentials(
        AlterUserScramCredentialsResponse {
            results,
            ..Default::default()
        },
    ))
}

/// `code` for each user named, once.
fn refuse_all(
    req: &AlterUserScramCredentialsRequest,
    code: ErrorCode,
    message: &str,
) -> Vec<AlterUserScramCredentialsResult> {
    let mut users: Vec<&str> = Vec::new();
    let named = req
        .deletions
        .iter()
        .map(|d| d.name.as_str())
        .chain(req.upsertions.iter().map(|u| u.name.as_str()));
    for u in named {
        if !users.contains(&u) {
            users.push(u);
        }
    }
    users
        .into_iter()
        .map(|u| result(u.to_string(), code, Some(message.to_string())))
        .collect()
}

fn result(
    user: String,
    code: ErrorCode,
    message: Option<String>,
) -> AlterUserScramCredentialsResult {
    AlterUserScramCredentialsResult {
        user,
        error_code: code.code(),
        error_message: message,
        ..Default::default()
    }
}
