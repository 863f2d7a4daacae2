//! One client connection: framing, in-order request processing and the
//! response writer (with sendfile for fetched record data on PLAINTEXT
//! connections; TLS connections copy it through a reused buffer, see
//! [`Connection::write_parts`]).
//!
//! Requests are read and answered strictly in order. A client may pipeline
//! (send many requests without waiting); they wait in the socket buffer and
//! in `read_buf` until their turn, as Kafka does by muting the channel while
//! a request is in flight.
//!
//! Bounds: the 4-byte size prefix is checked against
//! `socket.request.max.bytes` before anything is allocated, and the frame
//! buffer grows only as bytes actually arrive (at most 64 KiB ahead), so a
//! client that declares a huge frame and sends nothing costs nothing.
//! Across connections, a frame's declared size is reserved from the
//! broker-wide [`RequestBudget`] (`queued.max.request.bytes`) before its
//! body is buffered and released once the request is handled; while the
//! budget is used up the connection does not read its socket.

mod budget;
mod transport;

pub use budget::{RequestBudget, Reservation};
pub use transport::Transport;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt, Interest};
use tokio::net::TcpStream;
use tokio::sync::watch;
use weir_protocol::codec::{Decodable, DecodeError};
use weir_protocol::frame::encode_response;
use weir_protocol::messages::{ApiKey, RequestBody, RequestHeader, ResponseBody};
use weir_storage::FileRegion;

use crate::broker::Broker;
use crate::handler::{self, Reply, RequestContext};
use crate::metrics::RequestStages;
use crate::quotas::throttle::{self as quota_throttle, Charge};
use crate::sasl::ListenerSasl;
use crate::sasl::gate::{After, Authenticating, Gate, MAX_UNAUTHENTICATED_REQUEST_BYTES};
use crate::session::{Principal, Session};

/// Bytes sent with sendfile(2) since start (all connections); a cheap
/// observable that the zero-copy path is in use.
pub static SENDFILE_BYTES: AtomicU64 = AtomicU64::new(0);

/// Grow the frame buffer by at most this much ahead of received bytes.
const READ_CHUNK: usize = 64 * 1024;

/// A TLS connection's response copy buffer is written out once it holds
/// this much (rustls then cuts it into 16 KiB records).
const TLS_WRITE_BATCH: usize = 256 * 1024;
/// A copy buffer grown past this (by one large region) is not kept after
/// the response.
const TLS_BUFFER_KEEP: usize = 2 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ConnectionError {
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
    #[error("request size {size} is outside 0..={max} (socket.request.max.bytes)")]
    FrameTooLarge { size: i64, max: u32 },
    #[error("connection closed in the middle of a frame")]
    TruncatedFrame,
    #[error("invalid request: {0}")]
    InvalidRequest(String),
    #[error("encoding a response failed: {0}")]
    Encode(String),
    #[error("file region shorter than announced ({missing} bytes missing)")]
    ShortFile { missing: usize },
    #[error("idle for more than connections.max.idle.ms")]
    Idle,
    /// Refused by SASL (already logged and counted).
    #[error("SASL authentication failed: {0}")]
    Unauthenticated(String),
}

/// How long a connection that failed SASL authentication stays open after
/// its answer (itself delayed by `connection.failed.authentication.delay.ms`,
/// see [`crate::sasl::throttle`]), so the close never overtakes it.
const FAILED_AUTHENTICATION_CLOSE_DELAY: Duration = Duration::from_millis(20);

/// Most answers a connection keeps waiting (produce syncs in flight) before
/// it stops reading requests.
pub const MAX_PIPELINED: usize = 16;

/// A handled request whose answer is ready to send.
pub struct Outgoing {
    correlation_id: i32,
    key: ApiKey,
    version: i16,
    reply: Reply,
    /// What the request costs against its client's quotas; None when no
    /// quota is set (or none applies to the request).
    charge: Option<Charge>,
}

/// An answer with the time its request started (for the latency metric).
struct Done {
    out: Outgoing,
    started: std::time::Instant,
    /// When the handler returned.
    handled: std::time::Instant,
    /// When the answer was ready (after a deferred reply's wait).
    ready: std::time::Instant,
}

/// An answer still waiting (or ready, queued behind one that waits).
type Waiting = std::pin::Pin<Box<dyn std::future::Future<Output = Done> + Send>>;

/// Waits for the oldest waiting answer (the queue must not be empty).
async fn front(pending: &mut VecDeque<Waiting>) -> Done {
    match pending.front_mut() {
        Some(w) => w.as_mut().await,
        None => std::future::pending().await,
    }
}

/// What a step of the SASL exchange changes in its answer.
enum SaslOutcome {
    Nothing,
    /// Success with a session lifetime (`session_lifetime_ms`).
    Lifetime(i64),
    /// A success turned into a failure (a re-authentication as another
    /// principal): the message for the client.
    Refused(String),
}

/// A piece of an outgoing response.
pub enum ResponsePart {
    Bytes(Bytes),
    File(FileRegion),
}

