//! ACL administration: CreateAcls, DescribeAcls, DeleteAcls, with the ACL
//! model of `weir-acl`.

use weir_acl::{
    AccessControlEntry, AclBinding, AclBindingFilter, Operation, PatternType, Permission,
    ResourcePattern, ResourceType,
};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_acls_request::AclCreation;
use weir_protocol::messages::delete_acls_request::DeleteAclsFilter;
use weir_protocol::messages::{CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest};

use crate::client::Client;
use crate::error::ClientError;

/// A binding as a response names it, with codes a newer broker may send
/// that this client does not know mapped to `None` (then left out).
#[allow(clippy::too_many_arguments)]
fn binding_from_wire(
    resource_type: i8,
    name: String,
    pattern_type: i8,
    principal: String,
    host: String,
    operation: i8,
    permission: i8,
) -> Option<AclBinding> {
    Some(AclBinding {
        pattern: ResourcePattern {
            resource_type: ResourceType::from_code(resource_type)?,
            name,
            pattern_type: PatternType::from_code(pattern_type)?,
        },
        entry: AccessControlEntry {
            principal,
            host,
            operation: Operation::from_code(operation)?,
            permission: Permission::from_code(permission)?,
        },
    })
}

impl Client {
    /// Creates `acls` (CreateAcls); one result per binding, in order.
    pub async fn create_acls(
        &mut self,
        acls: &[AclBinding],
    ) -> Result<Vec<Result<(), ClientError>>, ClientError> {
        let req = CreateAclsRequest {
            creations: acls
                .iter()
                .map(|b| AclCreation {
                    resource_type: b.pattern.resource_type.code(),
                    resource_name: b.pattern.name.clone(),
                    resource_pattern_type: b.pattern.pattern_type.code(),
                    principal: b.entry.principal.clone(),
                    host: b.entry.host.clone(),
                    operation: b.entry.operation.code(),
                    permission_type: b.entry.permission.code(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let resp = self.any_connection().await?.send(&req).await?;
        if resp.results.len() != acls.len() {
            return Err(ClientError::Broker {
                context: "create ACLs".into(),
                code: ErrorCode::UnknownServerError,
                message: Some(format!(
                    "{} results for {} ACLs",
                    resp.results.len(),
                    acls.len()
                )),
            });
        }
        Ok(resp
            .results
            .into_iter()
            .zip(acls)
            .map(|(r, b)| {
                ClientError::check(
                    r.error_code,
                    || format!("create ACL {b:?}"),
                    r.error_message,
                )
            })
            .collect())
    }

    /// The ACLs `filter` matches (DescribeAcls).
    pub async fn describe_acls(
        &mut self,
        filter: &AclBindingFilter,
    ) -> Result<Vec<AclBinding>, ClientError> {
        let req = DescribeAclsRequest {
            resource_type_filter: filter.resource_type.code(),
            resource_name_filter: filter.name.clone(),
            pattern_type_filter: filter.pattern_type.code(),
            principal_filter: filter.principal.clone(),
            host_filter: filter.host.clone(),
            operation: filter.operation.code(),
            permission_type: filter.permission.code(),
            ..Default::default()
        };
        let resp = self.any_connection().await?.send(&req).await?;
        ClientError::check(
            resp.error_code,
            || "describe ACLs".into(),
            resp.error_message,
        )?;
        Ok(resp
            .resources
            .into_iter()
            .flat_map(|r| {
                let (rt, name, pt) = (r.resource_type, r.resource_name, r.pattern_type);
                r.acls.into_iter().filter_map(move |a| {
                    binding_from_wire(
                        rt,
                        name.clone(),
                        pt,
                        a.principal,
                        a.host,
                        a.operation,
                        a.permission_type,
                    )
                })
            })
            .collect())
    }

    /// Deletes what each filter matches (DeleteAcls); per filter, the
    /// deleted bindings or the filter's error.
    pub async fn delete_acls(
        &mut self,
        filters: &[AclBindingFilter],
    ) -> Result<Vec<Result<Vec<AclBinding>, ClientError>>, ClientError> {
        let req = DeleteAclsRequest {
            filters: filters
                .iter()
                .map(|f| DeleteAclsFilter {
                    resource_type_filter: f.resource_type.code(),
                    resource_name_filter: f.name.clone(),
                    pattern_type_filter: f.pattern_type.code(),
                    principal_filter: f.principal.clone(),
                    host_filter: f.host.clone(),
                    operation: f.operation.code(),
                    permission_type: f.permission.code(),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        };
        let resp = self.any_connection().await?.send(&req).await?;
        Ok(resp
            .filter_results
            .into_iter()
            .map(|r| {
                ClientError::check(r.error_code, || "delete ACLs".into(), r.error_message)?;
                Ok(r.matching_acls
                    .into_iter()
                    .filter_map(|a| {
                        binding_from_wire(
                            a.resource_type,
                            a.resource_name,
                            a.pattern_type,
                            a.principal,
                            a.host,
                            a.operation,
                            a.permission_type,
                        )
                    })
                    .collect())
            })
            .collect())
    }
}
