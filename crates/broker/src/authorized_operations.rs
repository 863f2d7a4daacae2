//! The ACL operations each resource type supports, and the bit field in
//! which responses report the operations the client may perform
//! (`topic_authorized_operations`, `cluster_authorized_operations`, a
//! group's `authorized_operations`).
//!
//! Without an authorizer every client may do everything a resource
//! supports, as Kafka answers; with one, each supported operation is asked
//! of the authorizer for the request's principal (Kafka's
//! `AuthHelper.authorizedOperations`), implied operations included (READ
//! brings DESCRIBE). A response carries the field only when the request
//! asks for it; otherwise it is [`NOT_REQUESTED`].

use weir_acl::{CLUSTER_NAME, Operation};

use crate::handler::RequestContext;

/// A resource type whose operations responses report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
}

impl ResourceType {
    fn acl(self) -> weir_acl::ResourceType {
        match self {
            ResourceType::Topic => weir_acl::ResourceType::Topic,
            ResourceType::Group => weir_acl::ResourceType::Group,
            ResourceType::Cluster => weir_acl::ResourceType::Cluster,
        }
    }
}

/// What each resource type supports (Kafka 4.0's `AclEntry.supportedOperations`).
pub fn supported_operations(resource: ResourceType) -> &'static [Operation] {
    use Operation::*;
    match resource {
        ResourceType::Topic => &[
            Read,
            Write,
            Create,
            Describe,
            Delete,
            Alter,
            DescribeConfigs,
            AlterConfigs,
        ],
        ResourceType::Group => &[Read, Describe, Delete, DescribeConfigs, AlterConfigs],
        ResourceType::Cluster => &[
            Create,
            ClusterAction,
            DescribeConfigs,
            AlterConfigs,
            IdempotentWrite,
            Alter,
            Describe,
        ],
    }
}

/// The value of an authorized-operations field the request did not ask for.
pub const NOT_REQUESTED: i32 = i32::MIN;

/// Bit `code` set for each operation (Kafka's `Utils.to32BitField`).
pub fn to_bit_field(ops: impl IntoIterator<Item = Operation>) -> i32 {
    ops.into_iter().fold(0, |bits, op| bits | (1 << op.code()))
}

/// Every operation `resource` supports, as a bit field: the answer without
/// an authorizer.
pub fn all_supported(resource: ResourceType) -> i32 {
    to_bit_field(supported_operations(resource).iter().copied())
}

/// The field for the resource `name` of type `resource`: the operations
/// the request's principal may perform on it when `requested`, else
/// [`NOT_REQUESTED`].
pub fn authorized_operations(
    ctx: &RequestContext,
    resource: ResourceType,
    name: &str,
    requested: bool,
) -> i32 {
    if !requested {
        return NOT_REQUESTED;
    }
    if !ctx.broker.acls.enabled() {
        return all_supported(resource);
    }
    to_bit_field(
        supported_operations(resource)
            .iter()
            .copied()
            .filter(|op| ctx.authorize(*op, resource.acl(), name)),
    )
}

/// The cluster's field in Metadata (v8-10) and DescribeCluster: the
/// principal's operations on the cluster when it may DESCRIBE it, 0 when
/// it may not (Kafka reveals nothing then), [`NOT_REQUESTED`] unless asked.
pub fn cluster_authorized_operations(ctx: &RequestContext, requested: bool) -> i32 {
    if requested && !ctx.authorize_cluster(Operation::Describe) {
        return 0;
    }
    authorized_operations(ctx, ResourceType::Cluster, CLUSTER_NAME, requested)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_fields_match_kafka() {
        // READ|WRITE|CREATE|DELETE|ALTER|DESCRIBE|DESCRIBE_CONFIGS|ALTER_CONFIGS
        assert_eq!(all_supported(ResourceType::Topic), 3576);
        // READ|DELETE|DESCRIBE|DESCRIBE_CONFIGS|ALTER_CONFIGS
        assert_eq!(all_supported(ResourceType::Group), 3400);
        // CREATE|ALTER|DESCRIBE|CLUSTER_ACTION|DESCRIBE_CONFIGS|ALTER_CONFIGS|IDEMPOTENT_WRITE
        assert_eq!(all_supported(ResourceType::Cluster), 8096);
        assert_eq!(to_bit_field([Operation::Read, Operation::Describe]), 264);
    }
}
