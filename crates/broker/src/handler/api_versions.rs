//! ApiVersions.

use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::api_versions_response::ApiVersion;
use weir_protocol::messages::{ApiVersionsRequest, ApiVersionsResponse, ResponseBody};

use super::{Reply, RequestContext, SUPPORTED, supported_range};

fn api_keys() -> Vec<ApiVersion> {
    SUPPORTED
        .iter()
        .filter_map(|(k, _, _)| {
            let (lo, hi) = supported_range(*k)?;
            Some(ApiVersion {
                api_key: *k as i16,
                min_version: lo,
                max_version: hi,
                ..Default::default()
            })
        })
        .collect()
}

/// The v0 answer to an ApiVersions request of a version we do not know:
/// UNSUPPORTED_VERSION plus our ranges, so the client can pick a version.
pub fn unsupported_version_response() -> ResponseBody {
    ResponseBody::ApiVersions(ApiVersionsResponse {
        error_code: ErrorCode::UnsupportedVersion.code(),
        api_keys: api_keys(),
        ..Default::default()
    })
}

pub fn handle(_ctx: &RequestContext, _req: ApiVersionsRequest) -> Reply {
    Reply::Body(ResponseBody::ApiVersions(ApiVersionsResponse {
        error_code: ErrorCode::None.code(),
        api_keys: api_keys(),
        throttle_time_ms: 0,
        ..Default::default()
    }))
}
