//! CreateAcls, DescribeAcls and DeleteAcls (v1-3), as Kafka answers them:
//!
//! - without an authorizer (`authorizer.class.name` unset) every answer is
//!   SECURITY_DISABLED, "No Authorizer is configured.";
//! - CreateAcls and DeleteAcls need ALTER on the cluster, DescribeAcls
//!   DESCRIBE on it (else CLUSTER_AUTHORIZATION_FAILED);
//! - an ACL with an unknown or filter-only type (ANY, MATCH), an empty
//!   name, a CLUSTER resource not named `kafka-cluster` or a principal not
//!   of the form `Type:name` is INVALID_REQUEST with the reason; the
//!   others of the request are created;
//! - a filter with an unknown code is INVALID_REQUEST;
//! - DescribeAcls groups the bindings by resource pattern; DeleteAcls
//!   reports, per filter, the bindings it deleted.
//!
//! Changes are durable before the answer ([`crate::acls`]). On a cluster
//! member, CreateAcls and DeleteAcls go to the active controller once the
//! client's permission is checked ([`crate::security_admin`]); the answer
//! comes once this broker's image holds the change. DescribeAcls reads
//! this broker's ACLs, which on a cluster member are its image's.

use weir_acl::{AclBinding, AclBindingFilter, Operation, wire};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_acls_response::AclCreationResult;
use weir_protocol::messages::delete_acls_response::DeleteAclsFilterResult;
use weir_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};
use weir_protocol::messages::{
    CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse, ResponseBody,
};

use super::{Reply, RequestContext};

const NO_AUTHORIZER: &str = "No Authorizer is configured.";

fn code(e: ErrorCode) -> i16 {
    e as i16
}

/// Why this request may not change or read ACLs, if it may not.
fn refused(ctx: &RequestContext, op: Operation) -> Option<(ErrorCode, String)> {
    if !ctx.broker.acls.enabled() {
        return Some((ErrorCode::SecurityDisabled, NO_AUTHORIZER.to_string()));
    }
    if !ctx.authorize_cluster(op) {
        return Some((
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.".to_string(),
        ));
    }
    None
}

pub fn create(ctx: &RequestContext, req: CreateAclsRequest) -> Reply {
    let results = match refused(ctx, Operation::Alter) {
        Some((e, msg)) => req
            .creations
            .iter()
            .map(|_| AclCreationResult {
                error_code: code(e),
                error_message: Some(msg.clone()),
                ..Default::default()
            })
            .collect(),
        None => {
            if let Some(admin) = ctx.broker.security_admin() {
                return Reply::Later(Box::pin(async move {
                    Reply::Body(ResponseBody::CreateAcls(admin.create_acls(req).await))
                }));
            }
            let parsed: Vec<Result<AclBinding, String>> =
                req.creations.iter().map(wire::creation_binding).collect();
            let valid: Vec<AclBinding> = parsed.iter().filter_map(|r| r.clone().ok()).collect();
            let mut created = ctx.broker.acls.create(valid).into_iter();
            parsed
                .into_iter()
                .map(|r| {
                    let outcome = match r {
                        Err(reason) => Err((ErrorCode::InvalidRequest, reason)),
                        Ok(_) => match created.next() {
                            Some(Ok(())) => Ok(()),
                            Some(Err(e)) => Err((ErrorCode::UnknownServerError, e.to_string())),
                            None => Err((ErrorCode::UnknownServerError, "lost".to_string())),
                        },
                    };
                    match outcome {
                        Ok(()) => AclCreationResult::default(),
                        Err((e, msg)) => AclCreationResult {
                            error_code: code(e),
                            error_message: Some(msg),
                            ..Default::default()
                        },
                    }
                })
                .collect()
        }
    };
    Reply::Body(ResponseBody::CreateAcls(CreateAclsResponse {
        results,
        ..Default::default()
    }))
}

pub fn describe(ctx: &RequestContext, req: DescribeAclsRequest) -> Reply {
    let answer = |e: ErrorCode, msg: Option<String>, resources| {
        Reply::Body(ResponseBody::DescribeAcls(DescribeAclsResponse {
            error_code: code(e),
            error_message: msg,
            resources,
            ..Default::default()
        }))
    };
    if let Some((e, msg)) = refused(ctx, Operation::Describe) {
        return answer(e, Some(msg), Vec::new());
    }
    let f = match AclBindingFilter::from_codes(
        req.resource_type_filter,
        req.resource_name_filter.as_deref(),
        req.pattern_type_filter,
        req.principal_filter.as_deref(),
        req.host_filter.as_deref(),
        req.operation,
        req.permission_type,
    ) {
        Ok(f) => f,
        Err(reason) => return answer(ErrorCode::InvalidRequest, Some(reason), Vec::new()),
    };
    // Sorted by pattern, so each pattern's bindings are adjacent.
    let mut resources: Vec<DescribeAclsResource> = Vec::new();
    for b in ctx.broker.acls.describe(&f) {
        let p = &b.pattern;
        let same = resources.last().is_some_and(|r| {
            r.resource_type == p.resource_type.code()
                && r.resource_name == p.name
                && r.pattern_type == p.pattern_type.code()
        });
        if !same {
            resources.push(DescribeAclsResource {
                resource_type: p.resource_type.code(),
                resource_name: p.name.clone(),
                pattern_type: p.pattern_type.code(),
                ..Default::default()
            });
        }
        if let Some(r) = resources.last_mut() {
            r.acls.push(AclDescription {
                principal: b.entry.principal.clone(),
                host: b.entry.host.clone(),
                operation: b.entry.operation.code(),
                permission_type: b.entry.permission.code(),
                ..Default::default()
            });
        }
    }
    answer(ErrorCode::None, None, resources)
}

pub fn delete(ctx: &RequestContext, req: DeleteAclsRequest) -> Reply {
    let failed = |e: ErrorCode, msg: &str| DeleteAclsFilterResult {
        error_code: code(e),
        error_message: Some(msg.to_string()),
        ..Default::default()
    };
    let filter_results = if let Some((e, msg)) = refused(ctx, Operation::Alter) {
        req.filters.iter().map(|_| failed(e, &msg)).collect()
    } else if let Some(admin) = ctx.broker.security_admin() {
        return Reply::Later(Box::pin(async move {
            Reply::Body(ResponseBody::DeleteAcls(admin.delete_acls(req).await))
        }));
    } else {
        let parsed: Vec<Result<AclBindingFilter, String>> =
            req.filters.iter().map(wire::delete_filter).collect();
        let valid: Vec<AclBindingFilter> = parsed.iter().filter_map(|r| r.clone().ok()).collect();
        match ctx.broker.acls.delete(&valid) {
            Err(reason) => req
                .filters
                .iter()
                .map(|_| failed(ErrorCode::UnknownServerError, &reason))
                .collect(),
            Ok(deleted) => {
                let mut deleted = deleted.into_iter();
                parsed
                    .into_iter()
                    .map(|r| match r {
                        Err(reason) => failed(ErrorCode::InvalidRequest, &reason),
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
        }
    };
    Reply::Body(ResponseBody::DeleteAcls(DeleteAclsResponse {
        filter_results,
        ..Default::default()
    }))
}
