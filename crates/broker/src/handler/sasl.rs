//! SaslHandshake and SaslAuthenticate once a connection is past
//! authentication, or on a listener without SASL: ILLEGAL_SASL_STATE, as
//! Kafka answers. Before authentication, and for a re-authentication
//! (KIP-368, with `connections.max.reauth.ms`), the connection answers
//! them itself (see [`crate::sasl::gate`]).

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{
    ResponseBody, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};

use super::{Reply, RequestContext};

pub fn handshake(_ctx: &RequestContext, _req: SaslHandshakeRequest) -> Reply {
    Reply::Body(ResponseBody::SaslHandshake(SaslHandshakeResponse {
        error_code: ErrorCode::IllegalSaslState.code(),
        ..Default::default()
    }))
}

pub fn authenticate(ctx: &RequestContext, _req: SaslAuthenticateRequest) -> Reply {
    let message = if ctx.session.listener.protocol.uses_sasl() {
        "SaslAuthenticate after successful authentication"
    } else {
        "SaslAuthenticate on a listener without SASL"
    };
    Reply::Body(ResponseBody::SaslAuthenticate(SaslAuthenticateResponse {
        error_code: ErrorCode::IllegalSaslState.code(),
        error_message: Some(message.to_string()),
        ..Default::default()
    }))
}
