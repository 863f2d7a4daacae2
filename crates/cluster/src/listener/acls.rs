//! CreateAcls and DeleteAcls (v0-3): how a broker hands the active
//! controller an ACL change, stored in the metadata log as Kafka 4 stores
//! it (`AccessControlEntryRecord` / `RemoveAccessControlEntryRecord`).
//!
//! The forwarding broker has already checked the client's permission
//! (ALTER on the cluster) and that an authorizer is configured; the checks
//! of each ACL and filter are the same ones a single node makes
//! (`weir_acl::wire`):
//! an invalid one is INVALID_REQUEST, the rest of the request goes ahead.
//! The whole request is one controller decision and one batch. Off the
//! active controller every result is NOT_CONTROLLER. DescribeAcls is not
//! served here: every broker answers it from its own image.

use weir_acl::{AclBinding, AclBindingFilter, wire};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_acls_response::AclCreationResult;
use weir_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use weir_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
};

use super::ListenerContext;
use super::topics::message;

pub(super) async fn create(ctx: &ListenerContext, req: CreateAclsRequest) -> CreateAclsResponse {
    let parsed: Vec<Result<AclBinding, String>> =
        req.creations.iter().map(wire::creation_binding).collect();
    let valid: Vec<AclBinding> = parsed.iter().filter_map(|r| r.clone().ok()).collect();
    let decided = if valid.is_empty() {
        Ok(Vec::new())
    } else {
        ctx.controller.create_acls(valid).await
    };
    let failed = |code: ErrorCode, msg: String| AclCreationResult {
        error_code: code.code(),
        error_message: Some(msg),
        ..Default::default()
    };
    let results = match decided {
        Err(e) => parsed
            .iter()
            .map(|r| match r {
                Err(reason) => failed(ErrorCode::InvalidRequest, reason.clone()),
                Ok(_) => failed(e.error_code(), message(&e)),
            })
            .collect(),
        Ok(decided) => {
            let mut decided = decided.into_iter();
            parsed
                .into_iter()
                .map(|r| match r {
                    Err(reason) => failed(ErrorCode::InvalidRequest, reason),
                    Ok(_) => match decided.next() {
                        Some(Ok(())) => AclCreationResult::default(),
                        Some(Err(r)) => failed(r.code, r.message),
                        None => failed(ErrorCode::UnknownServerError, "no result".into()),
                    },
                })
                .collect()
        }
    };
    CreateAclsResponse {
        results,
        ..Default::default()
    }
}

pub(super) async fn delete(ctx: &ListenerContext, req: DeleteAclsRequest) -> DeleteAclsResponse {
    let parsed: Vec<Result<AclBindingFilter, String>> =
        req.filters.iter().map(wire::delete_filter).collect();
    let valid: Vec<AclBindingFilter> = parsed.iter().filter_map(|r| r.clone().ok()).collect();
    let decided = if valid.is_empty() {
        Ok(Vec::new())
    } else {
        ctx.controller.delete_acls(valid).await
    };
    let failed = |code: ErrorCode, msg: String| DeleteAclsFilterResult {
        error_code: code.code(),
        error_message: Some(msg),
        ..Default::default()
    };
    let filter_results = match decided {
        Err(e) => parsed
            .iter()
            .map(|r| match r {
                Err(reason) => failed(ErrorCode::InvalidRequest, reason.clone()),
                Ok(_) => failed(e.error_code(), message(&e)),
            })
            .collect(),
        Ok(deleted) => {
            let mut deleted = deleted.into_iter();
            parsed
                .into_iter()
                .map(|r| match r {
                    Err(reason) => failed(ErrorCode::InvalidRequest, reason),
                    Ok(_) => DeleteAclsFilterResult {
                        matching_acls: deleted
                            .next()
                            .unwrap_or_default()
                            .into_iter()
                            .map(wire::matching_acl)
                            .collect(),
                        ..Default::default()
                    },
                })
                .collect()
        }
    };
    DeleteAclsResponse {
        filter_results,
        ..Default::default()
    }
}