pub struct Connection {
    stream: Transport,
    peer: SocketAddr,
    /// The listener and the authenticated principal.
    session: Arc<Session>,
    /// Some on a SASL listener until the client has authenticated: only
    /// the requests it allows are served meanwhile. Some again while an
    /// authenticated session re-authenticates (KIP-368).
    auth: Option<Authenticating>,
    /// The listener's SASL settings, on a SASL listener.
    sasl: Option<Arc<ListenerSasl>>,
    /// The mechanism the session authenticated with.
    authenticated_with: Option<crate::sasl::Mechanism>,
    /// When the SASL session expires (broker clock, ms): a request after
    /// it other than a re-authentication closes the connection.
    session_expires_ms: Option<i64>,
    /// Close once the answer being sent is out (a failed authentication).
    close_after: Option<String>,
    /// TLS only: where file regions are copied before encryption; kept
    /// across responses so steady fetching allocates nothing.
    copy_buf: Vec<u8>,
    read_buf: BytesMut,
    max_request_bytes: u32,
    idle: Duration,
    /// Response bytes written since last taken (for `weir_bytes_out_total`).
    written: u64,
    /// The local address, read once (handlers may need it per request).
    local: Option<SocketAddr>,
    /// `fetch.inline.max.bytes`.
    inline_max_bytes: usize,
    /// `queued.max.request.bytes`, shared by all connections.
    budget: RequestBudget,
    /// The reservation of the frame being read or handled; kept here so a
    /// `read_frame` cancelled mid-frame resumes without reserving twice.
    reservation: Option<Reservation>,
    /// Until when no request is read: a client over a quota waits out its
    /// throttle time (KIP-219) after its answer went out.
    muted_until: Option<tokio::time::Instant>,
}

impl Connection {
    /// A PLAINTEXT connection (anonymous, on an internal PLAINTEXT
    /// listener description); the server uses [`Connection::with_transport`].
    pub fn new(
        stream: TcpStream,
        peer: SocketAddr,
        max_request_bytes: u32,
        idle: Duration,
    ) -> Self {
        let local = stream.local_addr().ok();
        let mut session = Session::internal(
            &local.map_or_else(|| "127.0.0.1".to_string(), |a| a.ip().to_string()),
            local.map_or(0, |a| a.port()),
        );
        Arc::make_mut(&mut session).host = peer.ip().to_string();
        Connection::with_transport(
            Transport::Plain(stream),
            peer,
            session,
            max_request_bytes,
            idle,
        )
    }

    /// A connection over `stream` (TLS already handshaken) for `session`.
    pub fn with_transport(
        stream: Transport,
        peer: SocketAddr,
        session: Arc<Session>,
        max_request_bytes: u32,
        idle: Duration,
    ) -> Self {
        let _ = stream.tcp().set_nodelay(true);
        let local = stream.tcp().local_addr().ok();
        Connection {
            stream,
            peer,
            session,
            auth: None,
            sasl: None,
            authenticated_with: None,
            session_expires_ms: None,
            close_after: None,
            copy_buf: Vec::new(),
            read_buf: BytesMut::with_capacity(4096),
            max_request_bytes,
            idle,
            written: 0,
            local,
            inline_max_bytes: 0,
            budget: RequestBudget::unbounded(),
            reservation: None,
            muted_until: None,
        }
    }

    /// Serves nothing but ApiVersions and the SASL exchange until the
    /// client has authenticated with one of `sasl`'s mechanisms; the
    /// session's principal is then `User:<name>`.
    pub fn with_sasl(mut self, sasl: Arc<ListenerSasl>) -> Self {
        self.auth = Some(Authenticating::new(sasl.clone()));
        self.sasl = Some(sasl);
        self
    }

    /// Reserves each frame's size from `budget` before reading its body.
    pub fn with_budget(mut self, budget: RequestBudget) -> Self {
        self.budget = budget;
        self
    }

    /// Fetch responses with at most this many bytes of record data are
    /// sent with one write instead of sendfile (`fetch.inline.max.bytes`).
    pub fn with_inline_max_bytes(mut self, n: usize) -> Self {
        self.inline_max_bytes = n;
        self
    }

