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
//!
//! Protection ([`security`]): with `https://` the listener speaks only TLS
//! (the keystore of `http.ssl.*`, loaded and reloaded as the Kafka SSL
//! listeners' are; a plain-HTTP request fails the handshake); with
//! `http.basic.auth.file` every request, `/metrics` included unless
//! `http.basic.auth.metrics=false`, needs the credentials of a listed user
//! ([`basic_auth`]) and gets 401 otherwise.

pub mod basic_auth;
pub mod console;
pub mod host;
pub mod security;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{
    ALLOW, AUTHORIZATION, CONTENT_SECURITY_POLICY, CONTENT_TYPE, HOST, HeaderValue,
    REFERRER_POLICY, WWW_AUTHENTICATE, X_CONTENT_TYPE_OPTIONS, X_FRAME_OPTIONS,
};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use crate::broker::Broker;
use crate::tls::{ListenerTls, TlsError};
use basic_auth::{BasicAuth, BasicAuthError};
use security::HttpSecurity;

/// Largest request head accepted (hyper's minimum is 8 KiB).
pub const MAX_HEAD_BYTES: usize = 16 * 1024;
/// A request head must arrive within this time.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
/// HTTP connections served at once.
pub const MAX_CONNECTIONS: usize = 64;
/// A connection is closed (after its current request) once this old, so
/// idle keep-alive connections cannot hold every slot.
pub const MAX_CONNECTION_AGE: Duration = Duration::from_secs(300);

/// How often the users file is looked at for changes (a stat).
pub const AUTH_RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// What the listener serves with, loaded from [`HttpSecurity`].
#[derive(Debug, Clone, Default)]
pub struct Protection {
    /// Some for `https://`: the acceptor of each new connection.
    pub tls: Option<Arc<ListenerTls>>,
    /// Some with `http.basic.auth.file`.
    pub auth: Option<Arc<BasicAuth>>,
    /// `/metrics` is answered without credentials
    /// (`http.basic.auth.metrics=false`).
    pub metrics_open: bool,
}

/// A keystore or users file that cannot be used at start.
#[derive(Debug, thiserror::Error)]
pub enum ProtectionError {
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    BasicAuth(#[from] BasicAuthError),
}

impl Protection {
    /// Loads the keystore and the users file `s` names (blocking reads).
    pub fn load(s: &HttpSecurity) -> Result<Protection, ProtectionError> {
        let tls = s
            .tls
            .clone()
            .map(ListenerTls::load)
            .transpose()?
            .map(Arc::new);
        let auth = s
            .basic_auth
            .as_ref()
            .map(|a| BasicAuth::load(&a.file))
            .transpose()?
            .map(Arc::new);
        Ok(Protection {
            tls,
            auth,
            metrics_open: s.basic_auth.as_ref().is_some_and(|a| !a.metrics),
        })
    }
}

/// Binds the HTTP listener.
pub async fn bind(addr: SocketAddr) -> std::io::Result<TcpListener> {
    TcpListener::bind(addr).await
}

/// Serves HTTP on `listener` until `shutdown` becomes true. The caller
/// reloads `protection.tls` (with the Kafka listeners' stores); the users
/// file is reloaded here.
pub fn spawn(
    listener: TcpListener,
    broker: Arc<Broker>,
    protection: Protection,
    shutdown: watch::Receiver<bool>,
) -> JoinHandle<()> {
    if let Some(auth) = &protection.auth {
        tokio::spawn(auth_reload_loop(auth.clone(), shutdown.clone()));
    }
    tokio::spawn(accept_loop(
        listener,
        broker,
        Arc::new(protection),
        shutdown,
    ))
}

/// Reloads the users file when it changes.
async fn auth_reload_loop(auth: Arc<BasicAuth>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(AUTH_RELOAD_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => break,
        }
        let a = auth.clone();
        match tokio::task::spawn_blocking(move || a.reload_if_changed()).await {
            Ok(Ok(true)) => tracing::info!(
                file = %auth.path().display(),
                "http.basic.auth.file changed: its users are in force"
            ),
            Ok(Ok(false)) | Err(_) => {}
            Ok(Err(e)) => tracing::error!("reloading failed, the previous users stay: {e}"),
        }
    }
}

