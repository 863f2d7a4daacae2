//! Authorization decisions with the semantics of Kafka's
//! `StandardAuthorizer`:
//!
//! 1. a super user (`super.users`) may do everything;
//! 2. the ACLs that apply to the resource are those with its literal name,
//!    the literal wildcard `*`, and every prefix of its name; of these,
//!    those whose principal is the client's (or `User:*`) and whose host
//!    is the client's address (or `*`) count;
//! 3. a counting DENY for the operation (or ALL) refuses, whatever ALLOWs
//!    there are: **DENY wins**;
//! 4. else a counting ALLOW for the operation, for ALL, or for an
//!    operation that implies it (READ, WRITE, DELETE and ALTER imply
//!    DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS) permits;
//! 5. else, when no ACL at all applies to the resource (for any principal)
//!    and `allow.everyone.if.no.acl.found` is set, everyone may;
//! 6. else refused.
//!
//! [`Authorizer`] is an immutable snapshot built from the ACL set and
//! indexed by resource type and name, so a decision is a hash lookup, a
//! scan of the prefixes of that type and comparisons of borrowed strings:
//! no allocation. The broker swaps in a new snapshot when ACLs change.

use std::collections::HashMap;

use crate::types::{
    AclBinding, Operation, PatternType, Permission, ResourceType, WILDCARD_HOST,
    WILDCARD_PRINCIPAL, WILDCARD_RESOURCE, split_principal,
};

/// The authorizer's settings (`super.users`,
/// `allow.everyone.if.no.acl.found`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AuthorizerConfig {
    /// Principals as `Type:name`.
    pub super_users: Vec<String>,
    pub allow_everyone_if_no_acl_found: bool,
}

impl AuthorizerConfig {
    /// `super.users` as Kafka writes it: principals separated by `;`.
    pub fn parse_super_users(value: &str) -> Result<Vec<String>, String> {
        value
            .split(';')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .map(|p| match split_principal(p) {
                Some(_) => Ok(p.to_string()),
                None => Err(format!(
                    "super.users: {p:?} is not a principal of the form Type:name (e.g. User:admin)"
                )),
            })
            .collect()
    }
}

/// Who asks: the connection's principal and the client's address.
#[derive(Debug, Clone, Copy)]
pub struct Requestor<'a> {
    pub principal_type: &'a str,
    pub principal_name: &'a str,
    /// The client's IP address as text (`127.0.0.1`, `::1`).
    pub host: &'a str,
}

/// One ACL entry as a decision needs it.
#[derive(Debug, Clone)]
struct Rule {
    /// `None`: `User:*`.
    principal: Option<(String, String)>,
    /// `None`: `*`.
    host: Option<String>,
    operation: Operation,
    permission: Permission,
}

impl Rule {
    fn counts_for(&self, who: &Requestor<'_>) -> bool {
        let principal_ok = match &self.principal {
            None => true,
            Some((t, n)) => t == who.principal_type && n == who.principal_name,
        };
        principal_ok && self.host.as_deref().is_none_or(|h| h == who.host)
    }
}

/// The rules of one resource type.
#[derive(Debug, Default, Clone)]
struct TypeIndex {
    literal: HashMap<String, Vec<Rule>>,
    /// Literal `*`.
    wildcard: Vec<Rule>,
    prefixed: Vec<(String, Vec<Rule>)>,
}

impl TypeIndex {
    fn is_empty(&self) -> bool {
        self.literal.is_empty() && self.wildcard.is_empty() && self.prefixed.is_empty()
    }

    /// Every rule group that applies to the resource `name`.
    fn applying<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [Rule]> + 'a {
        let literal = self.literal.get(name).map(Vec::as_slice);
        let wildcard = (!self.wildcard.is_empty()).then_some(self.wildcard.as_slice());
        let prefixed = self
            .prefixed
            .iter()
            .filter(move |(p, _)| name.starts_with(p.as_str()))
            .map(|(_, rules)| rules.as_slice());
        literal.into_iter().chain(wildcard).chain(prefixed)
    }
}

/// An ALLOW for `granted` permits `wanted` (Kafka's implied operations).
fn allow_covers(granted: Operation, wanted: Operation) -> bool {
    use Operation::*;
    granted == All
        || granted == wanted
        || (wanted == Describe && matches!(granted, Read | Write | Delete | Alter))
        || (wanted == DescribeConfigs && granted == AlterConfigs)
}

