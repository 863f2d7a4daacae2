//! Client quota administration: AlterClientQuotas and
//! DescribeClientQuotas (KIP-546). An entity is a list of (entity type,
//! name) pairs, `user`, `client-id` or `ip`, a `None` name being the
//! type's default (`<default>`).

use std::collections::BTreeMap;

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::alter_client_quotas_request::{EntityData, EntryData, OpData};
use weir_protocol::messages::describe_client_quotas_request::ComponentData;
use weir_protocol::messages::{AlterClientQuotasRequest, DescribeClientQuotasRequest};

use crate::client::Client;
use crate::error::ClientError;

/// A quota entity: (entity type, name or `None` for the default) pairs,
/// e.g. `[("user", Some("alice")), ("client-id", None)]`.
pub type QuotaEntity = Vec<(String, Option<String>)>;

/// One change of an entity's quotas.
#[derive(Debug, Clone, PartialEq)]
pub enum QuotaOp {
    Set(String, f64),
    Remove(String),
}

/// The changes of one entity.
#[derive(Debug, Clone, PartialEq)]
pub struct QuotaAlteration {
    pub entity: QuotaEntity,
    pub ops: Vec<QuotaOp>,
}

/// How a filter component matches its entity type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuotaMatch {
    /// This name.
    Exact(String),
    /// The type's default (`<default>`).
    Default,
    /// Any given name.
    Specified,
}

/// An entity with its quotas, as DescribeClientQuotas lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct EntityQuotas {
    pub entity: QuotaEntity,
    pub quotas: BTreeMap<String, f64>,
}

impl Client {
    /// Sets and removes client quotas (AlterClientQuotas); with
    /// `validate_only` the broker checks without changing anything. One
    /// result per alteration, in order.
    pub async fn alter_client_quotas(
        &mut self,
        alterations: &[QuotaAlteration],
        validate_only: bool,
    ) -> Result<Vec<Result<(), ClientError>>, ClientError> {
        let req = AlterClientQuotasRequest {
            entries: alterations
                .iter()
                .map(|a| EntryData {
                    entity: a
                        .entity
                        .iter()
                        .map(|(t, n)| EntityData {
                            entity_type: t.clone(),
                            entity_name: n.clone(),
                            ..Default::default()
                        })
                        .collect(),
                    ops: a
                        .ops
                        .iter()
                        .map(|op| match op {
                            QuotaOp::Set(k, v) => OpData {
                                key: k.clone(),
                                value: *v,
                                remove: false,
                                ..Default::default()
                            },
                            QuotaOp::Remove(k) => OpData {
                                key: k.clone(),
                                remove: true,
                                ..Default::default()
                            },
                        })
                        .collect(),
                    ..Default::default()
                })
                .collect(),
            validate_only,
            ..Default::default()
        };
        let resp = self.any_connection().await?.send(&req).await?;
        if resp.entries.len() != alterations.len() {
            return Err(ClientError::Broker {
                context: "alter client quotas".into(),
                code: ErrorCode::UnknownServerError,
                message: Some(format!(
                    "{} results for {} entities",
                    resp.entries.len(),
                    alterations.len()
                )),
            });
        }
        Ok(resp
            .entries
            .into_iter()
            .zip(alterations)
            .map(|(r, a)| {
                ClientError::check(
                    r.error_code,
                    || format!("alter client quotas of {}", describe_entity(&a.entity)),
                    r.error_message,
                )
            })
            .collect())
    }

    /// The quotas of the entities `components` match
    /// (DescribeClientQuotas); `strict` leaves out entities with other
    /// entity types as well.
    pub async fn describe_client_quotas(
        &mut self,
        components: &[(String, QuotaMatch)],
        strict: bool,
    ) -> Result<Vec<EntityQuotas>, ClientError> {
        let req = DescribeClientQuotasRequest {
            components: components
                .iter()
                .map(|(t, m)| {
                    let (match_type, name) = match m {
                        QuotaMatch::Exact(n) => (0, Some(n.clone())),
                        QuotaMatch::Default => (1, None),
                        QuotaMatch::Specified => (2, None),
                    };
                    ComponentData {
                        entity_type: t.clone(),
                        match_type,
                        r#match: name,
                        ..Default::default()
                    }
                })
                .collect(),
            strict,
            ..Default::default()
        };
        let resp = self.any_connection().await?.send(&req).await?;
        ClientError::check(
            resp.error_code,
            || "describe client quotas".into(),
            resp.error_message,
        )?;
        Ok(resp
            .entries
            .unwrap_or_default()
            .into_iter()
            .map(|e| EntityQuotas {
                entity: e
                    .entity
                    .into_iter()
                    .map(|d| (d.entity_type, d.entity_name))
                    .collect(),
                quotas: e.values.into_iter().map(|v| (v.key, v.value)).collect(),
            })
            .collect())
    }
}

/// An entity as `kafka-configs.sh` names it: `user-principal 'alice',
/// the default client-id`.
pub fn describe_entity(entity: &[(String, Option<String>)]) -> String {
    let mut parts: Vec<(u8, String)> = entity
        .iter()
        .map(|(t, n)| {
            let (rank, label) = match t.as_str() {
                "user" => (0, "user-principal"),
                "client-id" => (1, "client-id"),
                "ip" => (2, "ip"),
                other => (3, other),
            };
            let text = match n {
                Some(n) => format!("{label} '{n}'"),
                None => format!("the default {label}"),
            };
            (rank, text)
        })
        .collect();
    parts.sort();
    parts
        .into_iter()
        .map(|(_, t)| t)
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entities_are_named_like_kafka_configs() {
        let e = vec![
            ("client-id".to_string(), None),
            ("user".to_string(), Some("alice".to_string())),
        ];
        assert_eq!(
            describe_entity(&e),
            "user-principal 'alice', the default client-id"
        );
    }
}
