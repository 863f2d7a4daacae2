//! Kafka's ACL vocabulary: resource types, pattern types, operations and
//! permissions with their wire codes and names, ACL bindings and the
//! filters that DescribeAcls and DeleteAcls select them with.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Declares a Kafka ACL enum: wire code, upper-case name (as Kafka's
/// `toString` and its tools print it), parsing from either.
macro_rules! acl_enum {
    ($(#[$m:meta])* $name:ident { $($(#[$vm:meta])* $v:ident = $code:literal, $text:literal;)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(into = "String", try_from = "String")]
        pub enum $name {
            $($(#[$vm])* $v,)*
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v,)*];

            /// The wire code.
            pub fn code(self) -> i8 {
                match self {
                    $($name::$v => $code,)*
                }
            }

            /// The value of a wire code; `None` for UNKNOWN (0) and codes
            /// Kafka does not define.
            pub fn from_code(code: i8) -> Option<$name> {
                match code {
                    $($code => Some($name::$v),)*
                    _ => None,
                }
            }

            /// Kafka's name, e.g. `TRANSACTIONAL_ID`.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$v => $text,)*
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }

        /// Kafka's name in any case, with `-` or `_` between words
        /// (`transactional-id`, `TransactionalId` is not accepted).
        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<$name, String> {
                let wanted = s.trim().to_ascii_uppercase().replace('-', "_");
                $name::ALL
                    .iter()
                    .copied()
                    .find(|v| v.name() == wanted)
                    .ok_or_else(|| {
                        let names: Vec<&str> = $name::ALL.iter().map(|v| v.name()).collect();
                        format!("unknown {} {s:?} (one of {})", stringify!($name), names.join(", "))
                    })
            }
        }

        impl From<$name> for String {
            fn from(v: $name) -> String {
                v.name().to_string()
            }
        }

        impl TryFrom<String> for $name {
            type Error = String;
            fn try_from(s: String) -> Result<$name, String> {
                s.parse()
            }
        }
    };
}

acl_enum! {
    /// Kafka's `ResourceType`.
    ResourceType {
        /// Only in filters: any resource type.
        Any = 1, "ANY";
        Topic = 2, "TOPIC";
        Group = 3, "GROUP";
        Cluster = 4, "CLUSTER";
        TransactionalId = 5, "TRANSACTIONAL_ID";
        DelegationToken = 6, "DELEGATION_TOKEN";
        User = 7, "USER";
    }
}

acl_enum! {
    /// Kafka's `PatternType`.
    PatternType {
        /// Only in filters: a pattern of either type with the filter's name.
        Any = 1, "ANY";
        /// Only in filters: every pattern that applies to the named
        /// resource (the literal name, the literal `*`, prefixes of it).
        Match = 2, "MATCH";
        /// The resource with exactly this name (`*`: every resource).
        Literal = 3, "LITERAL";
        /// Every resource whose name starts with this one.
        Prefixed = 4, "PREFIXED";
    }
}

acl_enum! {
    /// Kafka's `AclOperation`.
    Operation {
        /// Only in filters.
        Any = 1, "ANY";
        /// Every operation.
        All = 2, "ALL";
        Read = 3, "READ";
        Write = 4, "WRITE";
        Create = 5, "CREATE";
        Delete = 6, "DELETE";
        Alter = 7, "ALTER";
        Describe = 8, "DESCRIBE";
        ClusterAction = 9, "CLUSTER_ACTION";
        DescribeConfigs = 10, "DESCRIBE_CONFIGS";
        AlterConfigs = 11, "ALTER_CONFIGS";
        IdempotentWrite = 12, "IDEMPOTENT_WRITE";
        CreateTokens = 13, "CREATE_TOKENS";
        DescribeTokens = 14, "DESCRIBE_TOKENS";
    }
}

acl_enum! {
    /// Kafka's `AclPermissionType`.
    Permission {
        /// Only in filters.
        Any = 1, "ANY";
        Deny = 2, "DENY";
        Allow = 3, "ALLOW";
    }
}

