//! The built-in web console: a read-only single page at `/` (assets under
//! `/console/...`) and its JSON API under `/api/...`.

use std::sync::Arc;

use crate::broker::Broker;

/// A response for the HTTP layer to send as is.
pub struct ConsoleResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

/// Handles GET `path` (without query) for the console and its JSON API;
/// `None` = not a console path.
pub fn handle(broker: &Arc<Broker>, path: &str, query: &str) -> Option<ConsoleResponse> {
    let _ = (broker, path, query);
    None
}
