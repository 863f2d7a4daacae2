//! AlterUserScramCredentials (v0) and AlterClientQuotas (v0-1): how a
//! broker hands the active controller a SCRAM credential or client quota
//! change, stored in the metadata log as Kafka 4 stores them
//! (`UserScramCredentialRecord` / `RemoveUserScramCredentialRecord`,
//! `ClientQuotaRecord`).
//!
//! The forwarding broker has already checked the client's permission
//! (ALTER, respectively ALTER_CONFIGS, on the cluster). The checks are the
//! ones a single node makes (weir-metadata's `scram` and `client_quotas`):
//! a refused user or entry gets its code and message, the rest of the
//! request goes ahead. The whole request is one controller decision and
//! one batch (none for a `validate_only` AlterClientQuotas). Off the
//! active controller every user or entry is NOT_CONTROLLER.
//! DescribeUserScramCredentials and DescribeClientQuotas are not served
//! here: every broker answers them from its own image.

use weir_metadata::{client_quotas, scram};
use weir_protocol::messages::{
    AlterClientQuotasRequest, AlterClientQuotasResponse, AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
};

use super::ListenerContext;
use super::topics::message;

pub(super) async fn alter_scram(
    ctx: &ListenerContext,
    req: AlterUserScramCredentialsRequest,
) -> AlterUserScramCredentialsResponse {
    let (deletions, upsertions) = scram::request_changes(&req);
    let results = match ctx
        .controller
        .alter_scram_credentials(deletions, upsertions)
        .await
    {
        Ok(results) => scram::alter_results(results),
        Err(e) => scram::refuse_all(&req, e.error_code(), &message(&e)),
    };
    AlterUserScramCredentialsResponse {
        results,
        ..Default::default()
    }
}

pub(super) async fn alter_quotas(
    ctx: &ListenerContext,
    req: AlterClientQuotasRequest,
) -> AlterClientQuotasResponse {
    let alterations = client_quotas::request_alterations(&req);
    let results = match ctx
        .controller
        .alter_client_quotas(alterations, req.validate_only)
        .await
    {
        Ok(results) => results,
        Err(e) => client_quotas::refuse_all(&req, e.error_code(), &message(&e)),
    };
    client_quotas::alter_response(req, results)
}