/// The only name a CLUSTER resource has.
pub const CLUSTER_NAME: &str = "kafka-cluster";
/// A literal resource name that stands for every resource of its type.
pub const WILDCARD_RESOURCE: &str = "*";
/// An ACL principal that stands for every principal.
pub const WILDCARD_PRINCIPAL: &str = "User:*";
/// An ACL host that stands for every host.
pub const WILDCARD_HOST: &str = "*";

/// Which resources an ACL applies to.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct ResourcePattern {
    pub resource_type: ResourceType,
    pub name: String,
    pub pattern_type: PatternType,
}

/// Who may or may not do what from where.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AccessControlEntry {
    /// `Type:name`, e.g. `User:alice`, or `User:*`.
    pub principal: String,
    /// A client IP address as the broker sees it, or `*`.
    pub host: String,
    pub operation: Operation,
    pub permission: Permission,
}

/// One ACL: a pattern and an entry (Kafka's `AclBinding`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AclBinding {
    pub pattern: ResourcePattern,
    pub entry: AccessControlEntry,
}

/// Why an ACL cannot be created (Kafka answers INVALID_REQUEST).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidAcl {
    #[error("invalid resource type {0} for an ACL")]
    ResourceType(ResourceType),
    #[error("invalid pattern type {0} for an ACL (LITERAL or PREFIXED)")]
    PatternType(PatternType),
    #[error("invalid operation {0} for an ACL")]
    Operation(Operation),
    #[error("invalid permission type {0} for an ACL (ALLOW or DENY)")]
    Permission(Permission),
    #[error("the resource name must not be empty")]
    EmptyName,
    #[error("a CLUSTER resource is named {CLUSTER_NAME}, not {0:?}")]
    ClusterName(String),
    #[error("a PREFIXED pattern cannot use the wildcard name *")]
    PrefixedWildcard,
    #[error("invalid principal {0:?}: expected Type:name, e.g. User:alice")]
    Principal(String),
    #[error("the host must not be empty (use * for every host)")]
    EmptyHost,
}

impl AclBinding {
    /// Kafka's checks of a new ACL (`AclControlManager.validateNewAcl`):
    /// concrete resource, pattern, operation and permission types, a
    /// non-empty name, `kafka-cluster` for the CLUSTER resource, a
    /// principal of the form `Type:name`.
    pub fn validate(&self) -> Result<(), InvalidAcl> {
        let p = &self.pattern;
        let e = &self.entry;
        if matches!(p.resource_type, ResourceType::Any) {
            return Err(InvalidAcl::ResourceType(p.resource_type));
        }
        if !matches!(p.pattern_type, PatternType::Literal | PatternType::Prefixed) {
            return Err(InvalidAcl::PatternType(p.pattern_type));
        }
        if matches!(e.operation, Operation::Any) {
            return Err(InvalidAcl::Operation(e.operation));
        }
        if matches!(e.permission, Permission::Any) {
            return Err(InvalidAcl::Permission(e.permission));
        }
        if p.name.is_empty() {
            return Err(InvalidAcl::EmptyName);
        }
        if p.resource_type == ResourceType::Cluster && p.name != CLUSTER_NAME {
            return Err(InvalidAcl::ClusterName(p.name.clone()));
        }
        if p.pattern_type == PatternType::Prefixed && p.name == WILDCARD_RESOURCE {
            return Err(InvalidAcl::PrefixedWildcard);
        }
        if split_principal(&e.principal).is_none() {
            return Err(InvalidAcl::Principal(e.principal.clone()));
        }
        if e.host.is_empty() {
            return Err(InvalidAcl::EmptyHost);
        }
        Ok(())
    }
}

