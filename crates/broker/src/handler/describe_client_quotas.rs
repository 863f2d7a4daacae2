//! DescribeClientQuotas (KIP-546): the quotas of the entities a filter
//! matches (`crate::quotas::ClientQuotas::describe`). Needs
//! DESCRIBE_CONFIGS on the cluster; a malformed filter is refused whole.
//! A cluster member answers from its own metadata image (the quotas it
//! enforces), as a Kafka broker does.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::describe_client_quotas_response::{EntityData, EntryData, ValueData};
use weir_protocol::messages::{
    DescribeClientQuotasRequest, DescribeClientQuotasResponse, ResponseBody,
};

use super::{Reply, RequestContext};
use crate::quotas::Component;

pub fn handle(ctx: &RequestContext, req: DescribeClientQuotasRequest) -> Reply {
    let refuse = |code: ErrorCode, message: String| {
        Reply::Body(ResponseBody::DescribeClientQuotas(
            DescribeClientQuotasResponse {
                error_code: code.code(),
                error_message: Some(message),
                entries: None,
                ..Default::default()
            },
        ))
    };
    if !ctx.authorize_cluster(weir_acl::Operation::DescribeConfigs) {
        return refuse(
            ErrorCode::ClusterAuthorizationFailed,
            "Cluster authorization failed.".to_string(),
        );
    }
    let components: Vec<Component> = req
        .components
        .into_iter()
        .map(|c| Component {
            entity_type: c.entity_type,
            match_type: c.match_type,
            name: c.r#match,
        })
        .collect();
    let snapshot = ctx.broker.quotas.snapshot();
    let matched = match snapshot.quotas.describe(&components, req.strict) {
        Ok(m) => m,
        Err(r) => return refuse(r.code, r.message),
    };
    let entries = matched
        .into_iter()
        .map(|(entity, values)| EntryData {
            entity: entity
                .0
                .iter()
                .map(|(t, n)| EntityData {
                    entity_type: t.name().to_string(),
                    entity_name: n.clone(),
                    ..Default::default()
                })
                .collect(),
            values: values
                .iter()
                .map(|(k, v)| ValueData {
                    key: k.clone(),
                    value: *v,
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        })
        .collect();
    Reply::Body(ResponseBody::DescribeClientQuotas(
        DescribeClientQuotasResponse {
            entries: Some(entries),
            ..Default::default()
        },
    ))
}
