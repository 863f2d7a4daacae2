//! DescribeUserScramCredentials (KIP-554): the mechanisms and iteration
//! counts of the SCRAM credentials set at run time (never the salts or
//! keys), as Kafka's `ScramImage.describe` answers. The static JAAS users
//! of a listener are configuration, not credentials set at run time, and
//! are not listed.
//!
//! Needs DESCRIBE on the cluster. A cluster member answers from its own
//! metadata image (the credentials its SCRAM logins use), as a Kafka
//! broker does.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::describe_user_scram_credentials_response::{
    CredentialInfo, DescribeUserScramCredentialsResult,
};
use weir_protocol::messages::{
    DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse, ResponseBody,
};

use super::{Reply, RequestContext};

pub fn handle(ctx: &RequestContext, req: DescribeUserScramCredentialsRequest) -> Reply {
    if !ctx.authorize_cluster(weir_acl::Operation::Describe) {
        return Reply::Body(ResponseBody::DescribeUserScramCredentials(
            DescribeUserScramCredentialsResponse {
                error_code: ErrorCode::ClusterAuthorizationFailed.code(),
                error_message: Some("Cluster authorization failed.".to_string()),
                ..Default::default()
            },
        ));
    }
    let users: Option<Vec<String>> = req.users.map(|us| us.into_iter().map(|u| u.name).collect());
    let described = ctx.broker.scram.snapshot().describe(users.as_deref());
    let response = DescribeUserScramCredentialsResponse {
        results: described
            .into_iter()
            .map(|d| match d.result {
                Ok(infos) => DescribeUserScramCredentialsResult {
                    user: d.user,
                    credential_infos: infos
                        .into_iter()
                        .map(|(hash, iterations)| CredentialInfo {
                            mechanism: hash.wire_type(),
                            iterations: i32::try_from(iterations).unwrap_or(i32::MAX),
                            ..Default::default()
                        })
                        .collect(),
                    ..Default::default()
                },
                Err(r) => DescribeUserScramCredentialsResult {
                    user: d.user,
                    error_code: r.code.code(),
                    error_message: Some(r.message),
                    ..Default::default()
                },
            })
            .collect(),
        ..Default::default()
    };
    Reply::Body(ResponseBody::DescribeUserScramCredentials(response))
}