/// A DENY for `denied` refuses `wanted`.
fn deny_covers(denied: Operation, wanted: Operation) -> bool {
    denied == Operation::All || denied == wanted
}

/// An immutable, indexed ACL snapshot with the authorizer's settings.
#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    super_users: Vec<(String, String)>,
    super_user_wildcard: bool,
    allow_everyone_if_no_acl_found: bool,
    by_type: HashMap<ResourceType, TypeIndex>,
    count: usize,
}

impl Authorizer {
    /// A snapshot of `bindings` (assumed valid, see
    /// [`AclBinding::validate`]; invalid ones are skipped).
    pub fn new<'a>(
        config: &AuthorizerConfig,
        bindings: impl IntoIterator<Item = &'a AclBinding>,
    ) -> Authorizer {
        let mut a = Authorizer {
            super_users: Vec::new(),
            super_user_wildcard: false,
            allow_everyone_if_no_acl_found: config.allow_everyone_if_no_acl_found,
            by_type: HashMap::new(),
            count: 0,
        };
        for su in &config.super_users {
            if su == WILDCARD_PRINCIPAL {
                a.super_user_wildcard = true;
            } else if let Some((t, n)) = split_principal(su) {
                a.super_users.push((t.to_string(), n.to_string()));
            }
        }
        let mut prefixed: HashMap<ResourceType, HashMap<String, Vec<Rule>>> = HashMap::new();
        for b in bindings {
            if b.validate().is_err() {
                continue;
            }
            let principal = if b.entry.principal == WILDCARD_PRINCIPAL {
                None
            } else {
                split_principal(&b.entry.principal).map(|(t, n)| (t.to_string(), n.to_string()))
            };
            let rule = Rule {
                principal,
                host: (b.entry.host != WILDCARD_HOST).then(|| b.entry.host.clone()),
                operation: b.entry.operation,
                permission: b.entry.permission,
            };
            let p = &b.pattern;
            let index = a.by_type.entry(p.resource_type).or_default();
            match p.pattern_type {
                PatternType::Literal if p.name == WILDCARD_RESOURCE => index.wildcard.push(rule),
                PatternType::Literal => index.literal.entry(p.name.clone()).or_default().push(rule),
                _ => prefixed
                    .entry(p.resource_type)
                    .or_default()
                    .entry(p.name.clone())
                    .or_default()
                    .push(rule),
            }
            a.count += 1;
        }
        for (rt, groups) in prefixed {
            let mut groups: Vec<(String, Vec<Rule>)> = groups.into_iter().collect();
            groups.sort_by(|x, y| x.0.cmp(&y.0));
            a.by_type.entry(rt).or_default().prefixed = groups;
        }
        a
    }

    /// How many ACLs the snapshot holds.
    pub fn acl_count(&self) -> usize {
        self.count
    }

    pub fn is_super_user(&self, who: &Requestor<'_>) -> bool {
        self.super_user_wildcard
            || self
                .super_users
                .iter()
                .any(|(t, n)| t == who.principal_type && n == who.principal_name)
    }

    /// May `who` perform `op` on the resource `name` of type `rt`?
    pub fn authorize(
        &self,
        who: &Requestor<'_>,
        op: Operation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        if self.is_super_user(who) {
            return true;
        }
        let Some(index) = self.by_type.get(&rt) else {
            return self.allow_everyone_if_no_acl_found;
        };
        let mut any_applies = false;
        let mut allowed = false;
        for rules in index.applying(name) {
            any_applies |= !rules.is_empty();
            for r in rules.iter().filter(|r| r.counts_for(who)) {
                match r.permission {
                    Permission::Deny if deny_covers(r.operation, op) => return false,
                    Permission::Allow if allow_covers(r.operation, op) => allowed = true,
                    _ => {}
                }
            }
        }
        allowed || (!any_applies && self.allow_everyone_if_no_acl_found)
    }

    /// May `who` perform `op` on at least one resource of type `rt`?
    /// Kafka's `authorizeByResourceType`, used where an operation on any
    /// resource of a type grants something (an idempotent producer may
    /// write when it may WRITE some topic): true when an ALLOW for `op`
    /// (or ALL) counts for `who` on a pattern no counting DENY covers
    /// entirely (a DENY on `*`, on the same literal, or on a prefix of the
    /// allowed name or prefix).
    pub fn authorize_any(&self, who: &Requestor<'_>, op: Operation, rt: ResourceType) -> bool {
        if self.is_super_user(who) {
            return true;
        }
        let Some(index) = self.by_type.get(&rt).filter(|i| !i.is_empty()) else {
            return self.allow_everyone_if_no_acl_found;
        };
        let counting = |rules: &[Rule], perm: Permission| -> bool {
            rules
                .iter()
                .any(|r| r.permission == perm && r.counts_for(who) && deny_covers(r.operation, op))
        };
        if counting(&index.wildcard, Permission::Deny) {
            return false;
        }
        let deny_prefixes: Vec<&str> = index
            .prefixed
            .iter()
            .filter(|(_, rules)| counting(rules, Permission::Deny))
            .map(|(p, _)| p.as_str())
            .collect();
        let denied_by_prefix = |name: &str| deny_prefixes.iter().any(|d| name.starts_with(d));
        if counting(&index.wildcard, Permission::Allow) {
            return true;
        }
        let literal_ok = index.literal.iter().any(|(name, rules)| {
            counting(rules, Permission::Allow)
                && !counting(rules, Permission::Deny)
                && !denied_by_prefix(name)
        });
        literal_ok
            || index
                .prefixed
                .iter()
                .any(|(p, rules)| counting(rules, Permission::Allow) && !denied_by_prefix(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{AccessControlEntry, ResourcePattern};

    fn acl(
        rt: ResourceType,
        name: &str,
        pt: PatternType,
        principal: &str,
        host: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        AclBinding {
            pattern: ResourcePattern {
                resource_type: rt,
                name: name.into(),
                pattern_type: pt,
            },
            entry: AccessControlEntry {
                principal: principal.into(),
                host: host.into(),
                operation: op,
                permission: perm,
            },
        }
    }

    fn topic(
        name: &str,
        pt: PatternType,
        who: &str,
        op: Operation,
        perm: Permission,
    ) -> AclBinding {
        acl(ResourceType::Topic, name, pt, who, "*", op, perm)
    }

    fn alice() -> Requestor<'static> {
        Requestor {
            principal_type: "User",
            principal_name: "alice",
            host: "10.0.0.1",
        }
    }

    fn bob() -> Requestor<'static> {
        Requestor {
            principal_type: "User",
            principal_name: "bob",
            host: "10.0.0.2",
        }
    }

    use Operation::*;
    use PatternType::*;
    use Permission::*;

    #[test]
    fn without_acls_only_super_users_or_allow_everyone() {
        let mut config = AuthorizerConfig {
            super_users: vec!["User:bob".into()],
            allow_everyone_if_no_acl_found: false,
        };
        let a = Authorizer::new(&config, []);
        assert!(!a.authorize(&alice(), Read, ResourceType::Topic, "t"));
        assert!(a.authorize(&bob(), Read, ResourceType::Topic, "t"));
        config.allow_everyone_if_no_acl_found = true;
        let a = Authorizer::new(&config, []);
        assert!(a.authorize(&alice(), Read, ResourceType::Topic, "t"));
    }

    #[test]
    fn literal_prefixed_and_wildcard_patterns_apply() {
        let acls = [
            topic("orders", Literal, "User:alice", Read, Allow),
            topic("pay-", Prefixed, "User:alice", Write, Allow),
            topic("*", Literal, "User:bob", Describe, Allow),
        ];
        let a = Authorizer::new(&AuthorizerConfig::default(), &acls);
        let t = ResourceType::Topic;
        assert!(a.authorize(&alice(), Read, t, "orders"));
        assert!(!a.authorize(&alice(), Read, t, "orders2"));
        assert!(!a.authorize(&alice(), Write, t, "orders"));
        assert!(a.authorize(&alice(), Write, t, "pay-eu"));
        assert!(!a.authorize(&alice(), Write, t, "pa"));
        assert!(a.authorize(&bob(), Describe, t, "anything"));
        assert!(!a.authorize(&bob(), Read, t, "orders"));
        // another resource type is not covered
        assert!(!a.authorize(&alice(), Read, ResourceType::Group, "orders"));
    }

    #[test]
    fn deny_wins_over_allow() {
        let acls = [
            topic("*", Literal, "User:*", All, Allow),
            topic("secret-", Prefixed, "User:alice", Read, Deny),
        ];
        let a = Authorizer::new(&AuthorizerConfig::default(), &acls);
        let t = ResourceType::Topic;
        assert!(a.authorize(&alice(), Read, t, "public"));
        assert!(!a.authorize(&alice(), Read, t, "secret-plans"));
        // a DENY of READ does not deny DESCRIBE
        assert!(a.authorize(&alice(), Describe, t, "secret-plans"));
        assert!(a.authorize(&bob(), Read, t, "secret-plans"));
        let deny_all = [
            topic("t", Literal, "User:alice", Read, Allow),
            topic("t", Literal, "User:*", All, Deny),
        ];
        let a = Authorizer::new(&AuthorizerConfig::default(), &deny_all);
        assert!(!a.authorize(&alice(), Read, t, "t"));
        assert!(!a.authorize(&alice(), Describe, t, "t"));
    }

    #[test]
    fn implied_operations() {
        let t = ResourceType::Topic;
        for granted in [Read, Write, Delete, Alter] {
            let a = Authorizer::new(
                &AuthorizerConfig::default(),
                &[topic("t", Literal, "User:alice", granted, Allow)],
            );
            assert!(a.authorize(&alice(), Describe, t, "t"), "{granted}");
            assert!(!a.authorize(&alice(), DescribeConfigs, t, "t"), "{granted}");
        }
        let a = Authorizer::new(
            &AuthorizerConfig::default(),
            &[topic("t", Literal, "User:alice", AlterConfigs, Allow)],
        );
        assert!(a.authorize(&alice(), DescribeConfigs, t, "t"));
        assert!(!a.authorize(&alice(), Describe, t, "t"));
        // DESCRIBE does not imply READ
        let a = Authorizer::new(
            &AuthorizerConfig::default(),
            &[topic("t", Literal, "User:alice", Describe, Allow)],
        );
        assert!(!a.authorize(&alice(), Read, t, "t"));
    }

    #[test]
    fn hosts_and_principals_must_match() {
        let acls = [acl(
            ResourceType::Group,
            "g",
            Literal,
            "User:alice",
            "10.0.0.9",
            Read,
            Allow,
        )];
        let a = Authorizer::new(&AuthorizerConfig::default(), &acls);
        let mut from_9 = alice();
        from_9.host = "10.0.0.9";
        assert!(a.authorize(&from_9, Read, ResourceType::Group, "g"));
        assert!(!a.authorize(&alice(), Read, ResourceType::Group, "g"));
        let mut other_type = from_9;
        other_type.principal_type = "Group";
        assert!(!a.authorize(&other_type, Read, ResourceType::Group, "g"));
    }

    #[test]
    fn allow_everyone_only_where_no_acl_applies() {
        let config = AuthorizerConfig {
            super_users: vec![],
            allow_everyone_if_no_acl_found: true,
        };
        let acls = [topic("orders", Literal, "User:bob", Read, Allow)];
        let a = Authorizer::new(&config, &acls);
        let t = ResourceType::Topic;
        // an ACL applies to orders (for bob): alice is not let in
        assert!(!a.authorize(&alice(), Read, t, "orders"));
        assert!(a.authorize(&alice(), Read, t, "other"));
    }

    #[test]
    fn authorize_any_follows_deny_coverage() {
        let t = ResourceType::Topic;
        let cfg = AuthorizerConfig::default();
        let a = Authorizer::new(&cfg, &[topic("t", Literal, "User:alice", Write, Allow)]);
        assert!(a.authorize_any(&alice(), Write, t));
        assert!(!a.authorize_any(&alice(), Read, t));
        assert!(!a.authorize_any(&bob(), Write, t));
        let a = Authorizer::new(
            &cfg,
            &[
                topic("t", Literal, "User:alice", Write, Allow),
                topic("t", Prefixed, "User:alice", Write, Deny),
            ],
        );
        assert!(!a.authorize_any(&alice(), Write, t));
        let a = Authorizer::new(
            &cfg,
            &[
                topic("pay-", Prefixed, "User:alice", All, Allow),
                topic("*", Literal, "User:alice", Write, Deny),
            ],
        );
        assert!(!a.authorize_any(&alice(), Write, t));
    }

    #[test]
    fn super_users_parse() {
        assert_eq!(
            AuthorizerConfig::parse_super_users("User:admin; User:broker ;"),
            Ok(vec!["User:admin".to_string(), "User:broker".to_string()])
        );
        assert!(AuthorizerConfig::parse_super_users("admin").is_err());
    }

    /// A direct reading of the rules over the binding list, against which
    /// the indexed snapshot is checked.
    fn reference(
        config: &AuthorizerConfig,
        acls: &[AclBinding],
        who: &Requestor<'_>,
        op: Operation,
        rt: ResourceType,
        name: &str,
    ) -> bool {
        let me = format!("{}:{}", who.principal_type, who.principal_name);
        if config.super_users.iter().any(|s| *s == me || s == "User:*") {
            return true;
        }
        let applying: Vec<&AclBinding> = acls
            .iter()
            .filter(|b| b.pattern.resource_type == rt)
            .filter(|b| match b.pattern.pattern_type {
                Literal => b.pattern.name == name || b.pattern.name == "*",
                Prefixed => name.starts_with(&b.pattern.name),
                _ => false,
            })
            .collect();
        let counting: Vec<&&AclBinding> = applying
            .iter()
            .filter(|b| b.entry.principal == me || b.entry.principal == "User:*")
            .filter(|b| b.entry.host == "*" || b.entry.host == who.host)
            .collect();
        if counting.iter().any(|b| {
            b.entry.permission == Deny && (b.entry.operation == op || b.entry.operation == All)
        }) {
            return false;
        }
        let implied: &[Operation] = match op {
            Describe => &[Read, Write, Delete, Alter],
            DescribeConfigs => &[AlterConfigs],
            _ => &[],
        };
        counting.iter().any(|b| {
            b.entry.permission == Allow
                && (b.entry.operation == op
                    || b.entry.operation == All
                    || implied.contains(&b.entry.operation))
        }) || (applying.is_empty() && config.allow_everyone_if_no_acl_found)
    }

    mod model {
        use super::*;
        use proptest::prelude::*;

        const NAMES: &[&str] = &["a", "ab", "abc", "b", "*"];
        const PRINCIPALS: &[&str] = &["User:alice", "User:bob", "User:*"];
        const HOSTS: &[&str] = &["*", "10.0.0.1", "10.0.0.2"];
        const OPS: &[Operation] = &[
            All,
            Read,
            Write,
            Describe,
            Alter,
            AlterConfigs,
            DescribeConfigs,
        ];

        fn binding() -> impl Strategy<Value = AclBinding> {
            (
                prop::sample::select(&[ResourceType::Topic, ResourceType::Group][..]),
                prop::sample::select(NAMES),
                any::<bool>(),
                prop::sample::select(PRINCIPALS),
                prop::sample::select(HOSTS),
                prop::sample::select(OPS),
                any::<bool>(),
            )
                .prop_map(|(rt, name, prefixed, p, h, op, allow)| {
                    let pt = if prefixed && name != "*" {
                        Prefixed
                    } else {
                        Literal
                    };
                    acl(rt, name, pt, p, h, op, if allow { Allow } else { Deny })
                })
        }

        proptest! {
            #[test]
            fn snapshot_decides_as_the_rules_read(
                acls in prop::collection::vec(binding(), 0..12),
                everyone in any::<bool>(),
                bob_super in any::<bool>(),
                name in prop::sample::select(&["a", "ab", "abc", "abd", "b", "c"][..]),
                op in prop::sample::select(OPS),
                who_bob in any::<bool>(),
            ) {
                let config = AuthorizerConfig {
                    super_users: if bob_super { vec!["User:bob".into()] } else { vec![] },
                    allow_everyone_if_no_acl_found: everyone,
                };
                let a = Authorizer::new(&config, &acls);
                let who = if who_bob { bob() } else { alice() };
                for rt in [ResourceType::Topic, ResourceType::Group] {
                    prop_assert_eq!(
                        a.authorize(&who, op, rt, name),
                        reference(&config, &acls, &who, op, rt, name)
                    );
                }
            }
        }
    }
}
