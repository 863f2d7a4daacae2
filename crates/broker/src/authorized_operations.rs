//! The ACL operations each resource type supports, and the bit field in
//! which responses report the operations a client may perform
//! (`topic_authorized_operations`, `cluster_authorized_operations`, a
//! group's `authorized_operations`).
//!
//! Weir has no authorizer, so every client may do everything a resource
//! supports; Kafka answers the same without an authorizer. An authorizer
//! would filter these sets per principal. A response carries the field only
//! when the request asks for it; otherwise it is [`NOT_REQUESTED`].

/// An ACL operation, numbered by its wire code (Kafka's `AclOperation`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum AclOperation {
    Read = 3,
    Write = 4,
    Create = 5,
    Delete = 6,
    Alter = 7,
    Describe = 8,
    ClusterAction = 9,
    DescribeConfigs = 10,
    AlterConfigs = 11,
    IdempotentWrite = 12,
}

/// A resource type whose operations responses report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceType {
    Topic,
    Group,
    Cluster,
}

/// What each resource type supports (Kafka 4.0's `AclEntry.supportedOperations`).
pub fn supported_operations(resource: ResourceType) -> &'static [AclOperation] {
    use AclOperation::*;
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
pub fn to_bit_field(ops: &[AclOperation]) -> i32 {
    ops.iter().fold(0, |bits, op| bits | (1 << *op as u8))
}

/// The field for `resource`: every supported operation when `requested`,
/// else [`NOT_REQUESTED`].
pub fn authorized_operations(resource: ResourceType, requested: bool) -> i32 {
    if requested {
        to_bit_field(supported_operations(resource))
    } else {
        NOT_REQUESTED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bit_fields_match_kafka() {
        // READ|WRITE|CREATE|DELETE|ALTER|DESCRIBE|DESCRIBE_CONFIGS|ALTER_CONFIGS
        assert_eq!(authorized_operations(ResourceType::Topic, true), 3576);
        // READ|DELETE|DESCRIBE|DESCRIBE_CONFIGS|ALTER_CONFIGS
        assert_eq!(authorized_operations(ResourceType::Group, true), 3400);
        // CREATE|ALTER|DESCRIBE|CLUSTER_ACTION|DESCRIBE_CONFIGS|ALTER_CONFIGS|IDEMPOTENT_WRITE
        assert_eq!(authorized_operations(ResourceType::Cluster, true), 8096);
        assert_eq!(authorized_operations(ResourceType::Topic, false), i32::MIN);
    }
}