    /// Reads one frame (without its size prefix). `Ok(None)` on a clean EOF
    /// between frames.
    pub async fn read_frame(&mut self) -> Result<Option<Bytes>, ConnectionError> {
        // size prefix; the idle timer runs only while waiting for a new frame
        let size = loop {
            if let Some(prefix) = self.read_buf.first_chunk::<4>() {
                break i32::from_be_bytes(*prefix);
            }
            let n = match tokio::time::timeout(self.idle, self.fill(4)).await {
                Ok(r) => r?,
                Err(_) => return Err(ConnectionError::Idle),
            };
            if n == 0 {
                return if self.read_buf.is_empty() {
                    Ok(None)
                } else {
                    Err(ConnectionError::TruncatedFrame)
                };
            }
        };
        let max = match &self.auth {
            Some(a) if !a.is_reauth() => self
                .max_request_bytes
                .min(MAX_UNAUTHENTICATED_REQUEST_BYTES),
            _ => self.max_request_bytes,
        };
        if size < 0 || size as u32 > max {
            return Err(ConnectionError::FrameTooLarge {
                size: size as i64,
                max,
            });
        }
        let total = 4 + size as usize;
        if self.reservation.is_none() && self.read_buf.len() < total {
            // no idle timer: waiting for room is the broker's doing
            self.reservation = Some(self.budget.reserve(size as u64).await);
        }
        while self.read_buf.len() < total {
            // a frame that stops making progress is idle too
            let n = match tokio::time::timeout(self.idle, self.fill(total)).await {
                Ok(r) => r?,
                Err(_) => return Err(ConnectionError::Idle),
            };
            if n == 0 {
                return Err(ConnectionError::TruncatedFrame);
            }
        }
        let mut frame = self.read_buf.split_to(total);
        if total > READ_CHUNK {
            // The rest shares the frame's allocation and would keep it alive
            // after the request is handled and its reservation released:
            // move the (at most READ_CHUNK-sized) rest to its own buffer.
            let mut rest = BytesMut::with_capacity(self.read_buf.len().max(4096));
            rest.extend_from_slice(&self.read_buf);
            self.read_buf = rest;
        }
        frame.advance(4);
        Ok(Some(frame.freeze()))
    }

    async fn fill(&mut self, want_total: usize) -> std::io::Result<usize> {
        let need = want_total
            .saturating_sub(self.read_buf.len())
            .clamp(1, READ_CHUNK);
        self.read_buf.reserve(need.max(4096));
        self.stream.read_buf(&mut self.read_buf).await
    }

    /// Writes a response made of in-memory parts and file regions: on a
    /// plain TCP connection file regions go out with sendfile(2); TLS
    /// must encrypt in user space, so there they are read into a reused
    /// buffer and written in batches (see [`Connection::write_parts_tls`]).
    pub async fn write_parts(&mut self, parts: Vec<ResponsePart>) -> Result<(), ConnectionError> {
        let Transport::Plain(stream) = &mut self.stream else {
            return self.write_parts_tls(parts).await;
        };
        for part in parts {
            match part {
                ResponsePart::Bytes(b) => {
                    stream.write_all(&b).await?;
                    self.written += b.len() as u64;
                }
                ResponsePart::File(region) => match region.raw_fd() {
                    Some(fd) => {
                        send_file(stream, fd, region.position(), region.len()).await?;
                        self.written += region.len() as u64;
                    }
                    None => {
                        let data = region
                            .read_to_vec()
                            .map_err(|e| ConnectionError::Io(std::io::Error::other(e)))?;
                        if data.len() != region.len() {
                            return Err(ConnectionError::ShortFile {
                                missing: region.len().saturating_sub(data.len()),
                            });
                        }
                        stream.write_all(&data).await?;
                        self.written += data.len() as u64;
                    }
                },
            }
        }
        stream.flush().await?;
        Ok(())
    }

    /// The TLS copy path: parts are gathered into `copy_buf` (file regions
    /// read straight into it, whole batches as stored, nothing per record)
    /// and written whenever it holds [`TLS_WRITE_BATCH`] bytes, so a fetch
    /// response becomes a few large writes that rustls encrypts record by
    /// record. The buffer is kept for the next response and stays
    /// initialized (`used` counts what this response filled), so refilling
    /// it costs no zeroing.
    async fn write_parts_tls(&mut self, parts: Vec<ResponsePart>) -> Result<(), ConnectionError> {
        let mut buf = std::mem::take(&mut self.copy_buf);
        let mut used = 0usize;
        let result = async {
            for part in parts {
                let len = match &part {
                    ResponsePart::Bytes(b) => b.len(),
                    ResponsePart::File(r) => r.len(),
                };
                if used > 0 && used + len > TLS_WRITE_BATCH {
                    self.stream
                        .write_all(buf.get(..used).unwrap_or_default())
                        .await?;
                    used = 0;
                }
                if buf.len() < used + len {
                    buf.resize(used + len, 0);
                }
                // just sized to hold `len` bytes past `used`
                let room = buf.get_mut(used..used + len).unwrap_or_default();
                match part {
                    ResponsePart::Bytes(b) => room.copy_from_slice(&b),
                    ResponsePart::File(region) => region
                        .read_into(room)
                        .map_err(|e| ConnectionError::Io(std::io::Error::other(e)))?,
                }
                used += len;
                self.written += len as u64;
            }
            if used > 0 {
                self.stream
                    .write_all(buf.get(..used).unwrap_or_default())
                    .await?;
            }
            self.stream.flush().await?;
            Ok(())
        }
        .await;
        if buf.len() <= TLS_BUFFER_KEEP {
            self.copy_buf = buf;
        }
        result
    }

