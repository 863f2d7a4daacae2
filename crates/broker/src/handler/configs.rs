//! DescribeConfigs, AlterConfigs, IncrementalAlterConfigs for topics (and
//! describe for the broker; broker configs are static).

use std::collections::BTreeMap;

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
use crate::configdef::{self, ConfigType};
use crate::topic_config::{self, ConfigSource};

pub const RESOURCE_TOPIC: i8 = 2;
pub const RESOURCE_BROKER: i8 = 4;

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
            let Some(t) = b.topic(name) else {
                result.error_code = ErrorCode::UnknownTopicOrPartition.code();
                result.error_message = Some(format!("Topic {name} does not exist"));
                return result;
            };
            for r in topic_config::resolve_all(&b.config, &t.configs) {
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
            if !name.is_empty() && name != b.config.node_id.to_string() {
                result.error_code = ErrorCode::InvalidRequest.code();
                result.error_message = Some(format!("Unexpected broker id {name}"));
                return result;
            }
            for d in configdef::BROKER_CONFIGS {
                if !want(d.name) {
                    continue;
                }
                let explicit = b.config.explicit.get(d.name).cloned();
                let (value, source) = match explicit {
                    Some(v) => (Some(v), ConfigSource::StaticBroker),
                    None => (b.config.value(d.name), ConfigSource::Default),
                };
                result.configs.push(DescribeConfigsResourceResult {
                    name: d.name.to_string(),
                    value: value.clone(),
                    read_only: true,
                    config_source: source as i8,
                    is_sensitive: d.sensitive,
                    synonyms: if synonyms {
                        vec![DescribeConfigsSynonym {
                            name: d.name.to_string(),
                            value,
                            source: source as i8,
                            ..Default::default()
                        }]
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

pub fn describe(ctx: &RequestContext, req: DescribeConfigsRequest) -> Reply {
    let b = &ctx.broker;
    let results = req
        .resources
        .iter()
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
        .collect();
    Reply::Body(ResponseBody::DescribeConfigs(DescribeConfigsResponse {
        throttle_time_ms: 0,
        results,
        ..Default::default()
    }))
}

/// Applies a new override set to a topic; returns (error code, message).
async fn apply_topic(
    b: &Broker,
    name: &str,
    configs: Result<BTreeMap<String, String>, String>,
    validate_only: bool,
) -> (ErrorCode, Option<String>) {
    let configs = match configs {
        Ok(c) => c,
        Err(msg) => return (ErrorCode::InvalidConfig, Some(msg)),
    };
    if b.topic(name).is_none() {
        return (
            ErrorCode::UnknownTopicOrPartition,
            Some(format!("Topic {name} does not exist")),
        );
    }
    match super::blocking(|| b.set_topic_configs(name, configs, validate_only)) {
        Ok(()) => (ErrorCode::None, None),
        Err(msg) => (ErrorCode::InvalidConfig, Some(msg)),
    }
}

fn non_topic_error(resource_type: i8) -> (ErrorCode, Option<String>) {
    if resource_type == RESOURCE_BROKER {
        (
            ErrorCode::InvalidRequest,
            Some("broker configs are static in weir; set them in the config file".into()),
        )
    } else {
        (
            ErrorCode::InvalidRequest,
            Some(format!("Unsupported resource type {resource_type}")),
        )
    }
}

pub async fn alter(ctx: &RequestContext, req: AlterConfigsRequest) -> Reply {
    let b = &ctx.broker;
    let _guard = b.admin.lock().await;
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in &req.resources {
        let (error_code, error_message) = if r.resource_type == RESOURCE_TOPIC {
            let mut set = BTreeMap::new();
            let mut err = None;
            for c in &r.configs {
                match &c.value {
                    Some(v) => {
                        set.insert(c.name.clone(), v.clone());
                    }
                    None => err = Some(format!("Null value not supported for {}", c.name)),
                }
            }
            let configs = match err {
                Some(e) => Err(e),
                None => Ok(set),
            };
            apply_topic(b, &r.resource_name, configs, req.validate_only).await
        } else {
            non_topic_error(r.resource_type)
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
    broker: &crate::config::BrokerConfig,
    overrides: &mut BTreeMap<String, String>,
    name: &str,
    op: i8,
    value: Option<&str>,
) -> Result<(), String> {
    let def =
        configdef::topic_def(name).ok_or_else(|| format!("Unknown topic config name: {name}"))?;
    match op {
        OP_SET => {
            let v = value.ok_or_else(|| format!("Null value not supported for {name}"))?;
            overrides.insert(name.to_string(), v.to_string());
        }
        OP_DELETE => {
            overrides.remove(name);
        }
        OP_APPEND | OP_SUBTRACT => {
            if def.ty != ConfigType::List {
                return Err(format!(
                    "Config value append/subtract is not allowed for config key {name} of type {:?}",
                    def.ty
                ));
            }
            let current = topic_config::resolve(broker, overrides, def)
                .value
                .unwrap_or_default();
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

pub async fn incremental_alter(ctx: &RequestContext, req: IncrementalAlterConfigsRequest) -> Reply {
    let b = &ctx.broker;
    let _guard = b.admin.lock().await;
    let mut responses = Vec::with_capacity(req.resources.len());
    for r in &req.resources {
        let (error_code, error_message) = if r.resource_type == RESOURCE_TOPIC {
            let configs = match b.topic(&r.resource_name) {
                None => Ok(BTreeMap::new()),
                Some(t) => {
                    let mut o = t.configs.clone();
                    r.configs
                        .iter()
                        .try_for_each(|c| {
                            apply_incremental(
                                &b.config,
                                &mut o,
                                &c.name,
                                c.config_operation,
                                c.value.as_deref(),
                            )
                        })
                        .map(|()| o)
                }
            };
            apply_topic(b, &r.resource_name, configs, req.validate_only).await
        } else {
            non_topic_error(r.resource_type)
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
