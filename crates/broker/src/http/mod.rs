//! The broker's HTTP listener (`http.listeners`, default `127.0.0.1:9644`):
//! `/metrics` in the Prometheus text format, everything else goes to the web
//! console ([`console::handle`]); paths neither knows get 404.
//!
//! Read-only: GET and HEAD; any other method gets 405. Bounds: a request
//! head (request line and headers) larger than [`MAX_HEAD_BYTES`] gets 431
//! from hyper, a head not complete within [`HEADER_READ_TIMEOUT`] closes the
//! connection, at most [`MAX_CONNECTIONS`] connections are served at once
//! (more are closed on accept), and a connection lives at most
//! [`MAX_CONNECTION_AGE`]. Request bodies are never read. Unparseable
//! requests get 400 from hyper; nothing here panics on input.
//!
//! Against DNS rebinding, a request whose `Host` does not name this broker
//! gets 421 ([`host::HostCheck`]); every response carries
//! `Content-Security-Policy`, `X-Frame-Options: DENY`,
//! `X-Content-Type-Options: nosniff` and `Referrer-Policy: no-referrer`.

pub mod console;
pub mod host;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{
    ALLOW, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HOST, HeaderValue, REFERRER_POLICY,
    X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::broker::Broker;

/// Largest request head accepted (hyper's minimum is 8 KiB).
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// A request head must arrive within this time.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// A connection is closed (after its current request) once this old, so
/// idle keep-alive connections cannot hold every slot.
pub const MAX_CONNECTION_AGE: Duration = Duration::from_secs(300);

/// Binds the HTTP listener.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves HTTP on `listener` until `shutdown` becomes true.
pub fn spawn(
    listener: TcpListener,
    broker: Arc<Broker>,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    tokio::spawn(accept_loop(listener, broker, shutdown))
}

async fn accept_loop(
    listener: TcpListener,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let hosts = Arc::new(host::HostCheck::new(
        broker
            .config
            .http_listener
            .as_ref()
            .map_or("", |l| l.host.as_str()),
        &broker.config.http_allowed_hosts,
    ));
    while let Some((stream, peer)) =
        crate::server::accept_next(&listener, &mut shutdown, "HTTP").await
    {
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "HTTP connection refused: {MAX_CONNECTIONS} already open");
            continue;
        };
        let broker = broker.clone();
        let shutdown = shutdown.clone();
        let hosts = hosts.clone();
        tokio::spawn(async move {
            serve_connection(stream, peer, broker, hosts, shutdown).await;
            drop(slot);
        });
    }
}

async fn serve_connection(
    stream: TcpStream,
    peer: SocketAddr,
    broker: Arc<Broker>,
    hosts: Arc<host::HostCheck>,
    mut shutdown: watch::Receiver<bool>,
) {
    let service = service_fn(move |req: Request<Incoming>| {
        let broker = broker.clone();
        let hosts = hosts.clone();
        async move {
            let mut r = route(&broker, &hosts, &req).await;
            secure_headers(&mut r);
            Ok::<_, Infallible>(r)
        }
    });
    let conn = http1::Builder::new()
        .max_buf_size(MAX_HEAD_BYTES)
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let age = tokio::time::sleep(MAX_CONNECTION_AGE);
    tokio::pin!(age);
    let result = tokio::select! {
        r = conn.as_mut() => r,
        _ = shutdown.changed() => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
        _ = &mut age => {
            conn.as_mut().graceful_shutdown();
            conn.await
        }
    };
    if let Err(e) = result {
        tracing::debug!(%peer, "HTTP connection closed: {e}");
    }
}

/// A response with a body; HEAD responses get the same headers and hyper
/// leaves the body out.
fn response(status: StatusCode, content_type: &str, body: Bytes) -> Response<Full<Bytes>> {
    Response::builder()
        .status(status)
        .header(CONTENT_TYPE, content_type)
        .body(Full::new(body))
        .unwrap_or_else(|_| {
            // only an invalid content type can fail here
            let mut r = Response::new(Full::new(Bytes::from_static(b"internal error\n")));
            *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
            r
        })
}

fn plain(status: StatusCode, text: &'static str) -> Response<Full<Bytes>> {
    response(
        status,
        "text/plain; charset=utf-8",
        Bytes::from_static(text.as_bytes()),
    )
}

/// Adds the security headers every response carries.
pub fn secure_headers<B>(r: &mut Response<B>) {
    let h = r.headers_mut();
    h.insert(
        CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(host::CONTENT_SECURITY_POLICY),
    );
    h.insert(X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    h.insert(REFERRER_POLICY, HeaderValue::from_static("no-referrer"));
}

/// Whether the request's `Host` (and the authority of an absolute-form
/// target) names this broker; several `Host` headers never do.
fn host_allowed<B>(hosts: &host::HostCheck, req: &Request<B>) -> bool {
    let mut values = req.headers().get_all(HOST).iter();
    let host = match (values.next(), values.next()) {
        (None, _) => None,
        (Some(v), None) => match v.to_str() {
            Ok(s) => Some(s),
            Err(_) => return false,
        },
        (Some(_), Some(_)) => return false,
    };
    hosts.allows(host)
        && req
            .uri()
            .authority()
            .is_none_or(|a| hosts.allows(Some(a.as_str())))
}

/// Routes one request: a `Host` that does not name the broker gets 421,
/// then GET/HEAD `/metrics`, else the console.
pub async fn route<B>(
    broker: &Arc<Broker>,
    hosts: &host::HostCheck,
    req: &Request<B>,
) -> Response<Full<Bytes>> {
    broker.metrics.http_requests.fetch_add(1, Ordering::Relaxed);
    if !host_allowed(hosts, req) {
        return plain(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected request: the Host header does not name this broker (add the name to http.allowed.hosts)\n",
        );
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        let mut r = plain(StatusCode::METHOD_NOT_ALLOWED, "method not allowed\n");
        r.headers_mut()
            .insert(ALLOW, hyper::header::HeaderValue::from_static("GET, HEAD"));
        return r;
    }
    let path = req.uri().path().to_string();
    let query = req.uri().query().unwrap_or("").to_string();
    let b = broker.clone();
    if path == "/metrics" {
        return match tokio::task::spawn_blocking(move || crate::metrics::render(&b)).await {
            Ok(text) => response(
                StatusCode::OK,
                crate::metrics::text::CONTENT_TYPE,
                Bytes::from(text),
            ),
            Err(e) => {
                tracing::error!("rendering metrics failed: {e}");
                plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
            }
        };
    }
    match tokio::task::spawn_blocking(move || console::handle(&b, &path, &query)).await {
        Ok(Some(r)) => response(
            StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
            r.content_type,
            Bytes::from(r.body),
        ),
        Ok(None) => plain(StatusCode::NOT_FOUND, "not found\n"),
        Err(e) => {
            tracing::error!("console request failed: {e}");
            plain(StatusCode::INTERNAL_SERVER_ERROR, "internal error\n")
        }
    }
}