    /// Serves requests until EOF, an error, or shutdown.
    ///
    /// Answers go out in request order. A Produce whose answer waits for a
    /// sync (`flush.messages`) returns [`Reply::Later`]; while it waits, the
    /// next Produce requests on the connection are read and appended (up to
    /// [`MAX_PIPELINED`] waiting answers), so their syncs are group-committed
    /// instead of running one after another. Any other request first waits
    /// until every earlier answer has been sent.
    pub async fn run(mut self, broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
        let peer = self.peer;
        let mut pending: VecDeque<Waiting> = VecDeque::new();
        let result: Result<(), ConnectionError> = async {
            loop {
                let muted = self
                    .muted_until
                    .filter(|t| *t > tokio::time::Instant::now());
                let frame = if pending.is_empty() {
                    if let Some(until) = muted {
                        tokio::select! {
                            _ = tokio::time::sleep_until(until) => {
                                self.muted_until = None;
                                continue;
                            }
                            _ = shutdown.changed() => return Ok(()),
                        }
                    }
                    tokio::select! {
                        r = self.read_frame() => r,
                        _ = shutdown.changed() => return Ok(()),
                    }
                } else {
                    let room = pending.len() < MAX_PIPELINED && muted.is_none();
                    tokio::select! {
                        biased;
                        done = front(&mut pending) => {
                            pending.pop_front();
                            self.finish(&broker, done).await?;
                            continue;
                        }
                        _ = tokio::time::sleep_until(muted.unwrap_or_else(tokio::time::Instant::now)),
                            if muted.is_some() => {
                            self.muted_until = None;
                            continue;
                        }
                        r = self.read_frame(), if room => r,
                        // answers of records already appended still go out
                        _ = shutdown.changed() => return self.drain(&broker, &mut pending).await,
                    }
                };
                let frame = match frame {
                    Ok(Some(f)) => f,
                    // EOF: still answer what was accepted
                    Ok(None) => return self.drain(&broker, &mut pending).await,
                    Err(e) => {
                        let _ = self.drain(&broker, &mut pending).await;
                        return Err(e);
                    }
                };
                let started = std::time::Instant::now();
                broker
                    .metrics
                    .bytes_in
                    .fetch_add(4 + frame.len() as u64, Ordering::Relaxed);
                let api_key = frame.first_chunk::<2>().map(|k| i16::from_be_bytes(*k));
                if api_key != Some(ApiKey::Produce as i16) {
                    self.drain(&broker, &mut pending).await?;
                }
                let handled = self.process(&broker, frame, &shutdown).await;
                // the request is handled: its frame's memory goes back to
                // the budget (a deferred produce answer holds no frame)
                self.reservation = None;
                let out = match handled {
                    Ok(out) => out,
                    Err(e) => {
                        if let Some(key) = api_key {
                            broker.metrics.record_request(key, started.elapsed(), false);
                        }
                        // earlier requests are answered before the close
                        let _ = self.drain(&broker, &mut pending).await;
                        return Err(e);
                    }
                };
                let Outgoing {
                    correlation_id,
                    key,
                    version,
                    reply,
                    charge,
                } = out;
                let handled = std::time::Instant::now();
                let resolved = move |reply| Done {
                    out: Outgoing {
                        correlation_id,
                        key,
                        version,
                        reply,
                        charge,
                    },
                    started,
                    handled,
                    ready: std::time::Instant::now(),
                };
                match reply {
                    Reply::Later(fut) => {
                        pending.push_back(Box::pin(async move { resolved(fut.await) }));
                    }
                    reply if !pending.is_empty() => {
                        pending.push_back(Box::pin(std::future::ready(resolved(reply))));
                    }
                    reply => self.finish(&broker, resolved(reply)).await?,
                }
                if let Some(reason) = self.close_after.take() {
                    // The (delayed) answer goes out first; closing at once
                    // could overtake it at a client that handles the close
                    // first.
                    self.drain(&broker, &mut pending).await?;
                    tokio::time::sleep(FAILED_AUTHENTICATION_CLOSE_DELAY).await;
                    return Err(ConnectionError::Unauthenticated(reason));
                }
            }
        }
        .await;
        if let Err(e) = result {
            match e {
                ConnectionError::FrameTooLarge { .. } => {
                    tracing::info!(%peer, "closing connection: {e}")
                }
                ConnectionError::Io(_)
                | ConnectionError::TruncatedFrame
                | ConnectionError::Idle
                | ConnectionError::Unauthenticated(_) => {
                    tracing::debug!(%peer, "closing connection: {e}")
                }
                _ => tracing::info!(%peer, "closing connection: {e}"),
            }
        }
    }

    /// Sends every waiting answer, in order.
    async fn drain(
        &mut self,
        broker: &Arc<Broker>,
        pending: &mut VecDeque<Waiting>,
    ) -> Result<(), ConnectionError> {
        while let Some(w) = pending.pop_front() {
            let done = w.await;
            self.finish(broker, done).await?;
        }
        Ok(())
    }

