//! What an authorization decision costs: `Authorizer::authorize` over a
//! snapshot of 10 000 ACLs (literal topics and groups, 100 prefixes, a few
//! wildcards and DENYs), for an allowed topic, a denied one, and a super
//! user. The broker makes one such decision per topic of a Produce or
//! Fetch; it allocates nothing.
//!
//! ```text
//! cargo bench -p weir-acl --bench authorize
//! ```

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use weir_acl::{
    AccessControlEntry, AclBinding, Authorizer, AuthorizerConfig, Operation, PatternType,
    Permission, Requestor, ResourcePattern, ResourceType,
};

fn acl(rt: ResourceType, name: String, pt: PatternType, user: &str, op: Operation) -> AclBinding {
    AclBinding {
        pattern: ResourcePattern {
            resource_type: rt,
            name,
            pattern_type: pt,
        },
        entry: AccessControlEntry {
            principal: format!("User:{user}"),
            host: "*".into(),
            operation: op,
            permission: Permission::Allow,
        },
    }
}

fn snapshot() -> Authorizer {
    let mut acls = Vec::new();
    for i in 0..5_000 {
        let user = format!("user-{}", i % 500);
        acls.push(acl(
            ResourceType::Topic,
            format!("topic-{i}"),
            PatternType::Literal,
            &user,
            Operation::Write,
        ));
        acls.push(acl(
            ResourceType::Group,
            format!("group-{i}"),
            PatternType::Literal,
            &user,
            Operation::Read,
        ));
    }
    for i in 0..100 {
        acls.push(acl(
            ResourceType::Topic,
            format!("team-{i}-"),
            PatternType::Prefixed,
            "user-7",
            Operation::Read,
        ));
    }
    let mut deny = acl(
        ResourceType::Topic,
        "*".into(),
        PatternType::Literal,
        "mallory",
        Operation::All,
    );
    deny.entry.permission = Permission::Deny;
    acls.push(deny);
    let config = AuthorizerConfig {
        super_users: vec!["User:admin".into()],
        allow_everyone_if_no_acl_found: false,
    };
    Authorizer::new(&config, &acls)
}

fn bench(c: &mut Criterion) {
    let a = snapshot();
    let who = |name: &'static str| Requestor {
        principal_type: "User",
        principal_name: name,
        host: "10.0.0.1",
    };
    let alice = who("user-7");
    c.bench_function("authorize: allowed literal topic", |b| {
        b.iter(|| {
            a.authorize(
                black_box(&alice),
                Operation::Write,
                ResourceType::Topic,
                black_box("topic-7"),
            )
        })
    });
    c.bench_function("authorize: allowed through a prefix", |b| {
        b.iter(|| {
            a.authorize(
                black_box(&alice),
                Operation::Read,
                ResourceType::Topic,
                black_box("team-42-orders"),
            )
        })
    });
    let mallory = who("mallory");
    c.bench_function("authorize: denied", |b| {
        b.iter(|| {
            a.authorize(
                black_box(&mallory),
                Operation::Read,
                ResourceType::Topic,
                black_box("topic-7"),
            )
        })
    });
    let admin = who("admin");
    c.bench_function("authorize: super user", |b| {
        b.iter(|| {
            a.authorize(
                black_box(&admin),
                Operation::Write,
                ResourceType::Topic,
                black_box("topic-7"),
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
