//! DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics, for
//! the broker (dynamic broker configs, `dynamic_config`) and for groups
//! (describe and incremental alter, as Kafka 4.0).

use std::collections::BTreeMap;

use weir_acl::{CLUSTER_NAME, Operation, ResourceType as AclResource};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_configs_response::AlterConfigsResourceResponse;
use weir_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use weir_protocol::messages::incremental_alter_configs_response as inc_resp;
use weir_protocol::messages::{
    AlterConfigsRequest, AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse, ResponseBody,
};

use super::{Reply, RequestContext};
use crate::broker::Broker;
use crate::config::BrokerConfig;
use crate::configdef::{self, ConfigDef, ConfigType, DynamicMode};
use crate::dynamic_config::{self, Scope};
use crate::topic_config::{self, ConfigSource};

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;
pub const RESOURCE_GROUP: i8 = 32;

pub const OP_SET: i8 = 0;
pub const OP_DELETE: i8 = 1;
pub const OP_APPEND: i8 = 2;
pub const OP_SUBTRACT: i8 = 3;

fn describe_one(
    b: &Broker,
    resource_type: i8,
    name: &str,
    keys: Option<&Vec<String>>,
    synonyms: bool,
    docs: bool,
) -> DescribeConfigsResult {
    let mut result = DescribeConfigsResult {
        error_code: ErrorCode::None.code(),
        error_message: None,
        resource_type,
        resource_name: name.to_string(),
        configs: vec![],
        ..Default::default()
    };
    let want = |n: &str| keys.is_none_or(|k| k.iter().any(|x| x == n));
    match resource_type {
        RESOURCE_TOPIC => {
            // From the cluster snapshot: in a cluster, the image's
            // overrides, also for topics this broker hosts no replica of.
            let snap = b.cluster();
            let Some(configs) = snap.topic_configs(name) else {
                result.error_code = ErrorCode::UnknownTopicOrPartition.code();
                result.error_message = Some(format!("Topic {name} does not exist"));
                return result;
            };
            for r in topic_config::resolve_all(&b.effective_config(), configs) {
                if !want(r.def.name) {
                    continue;
                }
                result.configs.push(DescribeConfigsResourceResult {
                    name: r.def.name.to_string(),
                    value: r.value.clone(),
                    read_only: false,
                    config_source: r.source as i8,
                    is_sensitive: r.def.sensitive,
                    synonyms: if synonyms {
                        r.synonyms
                            .iter()
                            .map(|(n, v, s)| DescribeConfigsSynonym {
                                name: n.clone(),
                                value: v.clone(),
                                source: *s as i8,
                                ..Default::default()
                            })
                            .collect()
                    } else {
                        vec![]
                    },
                    config_type: r.def.ty.code(),
                    documentation: if docs { Some(String::new()) } else { None },
                    ..Default::default()
                });
            }
        }
        RESOURCE_BROKER => {
            let scope = match dynamic_config::scope_of(name, b.config.node_id) {
                Ok(s) => s,
                Err(msg) => {
                    result.error_code = ErrorCode::InvalidRequest.code();
                    result.error_message = Some(msg);
                    return result;
                }
            };
            let cfg = b.effective_config();
            // Kafka: the default resource lists only what is set there
            let defs: Vec<&ConfigDef> = match scope {
                Scope::ClusterDefault => cfg
                    .dynamic_default
                    .keys()
                    .filter_map(|k| configdef::broker_def(k))
                    .collect(),
                Scope::Broker(_) => configdef::BROKER_CONFIGS.iter().collect(),
            };
            for d in defs {
                if !want(d.name) {
                    continue;
                }
                let (value, chain) = broker_entry(&cfg, d, scope);
                let source = chain.first().map_or(ConfigSource::Default, |(_, _, s)| *s);
                result.configs.push(DescribeConfigsResourceResult {
                    name: d.name.to_string(),
                    value: if d.sensitive { None } else { value },
                    read_only: d.dynamic == DynamicMode::ReadOnly,
                    config_source: source as i8,
                    is_sensitive: d.sensitive,
                    synonyms: if synonyms {
                        chain
                            .into_iter()
                            .map(|(n, v, s)| DescribeConfigsSynonym {
                                name: n.to_string(),
                                value: if d.sensitive { None } else { v },
                                source: s as i8,
                                ..Default::default()
                            })
                            .collect()
                    } else {
                        vec![]
                    },
                    config_type: d.ty.code(),
                    documentation: if docs { Some(String::new()) } else { None },
                    ..Default::default()
                });
            }
        }
        RESOURCE_GROUP => {
            if name.is_empty() {
                result.error_code = ErrorCode::InvalidRequest.code();
                result.error_message = Some("Group name must not be empty".to_string());
                return result;
            }
            let cfg = b.effective_config();
            let set = b.group_configs(name);
            for d in configdef::GROUP_CONFIGS {
                if !want(d.name) {
                    continue;
                }
                // unset: the broker's value (its `group.*` synonym) is the default
                let default = d
                    .synonym
                    .and_then(|s| cfg.value(s))
                    .or_else(|| d.default.map(String::from));
                let mut chain = Vec::new();
                if let Some(v) = set.get(d.name) {
                    chain.push((v.clone(), ConfigSource::Group));
                }
                chain.push((default.clone().unwrap_or_default(), ConfigSource::Default));
                let (value, source) = match set.get(d.name) {
                    Some(v) => (Some(v.clone()), ConfigSource::Group),
                    None => (default, ConfigSource::Default),
                };
                result.configs.push(DescribeConfigsResourceResult {
                    name: d.name.to_string(),
                    value,
                    read_only: false,
                    config_source: source as i8,
                    is_sensitive: false,
                    synonyms: if synonyms {
                        chain
                            .into_iter()
                            .map(|(v, s)| DescribeConfigsSynonym {
                                name: d.name.to_string(),
                                value: Some(v),
                                source: s as i8,
                                ..Default::default()
                            })
                            .collect()
                    } else {
                        vec![]
                    },
                    config_type: d.ty.code(),
                    documentation: if docs { Some(String::new()) } else { None },
                    ..Default::default()
                });
            }
        }
        _ => {
            result.error_code = ErrorCode::InvalidRequest.code();
            result.error_message = Some(format!("Unsupported resource type {resource_type}"));
        }
    }
    result
}