    /// Sends one answer and records its metrics.
    async fn finish(&mut self, broker: &Arc<Broker>, done: Done) -> Result<(), ConnectionError> {
        let Done {
            mut out,
            started,
            handled,
            ready,
        } = done;
        let key = out.key as i16;
        let throttle = match out.charge.take() {
            Some(charge) => quota_throttle::apply(
                &broker.quotas,
                &self.session,
                out.key,
                &charge,
                &mut out.reply,
                broker.now_ms(),
            ),
            None => 0,
        };
        let writing = std::time::Instant::now();
        let r = self.send_reply(out).await;
        let written = std::time::Instant::now();
        if throttle > 0 {
            let until = tokio::time::Instant::now()
                + Duration::from_millis(u64::try_from(throttle).unwrap_or(0));
            self.muted_until = Some(self.muted_until.map_or(until, |t| t.max(until)));
        }
        broker
            .metrics
            .record_request(key, started.elapsed(), r.is_ok());
        if r.is_ok() {
            broker.metrics.record_stages(
                key,
                RequestStages {
                    handle: handled.saturating_duration_since(started),
                    wait: ready.saturating_duration_since(handled),
                    queue: writing.saturating_duration_since(ready),
                    write: written.saturating_duration_since(writing),
                },
            );
        }
        broker
            .metrics
            .bytes_out
            .fetch_add(std::mem::take(&mut self.written), Ordering::Relaxed);
        r
    }

    /// Decodes and handles one request; the answer is not sent yet.
    async fn process(
        &mut self,
        broker: &Arc<Broker>,
        frame: Bytes,
        shutdown: &watch::Receiver<bool>,
    ) -> Result<Outgoing, ConnectionError> {
        let Some(&[k0, k1, v0, v1, c0, c1, c2, c3]) = frame.first_chunk::<8>() else {
            return Err(ConnectionError::InvalidRequest(format!(
                "frame of {} bytes has no request header",
                frame.len()
            )));
        };
        let api_key = i16::from_be_bytes([k0, k1]);
        let version = i16::from_be_bytes([v0, v1]);
        let correlation_id = i32::from_be_bytes([c0, c1, c2, c3]);
        let key = ApiKey::try_from(api_key)
            .map_err(|_| ConnectionError::InvalidRequest(format!("unknown api key {api_key}")))?;
        if !handler::is_supported(key, version) {
            if key == ApiKey::ApiVersions {
                // Answer in v0 so that any client can read it and downgrade.
                let body = handler::api_versions::unsupported_version_response();
                broker.metrics.record_response_errors(api_key, &body);
                return Ok(Outgoing {
                    correlation_id,
                    key,
                    version: 0,
                    reply: Reply::Body(body),
                    charge: None,
                });
            }
            return Err(ConnectionError::InvalidRequest(format!(
                "unsupported version {version} of {}",
                key.name()
            )));
        }
        let (header, body) = match decode_frame(key, version, frame.clone()) {
            Ok(x) => x,
            Err(e) => {
                tracing::debug!(
                    peer = %self.peer,
                    frame = %hex_prefix(&frame, 256),
                    "undecodable request: {e}"
                );
                return Err(ConnectionError::InvalidRequest(e.to_string()));
            }
        };
        if self.auth.is_none()
            && let Some(sasl) = &self.sasl
        {
            let handshake = matches!(body, RequestBody::SaslHandshake(_));
            match self.authenticated_with {
                // KIP-368: an authenticated session starts re-authenticating
                Some(m) if handshake && sasl.max_reauth_ms > 0 => {
                    self.auth = Some(Authenticating::reauthenticate(sasl.clone(), m));
                }
                _ if self
                    .session_expires_ms
                    .is_some_and(|t| broker.now_ms() >= t) =>
                {
                    broker
                        .metrics
                        .sasl_sessions_expired
                        .fetch_add(1, Ordering::Relaxed);
                    return Err(ConnectionError::Unauthenticated(
                        "the SASL session expired (connections.max.reauth.ms) without a \
                         re-authentication"
                            .to_string(),
                    ));
                }
                _ => {}
            }
        }
        if let Some(auth) = &mut self.auth {
            match auth.request(&body, crate::sasl::server_nonce) {
                Gate::Pass => {}
                Gate::Answer { mut body, after } => {
                    match self.after_sasl_step(broker, after) {
                        SaslOutcome::Nothing => {}
                        SaslOutcome::Lifetime(ms) => {
                            if let ResponseBody::SaslAuthenticate(r) = body.as_mut() {
                                r.session_lifetime_ms = ms;
                            }
                        }
                        SaslOutcome::Refused(message) => {
                            if let ResponseBody::SaslAuthenticate(r) = body.as_mut() {
                                r.error_code =
                                    weir_protocol::error_code::ErrorCode::SaslAuthenticationFailed
                                        .code();
                                r.error_message = Some(message);
                                r.auth_bytes = Bytes::new();
                                r.session_lifetime_ms = 0;
                            }
                        }
                    }
                    broker.metrics.record_response_errors(api_key, &body);
                    return Ok(Outgoing {
                        correlation_id,
                        key,
                        version,
                        reply: match self.failure_delay(broker) {
                            // Kafka's connection.failed.authentication.delay.ms
                            Some(delay) => Reply::Later(Box::pin(async move {
                                tokio::time::sleep(delay).await;
                                Reply::Body(*body)
                            })),
                            None => Reply::Body(*body),
                        },
                        charge: None,
                    });
                }
                Gate::Close(reason) => {
                    self.after_sasl_step(
                        broker,
                        After::Failed {
                            reason: reason.clone(),
                        },
                    );
                    if let Some(delay) = self.failure_delay(broker) {
                        tokio::time::sleep(delay).await;
                    }
                    return Err(ConnectionError::Unauthenticated(reason));
                }
            }
        }
        let ctx = RequestContext {
            broker: broker.clone(),
            api_key: key,
            api_version: version,
            correlation_id,
            client_id: header.client_id.clone().unwrap_or_default(),
            peer: self.peer,
            local: self.local,
            session: self.session.clone(),
            shutdown: shutdown.clone(),
        };
        let mut charge = if broker.quotas.is_empty() {
            None
        } else {
            Charge::of(&body, version, frame.len(), ctx.client_id.clone())
        };
        let reply = match charge.as_mut() {
            Some(c) if c.times_handler(&broker.quotas) => {
                let mut nanos = 0;
                let reply =
                    quota_throttle::Timed::new(handler::handle(&ctx, body), &mut nanos).await;
                c.handler_nanos = nanos;
                reply
            }
            _ => handler::handle(&ctx, body).await,
        };
        Ok(Outgoing {
            correlation_id,
            key,
            version,
            reply,
            charge,
        })
    }

