//! BrokerRegistration, BrokerHeartbeat and ControlledShutdown.

use weir_metadata::Endpoint;
use weir_metadata::controller::{Heartbeat, Registration};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{
    BrokerHeartbeatRequest, BrokerHeartbeatResponse, BrokerRegistrationRequest,
    BrokerRegistrationResponse, ControlledShutdownRequest, ControlledShutdownResponse,
};

use super::ListenerContext;

pub(super) async fn register(
    ctx: &ListenerContext,
    req: BrokerRegistrationRequest,
) -> BrokerRegistrationResponse {
    if let Some(ours) = &ctx.cluster_id
        && *ours != req.cluster_id
    {
        return BrokerRegistrationResponse {
            error_code: ErrorCode::InconsistentClusterId.code(),
            broker_epoch: -1,
            ..Default::default()
        };
    }
    let registration = Registration {
        broker_id: req.broker_id,
        incarnation_id: req.incarnation_id,
        endpoints: req
            .listeners
            .into_iter()
            .map(|l| Endpoint {
                name: l.name,
                host: l.host,
                port: l.port,
                security_protocol: l.security_protocol,
            })
            .collect(),
        rack: req.rack.filter(|r| !r.is_empty()),
    };
    match ctx
        .controller
        .register_broker(registration, (ctx.clock)())
        .await
    {
        Ok(epoch) => BrokerRegistrationResponse {
            broker_epoch: epoch,
            ..Default::default()
        },
        Err(e) => BrokerRegistrationResponse {
            error_code: e.error_code().code(),
            broker_epoch: -1,
            ..Default::default()
        },
    }
}

pub(super) async fn heartbeat(
    ctx: &ListenerContext,
    req: BrokerHeartbeatRequest,
) -> BrokerHeartbeatResponse {
    // What the broker must have applied to be caught up: this node's image
    // as the request arrives (on the active controller, everything
    // committed so far).
    let committed = i64::try_from(ctx.images.current().index).unwrap_or(i64::MAX);
    let hb = Heartbeat {
        broker_id: req.broker_id,
        broker_epoch: req.broker_epoch,
        current_metadata_offset: req.current_metadata_offset,
        want_fence: req.want_fence,
        want_shutdown: req.want_shut_down,
    };
    match ctx.controller.heartbeat(hb, (ctx.clock)()).await {
        Ok(reply) => BrokerHeartbeatResponse {
            is_caught_up: req.current_metadata_offset >= committed,
            is_fenced: reply.is_fenced,
            should_shut_down: reply.should_shut_down,
            ..Default::default()
        },
        Err(e) => BrokerHeartbeatResponse {
            error_code: e.error_code().code(),
            is_caught_up: false,
            is_fenced: true,
            should_shut_down: false,
            ..Default::default()
        },
    }
}

pub(super) async fn controlled_shutdown(
    ctx: &ListenerContext,
    req: ControlledShutdownRequest,
) -> ControlledShutdownResponse {
    // Before v2 the request carries no epoch (-1): take the registered one.
    let epoch = if req.broker_epoch < 0 {
        ctx.images
            .current()
            .image
            .broker(req.broker_id)
            .map_or(-1, |b| b.epoch)
    } else {
        req.broker_epoch
    };
    let error = match ctx
        .controller
        .controlled_shutdown(req.broker_id, epoch)
        .await
    {
        Ok(()) => ErrorCode::None,
        Err(e) => e.error_code(),
    };
    ControlledShutdownResponse {
        error_code: error.code(),
        ..Default::default()
    }
}
