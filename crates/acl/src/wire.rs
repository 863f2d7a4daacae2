//! The ACL model as Kafka's ACL messages carry it: a CreateAcls creation
//! and a DeleteAcls filter read into the model (with [`AclBinding::from_codes`]'s
//! and [`AclBindingFilter::from_codes`]'s checks), and a deleted binding as
//! DeleteAcls reports it. One place for the broker's handlers and the
//! controller's listener.

use weir_protocol::messages::create_acls_request::AclCreation;
use weir_protocol::messages::delete_acls_request::DeleteAclsFilter;
use weir_protocol::messages::delete_acls_response::DeleteAclsMatchingAcl;

use crate::types::{AclBinding, AclBindingFilter};

/// The binding a CreateAcls creation asks for, or why it is invalid.
pub fn creation_binding(c: &AclCreation) -> Result<AclBinding, String> {
    AclBinding::from_codes(
        c.resource_type,
        &c.resource_name,
        c.resource_pattern_type,
        &c.principal,
        &c.host,
        c.operation,
        c.permission_type,
    )
}

/// The filter of a DeleteAcls request, or why it is invalid.
pub fn delete_filter(f: &DeleteAclsFilter) -> Result<AclBindingFilter, String> {
    AclBindingFilter::from_codes(
        f.resource_type_filter,
        f.resource_name_filter.as_deref(),
        f.pattern_type_filter,
        f.principal_filter.as_deref(),
        f.host_filter.as_deref(),
        f.operation,
        f.permission_type,
    )
}

/// A deleted binding as DeleteAcls reports it.
pub fn matching_acl(b: AclBinding) -> DeleteAclsMatchingAcl {
    DeleteAclsMatchingAcl {
        resource_type: b.pattern.resource_type.code(),
        resource_name: b.pattern.name,
        pattern_type: b.pattern.pattern_type.code(),
        principal: b.entry.principal,
        host: b.entry.host,
        operation: b.entry.operation.code(),
        permission_type: b.entry.permission.code(),
        ..Default::default()
    }
}