/// One DescribeConfigs synonym: (name, value, source).
type Synonym = (&'static str, Option<String>, ConfigSource);

/// A broker config's value for `scope` and its synonyms, highest precedence
/// first: every synonym name per source, sources in Kafka's order (dynamic
/// for this broker, dynamic default, static, default). The cluster-default
/// resource has no per-broker layer.
fn broker_entry(
    cfg: &BrokerConfig,
    def: &'static ConfigDef,
    scope: Scope,
) -> (Option<String>, Vec<Synonym>) {
    let names: &[&'static str] = match configdef::broker_synonyms(def.name) {
        [] => std::slice::from_ref(&def.name),
        n => n,
    };
    let mut chain = Vec::new();
    for (layer, source) in cfg.layers() {
        if scope == Scope::ClusterDefault && source == ConfigSource::DynamicBroker {
            continue;
        }
        for n in names {
            if let Some(v) = layer.get(*n) {
                chain.push((*n, Some(v.clone()), source));
            }
        }
    }
    for n in names {
        if let Some(v) = configdef::broker_def(n).and_then(|d| d.default) {
            chain.push((*n, Some(v.to_string()), ConfigSource::Default));
        }
    }
    let value = match scope {
        Scope::ClusterDefault => cfg.dynamic_default.get(def.name).cloned(),
        Scope::Broker(_) => cfg.value(def.name),
    };
    (value, chain)
}

/// Kafka's check of a config resource: `op` (DESCRIBE_CONFIGS or
/// ALTER_CONFIGS) on the cluster for a BROKER resource, on the topic for a
/// TOPIC, on the group for a GROUP; the refusal's error code, or None.
/// Other resource types are answered by the handlers as unsupported.
fn refusal(
    ctx: &RequestContext,
    resource_type: i8,
    name: &str,
    op: Operation,
) -> Option<ErrorCode> {
    let (rt, name, code) = match resource_type {
        RESOURCE_BROKER => (
            AclResource::Cluster,
            CLUSTER_NAME,
            ErrorCode::ClusterAuthorizationFailed,
        ),
        RESOURCE_TOPIC => (
            AclResource::Topic,
            name,
            ErrorCode::TopicAuthorizationFailed,
        ),
        RESOURCE_GROUP => (
            AclResource::Group,
            name,
            ErrorCode::GroupAuthorizationFailed,
        ),
        _ => return None,
    };
    (!ctx.authorize(op, rt, name)).then_some(code)
}

fn refusal_message(code: ErrorCode, op: Operation, name: &str) -> Option<String> {
    Some(format!("{code:?}: not authorized to {op} {name}"))
}

pub fn describe(ctx: &RequestContext, req: DescribeConfigsRequest) -> Reply {
    let b = &ctx.broker;
    // Kafka answers the refused resources after the others.
    let op = Operation::DescribeConfigs;
    let (allowed, refused): (Vec<_>, Vec<_>) = req
        .resources
        .iter()
        .partition(|r| refusal(ctx, r.resource_type, &r.resource_name, op).is_none());
    let refused = refused.into_iter().map(|r| {
        let code = refusal(ctx, r.resource_type, &r.resource_name, op)
            .unwrap_or(ErrorCode::UnknownServerError);
        DescribeConfigsResult {
            error_code: code.code(),
            error_message: refusal_message(code, op, &r.resource_name),
            resource_type: r.resource_type,
            resource_name: r.resource_name.clone(),
            configs: vec![],
            ..Default::default()
        }
    });
    let results = allowed
        .into_iter()
        .map(|r| {
            describe_one(
                b,
                r.resource_type,
                &r.resource_name,
                r.configuration_keys.as_ref(),
                req.include_synonyms,
                req.include_documentation,
            )
        })
        .chain(refused)
        .collect();
    Reply::Body(ResponseBody::DescribeConfigs(DescribeConfigsResponse {
        throttle_time_ms: 0,
        results,
        ..Default::default()
    }))
}

/// Makes `configs` a topic's new override set: validated here, on every
/// broker alike (a bad name or value is INVALID_CONFIG), then applied by
/// the broker's [`TopicAdmin`](crate::cluster::TopicAdmin) (this broker's
/// logs on a single node, the active controller in a cluster). Returns
/// (error code, message).
async fn apply_topic(
    ctx: &RequestContext,
    name: &str,
    configs: Result<BTreeMap<String, String>, String>,
    validate_only: bool,
) -> (ErrorCode, Option<String>) {
    let b = &ctx.broker;
    let configs = match configs {
        Ok(c) => c,
        Err(msg) => return (ErrorCode::InvalidConfig, Some(msg)),
    };
    if b.cluster().topic(name).is_none() {
        return (
            ErrorCode::UnknownTopicOrPartition,
            Some(format!("Topic {name} does not exist")),
        );
    }
    let valid = topic_config::validate_overrides(&configs)
        .and_then(|()| topic_config::log_config(&b.effective_config(), &configs).validate());
    if let Err(msg) = valid {
        return (ErrorCode::InvalidConfig, Some(msg));
    }
    let admin = b.topic_admin();
    match admin
        .alter_topic_configs(ctx, name, configs, validate_only)
        .await
    {
        Ok(()) => (ErrorCode::None, None),
        Err((code, msg)) => (code, Some(msg)),
    }
}

/// The single node's [`TopicAdmin::alter_topic_configs`](crate::cluster::TopicAdmin::alter_topic_configs):
/// the topic store and every log of the topic take the new overrides.
pub async fn alter_topic_locally(
    ctx: &RequestContext,
    name: &str,
    configs: BTreeMap<String, String>,
    validate_only: bool,
) -> Result<(), (ErrorCode, String)> {
    let b = &ctx.broker;
    let _guard = b.admin.lock().await;
    if b.topic(name).is_none() {
        return Err((
            ErrorCode::UnknownTopicOrPartition,
            format!("Topic {name} does not exist"),
        ));
    }
    super::blocking(|| b.set_topic_configs(name, configs, validate_only))
        .map_err(|msg| (ErrorCode::InvalidConfig, msg))
}

/// Replaces the dynamic configs of a BROKER resource; every refusal is
/// INVALID_REQUEST, as in Kafka.
async fn apply_broker(
    b: &Broker,
    name: &str,
    configs: impl FnOnce(Scope) -> Result<BTreeMap<String, String>, String>,
    validate_only: bool,
) -> (ErrorCode, Option<String>) {
    let _guard = b.admin.lock().await;
    let result = dynamic_config::scope_of(name, b.config.node_id)
        .and_then(|scope| Ok((scope, configs(scope)?)))
        .and_then(|(scope, configs)| {
            super::blocking(|| b.set_dynamic_broker_configs(scope, configs, validate_only))
        });
    match result {
        Ok(()) => (ErrorCode::None, None),
        Err(msg) => (ErrorCode::InvalidRequest, Some(msg)),
    }
}

fn unsupported(resource_type: i8) -> (ErrorCode, Option<String>) {
    (
        ErrorCode::InvalidRequest,
        Some(format!("Unsupported resource type {resource_type}")),
    )
}

/// AlterConfigs' full replacement set; a null value is an error.
fn full_set(
    configs: &[weir_protocol::messages::alter_configs_request::AlterableConfig],
) -> Result<BTreeMap<String, String>, String> {
    configs
        .iter()
        .map(|c| match &c.value {
            Some(v) => Ok((c.name.clone(), v.clone())),
            None => Err(format!("Null value not supported for {}", c.name)),
        })
        .collect()
}

/// Broker and group resources are changed under `admin`, one resource at a
/// time; a topic's change is its admin's (which takes `admin` itself on a
/// single node, and in a cluster must not hold it while the image's change
/// is hosted).
pub async fn alter(ctx: &RequestContext, req: AlterConfigsRequest) -> Reply {
    let b = &ctx.broker;
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in &req.resources {
        let op = Operation::AlterConfigs;
        let refused = refusal(ctx, r.resource_type, &r.resource_name, op);
        let (error_code, error_message) = match r.resource_type {
            _ if let Some(code) = refused => (code, refusal_message(code, op, &r.resource_name)),
            RESOURCE_TOPIC => {
                apply_topic(
                    ctx,
                    &r.resource_name,
                    full_set(&r.configs),
                    req.validate_only,
                )
                .await
            }
            RESOURCE_BROKER => {
                let set = |_| full_set(&r.configs);
                apply_broker(b, &r.resource_name, set, req.validate_only).await
            }
            other => unsupported(other),
        };
        responses.push(AlterConfigsResourceResponse {
            error_code: error_code.code(),
            error_message,
            resource_type: r.resource_type,
            resource_name: r.resource_name.clone(),
            ..Default::default()
        });
    }
    Reply::Body(ResponseBody::AlterConfigs(AlterConfigsResponse {
        throttle_time_ms: 0,
        responses,
        ..Default::default()
    }))
}

/// Applies one incremental operation to a topic's overrides. Pure.
pub fn apply_incremental(
    broker: &BrokerConfig,
    overrides: &mut BTreeMap<String, String>,
    name: &str,
    op: i8,
    value: Option<&str>,
) -> Result<(), String> {
    let def =
        configdef::topic_def(name).ok_or_else(|| format!("Unknown topic config name: {name}"))?;
    let inherited = || topic_config::resolve(broker, &BTreeMap::new(), def).value;
    apply_op(overrides, name, Some(def.ty), op, value, inherited)
}

/// Applies one incremental operation to the dynamic configs of a broker
/// resource. Pure. Names are checked (read-only, unknown) afterwards, on
/// the whole set, as Kafka does.
pub fn apply_incremental_broker(
    broker: &BrokerConfig,
    scope: Scope,
    overrides: &mut BTreeMap<String, String>,
    name: &str,
    op: i8,
    value: Option<&str>,
) -> Result<(), String> {
    let ty = configdef::broker_def(name).map(|d| d.ty);
    // what an append extends: the value in effect below this resource
    let inherited = || {
        match scope {
            Scope::Broker(_) => broker.with_dynamic(&broker.dynamic_default, &BTreeMap::new()),
            Scope::ClusterDefault => broker.with_dynamic(&BTreeMap::new(), &BTreeMap::new()),
        }
        .value(name)
    };
    apply_op(overrides, name, ty, op, value, inherited)
}

/// One incremental operation on a set of overrides; `inherited` gives the
/// value an APPEND or SUBTRACT starts from when `name` is not overridden.
fn apply_op(
    overrides: &mut BTreeMap<String, String>,
    name: &str,
    ty: Option<ConfigType>,
    op: i8,
    value: Option<&str>,
    inherited: impl FnOnce() -> Option<String>,
) -> Result<(), String> {
    match op {
        OP_SET => {
            let v = value.ok_or_else(|| format!("Null value not supported for {name}"))?;
            overrides.insert(name.to_string(), v.to_string());
        }
        OP_DELETE => {
            overrides.remove(name);
        }
        OP_APPEND | OP_SUBTRACT => {
            if ty != Some(ConfigType::List) {
                return Err(format!(
                    "Config value append/subtract is not allowed for config key {name} of type {}",
                    ty.map_or("unknown".to_string(), |t| format!("{t:?}"))
                ));
            }
            let current = match overrides.get(name) {
                Some(v) => v.clone(),
                None => inherited().unwrap_or_default(),
            };
            let mut items: Vec<String> = current
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            let given: Vec<String> = value
                .unwrap_or("")
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect();
            if op == OP_APPEND {
                for g in given {
                    if !items.contains(&g) {
                        items.push(g);
                    }
                }
            } else {
                items.retain(|i| !given.contains(i));
            }
            overrides.insert(name.to_string(), items.join(","));
        }
        other => return Err(format!("Unknown config operation {other}")),
    }
    Ok(())
}

/// Locking as [`alter`]. A topic's operations apply to the overrides of
/// the broker's cluster snapshot, and the result is the new complete set.
pub async fn incremental_alter(ctx: &RequestContext, req: IncrementalAlterConfigsRequest) -> Reply {
    let b = &ctx.broker;
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in &req.resources {
        let op = Operation::AlterConfigs;
        let (error_code, error_message) = if let Some(code) =
            refusal(ctx, r.resource_type, &r.resource_name, op)
        {
            (code, refusal_message(code, op, &r.resource_name))
        } else if r.resource_type == RESOURCE_BROKER {
            let cfg = b.effective_config();
            let ops = |scope| {
                let mut o = b.dynamic_configs(scope);
                r.configs
                    .iter()
                    .try_for_each(|c| {
                        apply_incremental_broker(
                            &cfg,
                            scope,
                            &mut o,
                            &c.name,
                            c.config_operation,
                            c.value.as_deref(),
                        )
                    })
                    .map(|()| o)
            };
            apply_broker(b, &r.resource_name, ops, req.validate_only).await
        } else if r.resource_type == RESOURCE_GROUP {
            let _guard = b.admin.lock().await;
            let mut o = b.group_configs(&r.resource_name);
            let applied = r.configs.iter().try_for_each(|c| {
                let ty = configdef::group_def(&c.name).map(|d| d.ty);
                apply_op(
                    &mut o,
                    &c.name,
                    ty,
                    c.config_operation,
                    c.value.as_deref(),
                    || None,
                )
            });
            if r.resource_name.is_empty() {
                (
                    ErrorCode::InvalidRequest,
                    Some("Group name must not be empty".to_string()),
                )
            } else {
                let result = applied.and_then(|()| {
                    super::blocking(|| b.set_group_configs(&r.resource_name, o, req.validate_only))
                });
                match result {
                    Ok(()) => (ErrorCode::None, None),
                    Err(msg) => (ErrorCode::InvalidConfig, Some(msg)),
                }
            }
        } else if r.resource_type == RESOURCE_TOPIC {
            let _changing = b.config_changes.lock().await;
            let snap = b.cluster();
            let configs = match snap.topic_configs(&r.resource_name) {
                None => Ok(BTreeMap::new()),
                Some(current) => {
                    let mut o = current.clone();
                    r.configs
                        .iter()
                        .try_for_each(|c| {
                            apply_incremental(
                                &b.effective_config(),
                                &mut o,
                                &c.name,
                                c.config_operation,
                                c.value.as_deref(),
                            )
                        })
                        .map(|()| o)
                }
            };
            apply_topic(ctx, &r.resource_name, configs, req.validate_only).await
        } else {
            unsupported(r.resource_type)
        };
        responses.push(inc_resp::AlterConfigsResourceResponse {
            error_code: error_code.code(),
            error_message,
            resource_type: r.resource_type,
            resource_name: r.resource_name.clone(),
            ..Default::default()
        });
    }
    Reply::Body(ResponseBody::IncrementalAlterConfigs(
        IncrementalAlterConfigsResponse {
            throttle_time_ms: 0,
            responses,
            ..Default::default()
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn incremental_operations() {
        let b = crate::config::BrokerConfig::default();
        let mut o = BTreeMap::new();
        apply_incremental(&b, &mut o, "retention.ms", OP_SET, Some("10")).unwrap();
        assert_eq!(o["retention.ms"], "10");
        apply_incremental(&b, &mut o, "cleanup.policy", OP_APPEND, Some("compact")).unwrap();
        assert_eq!(o["cleanup.policy"], "delete,compact");
        apply_incremental(&b, &mut o, "cleanup.policy", OP_APPEND, Some("compact")).unwrap();
        assert_eq!(o["cleanup.policy"], "delete,compact");
        apply_incremental(&b, &mut o, "cleanup.policy", OP_SUBTRACT, Some("delete")).unwrap();
        assert_eq!(o["cleanup.policy"], "compact");
        apply_incremental(&b, &mut o, "retention.ms", OP_DELETE, None).unwrap();
        assert!(!o.contains_key("retention.ms"));
        assert!(apply_incremental(&b, &mut o, "retention.ms", OP_APPEND, Some("1")).is_err());
        assert!(apply_incremental(&b, &mut o, "nope", OP_SET, Some("1")).is_err());
        assert!(apply_incremental(&b, &mut o, "retention.ms", 9, Some("1")).is_err());
    }
}