    /// After a failed authentication (`close_after` set), how long its
    /// answer and the close wait ([`crate::sasl::throttle`]).
    fn failure_delay(&self, broker: &Broker) -> Option<Duration> {
        self.close_after.as_ref()?;
        let base = broker
            .config
            .explicit
            .get("connection.failed.authentication.delay.ms")
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(100);
        let ms = broker
            .auth_failure_delays
            .failed(self.peer.ip(), broker.now_ms(), base);
        (ms > 0).then(|| Duration::from_millis(ms))
    }

    /// Acts on a step of the SASL exchange: a success makes the session's
    /// principal the user (a re-authentication must keep it) and sets the
    /// session's lifetime (KIP-368); a failure is counted, logged (never
    /// with the credentials) and closes the connection after the answer.
    fn after_sasl_step(&mut self, broker: &Broker, after: After) -> SaslOutcome {
        match after {
            After::Continue => SaslOutcome::Nothing,
            After::Authenticated {
                user,
                mechanism,
                expires_at_ms,
            } => {
                let reauth = self.auth.as_ref().is_some_and(Authenticating::is_reauth);
                self.auth = None;
                if reauth && user != self.session.principal.name {
                    let reason = format!(
                        "re-authentication as {user:?} of a session of {}",
                        self.session.principal
                    );
                    self.after_sasl_step(broker, After::Failed { reason });
                    return SaslOutcome::Refused(
                        "Authentication failed: a re-authentication cannot change the principal"
                            .to_string(),
                    );
                }
                let now = broker.now_ms();
                let lifetime = self
                    .sasl
                    .as_ref()
                    .and_then(|s| s.session_lifetime_ms(now, expires_at_ms));
                self.session_expires_ms = lifetime.map(|l| now.saturating_add(l));
                self.authenticated_with = Some(mechanism);
                if reauth {
                    broker
                        .metrics
                        .sasl_reauthentications
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(
                        peer = %self.peer,
                        principal = %self.session.principal,
                        "SASL re-authenticated"
                    );
                } else {
                    self.session = Session::new(
                        self.session.listener.clone(),
                        Principal::user(user),
                        self.session.host.clone(),
                    );
                    broker
                        .metrics
                        .sasl_authentications
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(
                        peer = %self.peer,
                        listener = %self.session.listener.name,
                        principal = %self.session.principal,
                        mechanism = mechanism.name(),
                        "SASL authenticated"
                    );
                }
                lifetime.map_or(SaslOutcome::Nothing, SaslOutcome::Lifetime)
            }
            After::Failed { reason } => {
                broker
                    .metrics
                    .sasl_authentication_failures
                    .fetch_add(1, Ordering::Relaxed);
                tracing::info!(
                    peer = %self.peer,
                    listener = %self.session.listener.name,
                    "SASL authentication failed: {reason}"
                );
                self.close_after = Some(reason);
                SaslOutcome::Nothing
            }
        }
    }

    /// Writes an answer (a [`Reply::Later`] must have been resolved).
    async fn send_reply(&mut self, out: Outgoing) -> Result<(), ConnectionError> {
        let Outgoing {
            correlation_id,
            key,
            version,
            reply,
            ..
        } = out;
        match reply {
            Reply::None => Ok(()),
            Reply::Body(body) => self.send_body(correlation_id, key, version, &body).await,
            Reply::WithFiles { body, files } => {
                let mut buf = BytesMut::new();
                encode_response(&mut buf, correlation_id, key, version, &body)
                    .map_err(|e| ConnectionError::Encode(e.to_string()))?;
                let file_bytes: usize = files
                    .iter()
                    .flat_map(|(_, regions)| regions)
                    .map(FileRegion::len)
                    .sum();
                let parts = splice_files(buf, files, version >= 12)?;
                let parts = if file_bytes <= self.inline_max_bytes {
                    // Small responses (a consumer at the tail): one copy and
                    // one write beat a sendfile plus a write per partition.
                    vec![ResponsePart::Bytes(flatten(parts)?)]
                } else {
                    parts
                };
                self.write_parts(parts).await
            }
            Reply::Close(reason) => Err(ConnectionError::InvalidRequest(reason)),
            Reply::Later(_) => Err(ConnectionError::Encode(
                "a deferred answer was not resolved".into(),
            )),
        }
    }

