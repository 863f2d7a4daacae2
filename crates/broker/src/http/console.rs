//! The built-in web console: a read-only single page at `/` (assets under
//! `/console/...`) and its JSON API under `/api/...`.
//!
//! The page is plain HTML, CSS and JavaScript embedded in the binary (no
//! build step, no external resources), so it works offline. Every view is
//! drawn from the JSON API, which reads the broker's live state:
//!
//! | path | what |
//! | --- | --- |
//! | `/api/overview` | broker id, cluster id, version, listener, data dirs, uptime, controller, counts |
//! | `/api/cluster` | this broker's id, the controller's, every live broker (id, host, port, rack) |
//! | `/api/topics` | every topic of the cluster: per partition leader, replicas, ISR, offsets and sizes where the log is local, followers' lag where this broker leads |
//! | `/api/topics/{t}` | one topic: the same per partition, with segment files where local |
//! | `/api/groups` | every consumer group with state, members and total lag |
//! | `/api/groups/{g}` | one group: members, assignments, committed offsets and lag |
//! | `/api/transactions` | the transactional ids this broker coordinates: producer, state, timeout, partitions, age of the open transaction; the coordinator's counts |
//! | `/api/config` | broker configuration with the source of each value |
//! | `/api/records?topic=T&partition=P[&offset=O \| &timestamp=MS][&limit=N]` | up to [`records::MAX_LIMIT`] records |
//!
//! [`handle`] never panics on any path or query: bad input is a 400 JSON
//! error, an unknown topic, partition or group a 404. It may read files
//! (segment sizes, records), so the HTTP layer calls it on a blocking thread.

mod api;
mod query;
pub mod records;
mod topics;
pub mod transactions;

use std::sync::Arc;

use serde::Serialize;

use crate::broker::Broker;

/// A response for the HTTP layer to send as is.
pub struct ConsoleResponse {
    pub status: u16,
    pub content_type: &'static str,
    pub body: Vec<u8>,
}

const JSON: &str = "application/json";
const HTML: &str = "text/html; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// The embedded static files: (path, content type, bytes).
const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "/console/app.js",
        JS,
        include_bytes!("../../assets/console/app.js"),
    ),
    (
        "/console/style.css",
        CSS,
        include_bytes!("../../assets/console/style.css"),
    ),
    (
        "/console/favicon.svg",
        SVG,
        include_bytes!("../../assets/console/favicon.svg"),
    ),
];

const INDEX_HTML: &[u8] = include_bytes!("../../assets/console/index.html");

/// Why an API request failed; each maps to one HTTP status.
#[derive(Debug, thiserror::Error)]
pub enum ConsoleError {
    #[error("{0}")]
    BadRequest(String),
    #[error("{what} {name:?} does not exist")]
    NotFound { what: &'static str, name: String },
    #[error("no such API path: {0}")]
    NoSuchPath(String),
    #[error("the group coordinator is not running")]
    CoordinatorUnavailable,
    #[error("the transaction coordinator is not running")]
    TxnCoordinatorUnavailable,
    #[error("group {group:?}: {code}")]
    Group { group: String, code: &'static str },
    #[error("storage: {0}")]
    Storage(#[from] weir_storage::StorageError),
    #[error("cannot encode the response: {0}")]
    Encode(#[from] serde_json::Error),
}

impl ConsoleError {
    fn status(&self) -> u16 {
        match self {
            ConsoleError::BadRequest(_) => 400,
            ConsoleError::NotFound { .. } | ConsoleError::NoSuchPath(_) => 404,
            ConsoleError::CoordinatorUnavailable
            | ConsoleError::TxnCoordinatorUnavailable
            | ConsoleError::Group { .. } => 503,
            ConsoleError::Storage(_) | ConsoleError::Encode(_) => 500,
        }
    }
}

#[derive(Serialize)]
struct ErrorBody<'a> {
    error: &'a str,
    status: u16,
}

fn json_response(status: u16, value: &impl Serialize) -> ConsoleResponse {
    match serde_json::to_vec(value) {
        Ok(body) => ConsoleResponse {
            status,
            content_type: JSON,
            body,
        },
        Err(e) => error_response(&ConsoleError::Encode(e)),
    }
}

fn error_response(e: &ConsoleError) -> ConsoleResponse {
    let status = e.status();
    let message = e.to_string();
    let body = serde_json::to_vec(&ErrorBody {
        error: &message,
        status,
    })
    .unwrap_or_else(|_| b"{\"error\":\"internal error\",\"status\":500}".to_vec());
    ConsoleResponse {
        status,
        content_type: JSON,
        body,
    }
}

fn static_response(content_type: &'static str, body: &[u8]) -> ConsoleResponse {
    ConsoleResponse {
        status: 200,
        content_type,
        body: body.to_vec(),
    }
}

/// Handles GET `path` (without query) for the console and its JSON API;
/// `None` = not a console path.
pub fn handle(broker: &Arc<Broker>, path: &str, query: &str) -> Option<ConsoleResponse> {
    if path == "/" || path == "/index.html" {
        return Some(static_response(HTML, INDEX_HTML));
    }
    if path == "/favicon.ico" {
        return None;
    }
    if let Some(rest) = path.strip_prefix("/api") {
        if !(rest.is_empty() || rest.starts_with('/')) {
            return None;
        }
        let result = api::route(broker, rest.trim_start_matches('/'), query);
        return Some(match result {
            Ok(r) => r,
            Err(e) => error_response(&e),
        });
    }
    if path.starts_with("/console/") {
        return Some(match ASSETS.iter().find(|(p, _, _)| *p == path) {
            Some((_, ct, body)) => static_response(ct, body),
            None => error_response(&ConsoleError::NoSuchPath(path.to_string())),
        });
    }
    None
}

/// Fuzz entry point (cargo-fuzz target `console_query` and the smoke
/// test): parses `data` as a query string and a path segment the way the
/// console does; errors are fine, panics are not.
#[doc(hidden)]
pub fn fuzz_query(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let names = [
        "topic",
        "partition",
        "offset",
        "timestamp",
        "limit",
        "group",
    ];
    if let Ok(q) = query::Query::parse(&text, &names) {
        for n in names {
            let _ = q.get(n);
            let _ = q.int::<i64>(n);
            let _ = q.int::<i32>(n);
        }
    }
    let _ = query::percent_decode(&text, false);
    let _ = query::percent_decode(&text, true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_asset_referenced_by_the_page_is_embedded() {
        let html = std::str::from_utf8(INDEX_HTML).unwrap();
        for (path, _, body) in ASSETS {
            assert!(!body.is_empty(), "{path} is empty");
            if path.ends_with(".js") || path.ends_with(".css") {
                assert!(html.contains(path), "index.html does not load {path}");
            }
        }
    }

    #[test]
    fn the_page_loads_nothing_from_other_hosts() {
        let html = std::str::from_utf8(INDEX_HTML).unwrap();
        for (_, _, body) in ASSETS {
            // the SVG namespace is a name, not something fetched
            let text = String::from_utf8_lossy(body).replace("http://www.w3.org/2000/svg", "");
            for t in [html, text.as_str()] {
                assert!(!t.contains("http://"), "absolute http URL in an asset");
                assert!(!t.contains("https://"), "absolute https URL in an asset");
                assert!(!t.contains("innerHTML"), "innerHTML in an asset");
            }
        }
    }
}