async fn accept_loop(
    listener: TcpListener,
    broker: Arc<Broker>,
    protection: Arc<Protection>,
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
        let protection = protection.clone();
        tokio::spawn(async move {
            match &protection.tls {
                None => serve_connection(stream, peer, broker, hosts, protection, shutdown).await,
                Some(tls) => {
                    let handshake = tls.acceptor().accept(stream);
                    match tokio::time::timeout(HEADER_READ_TIMEOUT, handshake).await {
                        Ok(Ok(s)) => {
                            serve_connection(s, peer, broker, hosts, protection, shutdown).await
                        }
                        Ok(Err(e)) => tracing::debug!(%peer, "HTTPS handshake failed: {e}"),
                        Err(_) => tracing::debug!(%peer, "HTTPS handshake timed out"),
                    }
                }
            }
            drop(slot);
        });
    }
}

async fn serve_connection<S>(
    stream: S,
    peer: SocketAddr,
    broker: Arc<Broker>,
    hosts: Arc<host::HostCheck>,
    protection: Arc<Protection>,
    mut shutdown: watch::Receiver<bool>,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = service_fn(move |req: Request<Incoming>| {
        let broker = broker.clone();
        let hosts = hosts.clone();
        let protection = protection.clone();
        async move {
            let mut r = route(&broker, &hosts, &protection, &req).await;
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

/// Whether the request may pass basic authentication: always without
/// `http.basic.auth.file`, and for `/metrics` with
/// `http.basic.auth.metrics=false`; else with the credentials of a listed
/// user. Wrong credentials are counted; several `Authorization` headers
/// are never right.
async fn authenticated<B>(broker: &Broker, protection: &Protection, req: &Request<B>) -> bool {
    let Some(auth) = &protection.auth else {
        return true;
    };
    if protection.metrics_open && req.uri().path() == "/metrics" {
        return true;
    }
    let mut values = req.headers().get_all(AUTHORIZATION).iter();
    let value = match (values.next(), values.next()) {
        (None, _) => None,
        (Some(v), None) => Some(v.as_bytes().to_vec()),
        (Some(_), Some(_)) => Some(Vec::new()),
    };
    let presented = value.is_some();
    let a = auth.clone();
    // a key derivation takes milliseconds: off the async workers
    let ok = tokio::task::spawn_blocking(move || a.allows(value.as_deref()))
        .await
        .unwrap_or(false);
    if !ok && presented {
        broker
            .metrics
            .http_auth_failures
            .fetch_add(1, Ordering::Relaxed);
    }
    ok
}

/// Routes one request: a `Host` that does not name the broker gets 421,
/// missing or wrong credentials 401, then GET/HEAD `/metrics`, else the
/// console.
pub async fn route<B>(
    broker: &Arc<Broker>,
    hosts: &host::HostCheck,
    protection: &Protection,
    req: &Request<B>,
) -> Response<Full<Bytes>> {
    broker.metrics.http_requests.fetch_add(1, Ordering::Relaxed);
    if !host_allowed(hosts, req) {
        return plain(
            StatusCode::MISDIRECTED_REQUEST,
            "misdirected request: the Host header does not name this broker (add the name to http.allowed.hosts)\n",
        );
    }
    if !authenticated(broker, protection, req).await {
        let mut r = plain(StatusCode::UNAUTHORIZED, "unauthorized\n");
        r.headers_mut().insert(
            WWW_AUTHENTICATE,
            HeaderValue::from_static(basic_auth::CHALLENGE),
        );
        return r;
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
