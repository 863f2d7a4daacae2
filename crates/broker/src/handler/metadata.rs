//! Metadata: brokers, cluster id, controller, topics with ids and
//! partitions; auto-creates requested topics when allowed. Authorized
//! operations are filled in only when the request asks for them (topics
//! v8+, the cluster v8–v10), as Kafka does.

use weir_acl::{Operation, ResourceType as AclResource};
use weir_protocol::codec::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::create_topics_request::CreatableTopic;
use weir_protocol::messages::metadata_response::{
    MetadataResponseBroker, MetadataResponsePartition, MetadataResponseTopic,
};
use weir_protocol::messages::{
    ApiKey, CreateTopicsRequest, MetadataRequest, MetadataResponse, ResponseBody,
};

use super::{Reply, RequestContext};
use crate::authorized_operations::{
    NOT_REQUESTED, ResourceType, authorized_operations, cluster_authorized_operations,
};
use crate::broker::validate_topic_name;
use crate::cluster::TopicView;

/// The CreateTopics version an auto-creation is asked with.
const AUTO_CREATE_VERSION: i16 = 7;

pub fn topic_response(t: &TopicView) -> MetadataResponseTopic {
    MetadataResponseTopic {
        error_code: ErrorCode::None.code(),
        name: Some(t.name.clone()),
        topic_id: Uuid(t.id),
        is_internal: crate::groups::is_internal_topic(&t.name),
        partitions: (0..)
            .zip(&t.partitions)
            .map(|(i, p)| MetadataResponsePartition {
                // as Kafka: a partition without a leader is still listed
                error_code: if p.leader < 0 {
                    ErrorCode::LeaderNotAvailable
                } else {
                    ErrorCode::None
                }
                .code(),
                partition_index: i,
                leader_id: p.leader,
                leader_epoch: p.leader_epoch,
                replica_nodes: p.replicas.clone(),
                isr_nodes: p.isr.clone(),
                offline_replicas: p.offline_replicas.clone(),
                ..Default::default()
            })
            .collect(),
        topic_authorized_operations: NOT_REQUESTED,
        ..Default::default()
    }
}

/// `t` as a client reaches it on a listener that brokers `unreachable`
/// (live, but without that listener) lack, as Kafka's metadata cache
/// answers: a partition they lead has no leader (-1) and
/// LISTENER_NOT_FOUND (LEADER_NOT_AVAILABLE before v6); they count among
/// the offline replicas.
fn without_listener(t: &mut MetadataResponseTopic, unreachable: &[i32], version: i16) {
    for p in &mut t.partitions {
        if unreachable.contains(&p.leader_id) {
            p.leader_id = -1;
            p.error_code = if version >= 6 {
                ErrorCode::ListenerNotFound
            } else {
                ErrorCode::LeaderNotAvailable
            }
            .code();
        }
        for r in &p.replica_nodes {
            if unreachable.contains(r) && !p.offline_replicas.contains(r) {
                p.offline_replicas.push(*r);
            }
        }
    }
}

fn error_topic(name: Option<String>, id: Uuid, code: ErrorCode) -> MetadataResponseTopic {
    MetadataResponseTopic {
        error_code: code.code(),
        name,
        topic_id: id,
        topic_authorized_operations: NOT_REQUESTED,
        ..Default::default()
    }
}

/// Creates `name` with the broker defaults through the topic admin, then
/// answers it from a fresh snapshot (LEADER_NOT_AVAILABLE while a cluster's
/// image does not show it yet, as Kafka answers a topic being created).
async fn auto_create(ctx: &RequestContext, name: &str) -> MetadataResponseTopic {
    let b = &ctx.broker;
    let create_ctx = RequestContext {
        broker: b.clone(),
        api_key: ApiKey::CreateTopics,
        api_version: AUTO_CREATE_VERSION,
        correlation_id: ctx.correlation_id,
        client_id: ctx.client_id.clone(),
        peer: ctx.peer,
        local: ctx.local,
        session: ctx.session.clone(),
        shutdown: ctx.shutdown.clone(),
    };
    let req = CreateTopicsRequest {
        topics: vec![CreatableTopic {
            name: name.to_string(),
            num_partitions: -1,
            replication_factor: -1,
            ..Default::default()
        }],
        timeout_ms: 30_000,
        validate_only: false,
        ..Default::default()
    };
    let resp = b.topic_admin().create_topics(&create_ctx, req).await;
    let code = resp
        .topics
        .first()
        .and_then(|t| ErrorCode::from_code(t.error_code))
        .unwrap_or(ErrorCode::UnknownServerError);
    let error = |code| error_topic(Some(name.to_string()), Uuid::ZERO, code);
    match code {
        ErrorCode::None | ErrorCode::TopicAlreadyExists => match b.cluster().topic(name) {
            Some(t) => topic_response(t),
            None => error(ErrorCode::LeaderNotAvailable),
        },
        ErrorCode::InvalidTopicException => error(ErrorCode::InvalidTopicException),
        other => {
            let msg = resp.topics.first().and_then(|t| t.error_message.clone());
            tracing::warn!(topic = %name, code = ?other, "auto-create failed: {}", msg.unwrap_or_default());
            error(ErrorCode::UnknownServerError)
        }
    }
}

/// Creates the internal topic `name` as its coordinator needs it; whether
/// it exists now.
async fn ensure_internal(ctx: &RequestContext, name: &str) -> bool {
    let b = &ctx.broker;
    if name == crate::transactions::TRANSACTION_STATE_TOPIC {
        match b.transactions() {
            Some(t) => t.ensure_topic(ctx).await.is_ok(),
            None => false,
        }
    } else {
        match b.groups() {
            Some(g) => g.ensure_topic(b).await.is_ok(),
            None => false,
        }
    }
}