impl AclBinding {
    /// An ACL from the wire codes of a CreateAcls creation or an
    /// `AccessControlEntryRecord`, checked with [`AclBinding::validate`];
    /// `Err` is the reason Kafka answers with INVALID_REQUEST.
    pub fn from_codes(
        resource_type: i8,
        name: &str,
        pattern_type: i8,
        principal: &str,
        host: &str,
        operation: i8,
        permission: i8,
    ) -> Result<AclBinding, String> {
        let b = AclBinding {
            pattern: ResourcePattern {
                resource_type: ResourceType::from_code(resource_type)
                    .ok_or_else(|| format!("unknown resource type {resource_type}"))?,
                name: name.to_string(),
                pattern_type: PatternType::from_code(pattern_type)
                    .ok_or_else(|| format!("unknown pattern type {pattern_type}"))?,
            },
            entry: AccessControlEntry {
                principal: principal.to_string(),
                host: host.to_string(),
                operation: Operation::from_code(operation)
                    .ok_or_else(|| format!("unknown operation {operation}"))?,
                permission: Permission::from_code(permission)
                    .ok_or_else(|| format!("unknown permission type {permission}"))?,
            },
        };
        b.validate().map_err(|e| e.to_string())?;
        Ok(b)
    }
}

/// `Type:name` split at the first colon; `None` without one or with an
/// empty part.
pub fn split_principal(p: &str) -> Option<(&str, &str)> {
    let (t, n) = p.split_once(':')?;
    (!t.is_empty() && !n.is_empty()).then_some((t, n))
}

/// Selects ACL bindings (DescribeAcls, DeleteAcls): each field `None` or
/// `ANY` matches everything.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AclBindingFilter {
    pub resource_type: ResourceType,
    pub name: Option<String>,
    pub pattern_type: PatternType,
    pub principal: Option<String>,
    pub host: Option<String>,
    pub operation: Operation,
    pub permission: Permission,
}

impl AclBindingFilter {
    /// Matches every binding.
    pub fn any() -> AclBindingFilter {
        AclBindingFilter {
            resource_type: ResourceType::Any,
            name: None,
            pattern_type: PatternType::Any,
            principal: None,
            host: None,
            operation: Operation::Any,
            permission: Permission::Any,
        }
    }

    /// A filter from the wire codes of DescribeAcls or a DeleteAcls
    /// filter; `Err` (an unknown code) is Kafka's INVALID_REQUEST reason.
    pub fn from_codes(
        resource_type: i8,
        name: Option<&str>,
        pattern_type: i8,
        principal: Option<&str>,
        host: Option<&str>,
        operation: i8,
        permission: i8,
    ) -> Result<AclBindingFilter, String> {
        Ok(AclBindingFilter {
            resource_type: ResourceType::from_code(resource_type)
                .ok_or_else(|| format!("unknown resource type {resource_type}"))?,
            name: name.map(str::to_string),
            pattern_type: PatternType::from_code(pattern_type)
                .ok_or_else(|| format!("unknown pattern type {pattern_type}"))?,
            principal: principal.map(str::to_string),
            host: host.map(str::to_string),
            operation: Operation::from_code(operation)
                .ok_or_else(|| format!("unknown operation {operation}"))?,
            permission: Permission::from_code(permission)
                .ok_or_else(|| format!("unknown permission type {permission}"))?,
        })
    }

    /// Kafka's `ResourcePatternFilter.matches` and
    /// `AccessControlEntryFilter.matches`.
    pub fn matches(&self, b: &AclBinding) -> bool {
        self.matches_pattern(&b.pattern) && self.matches_entry(&b.entry)
    }

    fn matches_pattern(&self, p: &ResourcePattern) -> bool {
        if self.resource_type != ResourceType::Any && self.resource_type != p.resource_type {
            return false;
        }
        match self.pattern_type {
            PatternType::Any => self.name.as_deref().is_none_or(|n| n == p.name),
            PatternType::Match => match self.name.as_deref() {
                None => true,
                Some(n) => match p.pattern_type {
                    PatternType::Literal => p.name == n || p.name == WILDCARD_RESOURCE,
                    PatternType::Prefixed => n.starts_with(p.name.as_str()),
                    _ => false,
                },
            },
            t => t == p.pattern_type && self.name.as_deref().is_none_or(|n| n == p.name),
        }
    }

