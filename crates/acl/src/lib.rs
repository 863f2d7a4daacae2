//! Kafka's access control lists for weir, as pure logic: the ACL model
//! ([`types`]), the checks of new ACLs and the filters of DescribeAcls and
//! DeleteAcls, and [`Authorizer`], which decides requests with the
//! semantics of Kafka's `StandardAuthorizer` (DENY wins, implied
//! operations, `super.users`, `allow.everyone.if.no.acl.found`).
//!
//! [`wire`] reads and writes the model in Kafka's ACL messages. Where ACLs
//! are stored and which operation each API needs are the broker's
//! business; this crate does no I/O.

pub mod authorizer;
pub mod types;
pub mod wire;

pub use authorizer::{Authorizer, AuthorizerConfig, Requestor};
pub use types::{
    AccessControlEntry, AclBinding, AclBindingFilter, CLUSTER_NAME, InvalidAcl, Operation,
    PatternType, Permission, ResourcePattern, ResourceType, WILDCARD_HOST, WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE, split_principal,
};