pub async fn handle(ctx: &RequestContext, req: MetadataRequest) -> Reply {
    let b = &ctx.broker;
    let snap = b.cluster();
    // v0: an empty list means all topics; v1+: null means all topics
    let requested = match req.topics {
        None => None,
        Some(t) if t.is_empty() && ctx.api_version == 0 => None,
        Some(t) => Some(t),
    };
    let allow_auto = ctx.api_version < 4 || req.allow_auto_topic_creation;
    let describable = |name: &str| ctx.authorize(Operation::Describe, AclResource::Topic, name);
    let mut topics: Vec<MetadataResponseTopic> = match requested {
        // topics the client may not DESCRIBE are left out, unmentioned
        None => snap
            .topics()
            .filter(|t| describable(&t.name))
            .map(topic_response)
            .collect(),
        Some(list) => {
            let mut out = Vec::with_capacity(list.len());
            for rt in list {
                let by_id = rt.topic_id != Uuid::ZERO;
                match (&rt.name, by_id) {
                    (Some(name), _) if !name.is_empty() => {
                        // whether it exists is not revealed to a client
                        // that may not DESCRIBE it
                        if !describable(name) {
                            out.push(error_topic(
                                Some(name.clone()),
                                Uuid::ZERO,
                                ErrorCode::TopicAuthorizationFailed,
                            ));
                            continue;
                        }
                        if let Some(t) = snap.topic(name) {
                            out.push(topic_response(t));
                            continue;
                        }
                        if validate_topic_name(name).is_err() {
                            out.push(error_topic(
                                Some(name.clone()),
                                Uuid::ZERO,
                                ErrorCode::InvalidTopicException,
                            ));
                            continue;
                        }
                        let internal = crate::groups::is_internal_topic(name);
                        let auto = allow_auto && b.config.auto_create_topics_enable;
                        if auto
                            && !ctx.authorize_cluster(Operation::Create)
                            && !ctx.authorize(Operation::Create, AclResource::Topic, name)
                        {
                            out.push(error_topic(
                                Some(name.clone()),
                                Uuid::ZERO,
                                ErrorCode::TopicAuthorizationFailed,
                            ));
                        } else if allow_auto && b.config.auto_create_topics_enable && internal {
                            // created as its coordinator needs it
                            // (partition count, compaction), as Kafka does
                            if ensure_internal(ctx, name).await
                                && let Some(t) = b.cluster().topic(name)
                            {
                                out.push(topic_response(t));
                            } else {
                                out.push(error_topic(
                                    Some(name.clone()),
                                    Uuid::ZERO,
                                    ErrorCode::CoordinatorNotAvailable,
                                ));
                            }
                        } else if allow_auto && b.config.auto_create_topics_enable {
                            out.push(auto_create(ctx, name).await);
                        } else {
                            out.push(error_topic(
                                Some(name.clone()),
                                Uuid::ZERO,
                                ErrorCode::UnknownTopicOrPartition,
                            ));
                        }
                    }
                    (_, true) => match snap.topic_by_id(&rt.topic_id.0) {
                        // an id is not secret: refused by id, without name
                        Some(t) if !describable(&t.name) => out.push(error_topic(
                            None,
                            rt.topic_id,
                            ErrorCode::TopicAuthorizationFailed,
                        )),
                        Some(t) => out.push(topic_response(t)),
                        None => out.push(error_topic(None, rt.topic_id, ErrorCode::UnknownTopicId)),
                    },
                    _ => out.push(error_topic(
                        rt.name.clone(),
                        Uuid::ZERO,
                        ErrorCode::InvalidRequest,
                    )),
                }
            }
            out
        }
    };
    if req.include_topic_authorized_operations && ctx.api_version >= 8 {
        // not for the topics refused (Kafka leaves their default)
        let refused = ErrorCode::TopicAuthorizationFailed.code();
        for t in topics.iter_mut().filter(|t| t.error_code != refused) {
            let name = t.name.as_deref().unwrap_or_default();
            t.topic_authorized_operations =
                authorized_operations(ctx, ResourceType::Topic, name, true);
        }
    }
    // Every broker is announced at its endpoint of the listener the client
    // came in on, as Kafka answers; one without that listener is left out,
    // and so are the leaderships the client could not reach there.
    let mut brokers = Vec::with_capacity(snap.brokers.len());
    let mut unreachable = Vec::new();
    for n in &snap.brokers {
        match ctx.node_address(&snap, n) {
            Some((host, port)) => brokers.push(MetadataResponseBroker {
                node_id: n.id,
                host,
                port,
                rack: n.rack.clone(),
                ..Default::default()
            }),
            None => unreachable.push(n.id),
        }
    }
    if !unreachable.is_empty() {
        tracing::debug!(
            listener = %ctx.session.listener.name,
            brokers = ?unreachable,
            "brokers without the client's listener left out of Metadata"
        );
        for t in &mut topics {
            without_listener(t, &unreachable, ctx.api_version);
        }
    }
    Reply::Body(ResponseBody::Metadata(MetadataResponse {
        throttle_time_ms: 0,
        brokers,
        cluster_id: Some(b.meta.cluster_id.clone()),
        controller_id: snap.controller_id,
        topics,
        // asked for in v8-10 only
        cluster_authorized_operations: cluster_authorized_operations(
            ctx,
            req.include_cluster_authorized_operations && (8..=10).contains(&ctx.api_version),
        ),
        ..Default::default()
    }))
}