    async fn send_body(
        &mut self,
        correlation_id: i32,
        key: ApiKey,
        version: i16,
        body: &ResponseBody,
    ) -> Result<(), ConnectionError> {
        let mut buf = BytesMut::new();
        encode_response(&mut buf, correlation_id, key, version, body)
            .map_err(|e| ConnectionError::Encode(e.to_string()))?;
        self.write_parts(vec![ResponsePart::Bytes(buf.freeze())])
            .await
    }
}

/// Decodes a request frame whose api key and (supported) version were
/// already read. Bytes after the body are ignored, as Kafka's request parser
/// does: some clients send a few (librdkafka 2.12 appends 3 zero bytes to an
/// all-topics Metadata v12 request).
pub fn decode_frame(
    key: ApiKey,
    version: i16,
    frame: Bytes,
) -> Result<(RequestHeader, RequestBody), DecodeError> {
    let mut buf = frame;
    let header = RequestHeader::decode(&mut buf, key.request_header_version(version))?;
    let body = RequestBody::decode(key, version, &mut buf)?;
    if !buf.is_empty() {
        tracing::debug!(
            api = key.name(),
            version,
            extra = buf.len(),
            "ignoring bytes after the request body"
        );
    }
    Ok((header, body))
}

/// The first `max` bytes of `b` in hex, for diagnostics.
fn hex_prefix(b: &[u8], max: usize) -> String {
    let mut s: String = b.iter().take(max).map(|x| format!("{x:02x}")).collect();
    if b.len() > max {
        s.push('…');
    }
    s
}

/// A placeholder written into a `records` field in place of file data.
pub type Marker = [u8; 16];

/// Replaces each marker (encoded as a `records` field: a length prefix and
/// the 16 marker bytes) with the real length prefix and the file regions,
/// and fixes the frame's size prefix. `compact` selects the flexible-version
/// encoding (unsigned varint length + 1) over the int32 length.
pub fn splice_files(
    buf: BytesMut,
    files: Vec<(Marker, Vec<FileRegion>)>,
    compact: bool,
) -> Result<Vec<ResponsePart>, ConnectionError> {
    let mut buf = buf;
    // locate markers in buffer order
    let mut located: Vec<(usize, Vec<FileRegion>)> = Vec::with_capacity(files.len());
    for (marker, regions) in files {
        let pos = buf
            .windows(marker.len())
            .position(|w| w == marker)
            .ok_or_else(|| ConnectionError::Encode("fetch marker not found".into()))?;
        located.push((pos, regions));
    }
    located.sort_by_key(|(p, _)| *p);
    let old_prefix = if compact { 1 } else { 4 };
    let mut parts = Vec::new();
    let mut total: usize = buf.len() - 4;
    let mut cursor = 0usize;
    let frozen_src = std::mem::take(&mut buf).freeze();
    for (pos, regions) in located {
        let data_len: usize = regions.iter().map(FileRegion::len).sum();
        let head = pos
            .checked_sub(old_prefix)
            .and_then(|start| frozen_src.get(cursor..start))
            .ok_or_else(|| ConnectionError::Encode("fetch marker misplaced".into()))?;
        let mut head = BytesMut::from(head);
        if compact {
            let n = u32::try_from(data_len + 1)
                .map_err(|_| ConnectionError::Encode("records too large".into()))?;
            let before = head.len();
            weir_protocol::varint::put_unsigned_varint(&mut head, n);
            total = total + (head.len() - before) - old_prefix;
        } else {
            let n = i32::try_from(data_len)
                .map_err(|_| ConnectionError::Encode("records too large".into()))?;
            head.extend_from_slice(&n.to_be_bytes());
        }
        total = total + data_len - 16;
        parts.push(ResponsePart::Bytes(head.freeze()));
        parts.extend(regions.into_iter().map(ResponsePart::File));
        cursor = pos + 16;
    }
    parts.push(ResponsePart::Bytes(frozen_src.slice(cursor..)));
    let size =
        i32::try_from(total).map_err(|_| ConnectionError::Encode("response too large".into()))?;
    // the first part starts with the frame's size prefix
    if let Some(ResponsePart::Bytes(first)) = parts.first_mut() {
        let mut b = BytesMut::from(&first[..]);
        let prefix = b
            .get_mut(..4)
            .ok_or_else(|| ConnectionError::Encode("response has no size prefix".into()))?;
        prefix.copy_from_slice(&size.to_be_bytes());
        *first = b.freeze();
    }
    Ok(parts)
}

/// Joins response parts into one buffer, reading file regions into it.
pub fn flatten(parts: Vec<ResponsePart>) -> Result<Bytes, ConnectionError> {
    let total: usize = parts
        .iter()
        .map(|p| match p {
            ResponsePart::Bytes(b) => b.len(),
            ResponsePart::File(r) => r.len(),
        })
        .sum();
    let mut out = BytesMut::with_capacity(total);
    for part in parts {
        match part {
            ResponsePart::Bytes(b) => out.extend_from_slice(&b),
            ResponsePart::File(region) => {
                let start = out.len();
                out.resize(start + region.len(), 0);
                // just resized to hold the region past `start`
                region
                    .read_into(out.get_mut(start..).unwrap_or_default())
                    .map_err(|e| ConnectionError::Io(std::io::Error::other(e)))?;
            }
        }
    }
    Ok(out.freeze())
}