    fn matches_entry(&self, e: &AccessControlEntry) -> bool {
        self.principal.as_deref().is_none_or(|p| p == e.principal)
            && self.host.as_deref().is_none_or(|h| h == e.host)
            && (self.operation == Operation::Any || self.operation == e.operation)
            && (self.permission == Permission::Any || self.permission == e.permission)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn binding(rt: ResourceType, name: &str, pt: PatternType) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: rt,
                name: name.into(),
                pattern_type: pt,
            },
            entry: AccessControlEntry {
                principal: "User:alice".into(),
                host: "*".into(),
                operation: Operation::Read,
                permission: Permission::Allow,
            },
        }
    }

    #[test]
    fn codes_and_names_round_trip() {
        for v in Operation::ALL {
            assert_eq!(Operation::from_code(v.code()), Some(*v));
            assert_eq!(v.name().parse::<Operation>(), Ok(*v));
        }
        assert_eq!(ResourceType::TransactionalId.code(), 5);
        assert_eq!(
            "transactional-id".parse::<ResourceType>(),
            Ok(ResourceType::TransactionalId)
        );
        assert_eq!(Operation::from_code(0), None);
        assert_eq!(Operation::IdempotentWrite.code(), 12);
        assert_eq!(PatternType::Prefixed.code(), 4);
        assert_eq!(Permission::Allow.code(), 3);
        assert!("bogus".parse::<Permission>().is_err());
    }

    #[test]
    fn validation_follows_kafka() {
        let ok = binding(ResourceType::Topic, "t", PatternType::Literal);
        assert_eq!(ok.validate(), Ok(()));
        let mut b = ok.clone();
        b.pattern.pattern_type = PatternType::Match;
        assert!(matches!(b.validate(), Err(InvalidAcl::PatternType(_))));
        let mut b = ok.clone();
        b.pattern.resource_type = ResourceType::Cluster;
        assert!(matches!(b.validate(), Err(InvalidAcl::ClusterName(_))));
        b.pattern.name = CLUSTER_NAME.into();
        assert_eq!(b.validate(), Ok(()));
        let mut b = ok.clone();
        b.entry.principal = "alice".into();
        assert!(matches!(b.validate(), Err(InvalidAcl::Principal(_))));
        let mut b = ok.clone();
        b.entry.operation = Operation::Any;
        assert!(b.validate().is_err());
        let mut b = ok.clone();
        b.pattern.name.clear();
        assert_eq!(b.validate(), Err(InvalidAcl::EmptyName));
    }

    #[test]
    fn filters_match_like_kafka() {
        let lit = binding(ResourceType::Topic, "orders", PatternType::Literal);
        let star = binding(ResourceType::Topic, "*", PatternType::Literal);
        let pre = binding(ResourceType::Topic, "ord", PatternType::Prefixed);
        let other = binding(ResourceType::Group, "orders", PatternType::Literal);
        let mut f = AclBindingFilter::any();
        assert!([&lit, &star, &pre, &other].iter().all(|b| f.matches(b)));
        f.resource_type = ResourceType::Topic;
        f.name = Some("orders".into());
        f.pattern_type = PatternType::Match;
        assert!(f.matches(&lit) && f.matches(&star) && f.matches(&pre));
        assert!(!f.matches(&other));
        f.pattern_type = PatternType::Any;
        assert!(f.matches(&lit) && !f.matches(&star) && !f.matches(&pre));
        f.pattern_type = PatternType::Prefixed;
        assert!(!f.matches(&lit));
        f.name = Some("ord".into());
        assert!(f.matches(&pre));
        let mut f = AclBindingFilter::any();
        f.permission = Permission::Deny;
        assert!(!f.matches(&lit));
        f.permission = Permission::Allow;
        f.principal = Some("User:bob".into());
        assert!(!f.matches(&lit));
    }
}