/// Sends `len` bytes of the file `fd` from `position` to the socket with
/// sendfile(2), waiting for socket writability between partial sends.
async fn send_file(
    stream: &TcpStream,
    fd: RawFd,
    position: u64,
    len: usize,
) -> Result<(), ConnectionError> {
    let sock = stream.as_raw_fd();
    let mut offset = position as i64;
    let mut remaining = len;
    while remaining > 0 {
        stream.writable().await?;
        match stream.try_io(Interest::WRITABLE, || {
            sendfile_once(sock, fd, &mut offset, remaining)
        }) {
            Ok(0) => return Err(ConnectionError::ShortFile { missing: remaining }),
            Ok(n) => {
                remaining -= n.min(remaining);
                SENDFILE_BYTES.fetch_add(n as u64, Ordering::Relaxed);
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

/// One sendfile(2) call from `file` at `*offset` to the socket `sock`.
#[allow(unsafe_code)]
fn sendfile_once(
    sock: RawFd,
    file: RawFd,
    offset: &mut i64,
    count: usize,
) -> std::io::Result<usize> {
    let mut off: libc::off_t = *offset as libc::off_t;
    // SAFETY: both descriptors are open for the duration of the call (the
    // socket is borrowed from a live TcpStream, the file is kept open by the
    // FileRegion the caller holds); `off` is a valid, exclusively borrowed
    // off_t that the kernel updates; no memory of ours is read or written.
    let n = unsafe { libc::sendfile(sock, file, &mut off, count.min(0x7fff_f000)) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    *offset = off as i64;
    Ok(n as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn region_bytes(parts: &[ResponsePart]) -> Vec<u8> {
        let mut out = Vec::new();
        for p in parts {
            match p {
                ResponsePart::Bytes(b) => out.extend_from_slice(b),
                ResponsePart::File(f) => out.extend_from_slice(&f.read_to_vec().unwrap()),
            }
        }
        out
    }

    #[test]
    fn splice_rewrites_length_prefixes_and_frame_size() {
        let dir = tempfile::tempdir().unwrap();
        let log = {
            let mgr = weir_storage::LogManager::open(
                weir_storage::LogManagerConfig::new(vec![dir.path().to_path_buf()]),
                0,
            )
            .unwrap();
            let log = mgr
                .create_log(
                    &weir_storage::TopicPartition::new("s", 0),
                    [1; 16],
                    weir_storage::LogConfig::default(),
                )
                .unwrap();
            // a 300-byte batch: its compact length needs a 2-byte varint
            let mut b = weir_protocol::records::RecordBatchBuilder::new(
                weir_protocol::records::Compression::None,
            );
            b.push(1, None, Some(Bytes::from(vec![7u8; 240])), vec![])
                .unwrap();
            let mut batch = b.build().unwrap().into_bytes().to_vec();
            log.append(&mut batch, 0).unwrap();
            log.set_high_watermark(log.log_end_offset());
            log
        };
        let read = log.read(0, 1 << 20, log.high_watermark(), true).unwrap();
        let data: Vec<u8> = read
            .regions
            .iter()
            .flat_map(|r| r.read_to_vec().unwrap())
            .collect();
        for compact in [false, true] {
            let marker: Marker = [0xA5; 16];
            // frame: size, "head", records(marker), "tail"
            let mut body = BytesMut::new();
            body.extend_from_slice(b"head");
            if compact {
                body.extend_from_slice(&[17]);
            } else {
                body.extend_from_slice(&16i32.to_be_bytes());
            }
            body.extend_from_slice(&marker);
            body.extend_from_slice(b"tail");
            let mut frame = BytesMut::new();
            frame.extend_from_slice(&(body.len() as i32).to_be_bytes());
            frame.extend_from_slice(&body);
            let parts = splice_files(frame, vec![(marker, read.regions.clone())], compact).unwrap();
            let out = region_bytes(&parts);
            // the inline form is the same bytes in one part
            assert_eq!(flatten(parts).unwrap().to_vec(), out, "compact={compact}");
            let mut expect = Vec::new();
            expect.extend_from_slice(b"head");
            if compact {
                let mut v = BytesMut::new();
                weir_protocol::varint::put_unsigned_varint(&mut v, data.len() as u32 + 1);
                assert_eq!(v.len(), 2);
                expect.extend_from_slice(&v);
            } else {
                expect.extend_from_slice(&(data.len() as i32).to_be_bytes());
            }
            expect.extend_from_slice(&data);
            expect.extend_from_slice(b"tail");
            let mut framed = (expect.len() as i32).to_be_bytes().to_vec();
            framed.extend_from_slice(&expect);
            assert_eq!(out, framed, "compact={compact}");
        }
    }
}
