//! The CONTROLLER listener: one port per controller carrying two
//! protocols, as Kafka's `controller.quorum.voters` names one address per
//! node.
//!
//! Every accepted connection is classified by its first five bytes:
//!
//! - a raft connection starts with a frame `[u32 len][JSON]` whose payload
//!   opens with `{`, so byte 4 is [`RAFT_FRAME_MARKER`]; it goes to
//!   weir-raft's [`serve_raft_connection`] with those bytes replayed, which
//!   refuses requests naming another cluster id than this node's;
//! - a Kafka connection starts with a request `[i32 size][i16 api_key]...`
//!   and every api key is below 256, so byte 4 is 0; it is served here,
//!   one request at a time, answered in order.
//!
//! Anything else is closed. A Kafka request frame longer than
//! `max_request_bytes` (or with a negative size) closes the connection
//! before any of it is read; the frame is read incrementally, so a peer's
//! size never drives an allocation by itself. A frame that does not decode
//! closes the connection too, except an ApiVersions of a version this side
//! does not know, which is answered in v0 with UNSUPPORTED_VERSION and the
//! versions served, as Kafka does.
//!
//! The handlers (`brokers`, `topics`, `leaders`, `configs`, `acls`,
//! `security`, `partitions`, `reassignments`, `quorum`) map requests to the
//! [`QuorumController`] and its answers to wire responses; they never
//! touch the socket. On a node that is not the active controller every
//! request but ApiVersions and DescribeQuorum is answered NOT_CONTROLLER,
//! in the error field(s) its schema has.

mod acls;
mod brokers;
mod configs;
mod leaders;
pub mod metadata_fetch;
pub mod partitions;
mod quorum;
mod reassignments;
mod security;
mod topics;

pub use quorum::{METADATA_TOPIC, split_host_port};

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::frame::{FrameError, decode_request, encode_response};
use weir_protocol::messages::{
    ApiKey, ApiVersionsResponse, RequestBody, RequestHeader, ResponseBody,
};
use weir_raft::network::{RAFT_FRAME_MARKER, serve_raft_connection};

use crate::controller::QuorumController;
use crate::image::ImageReader;

/// Default bound on one Kafka request frame on the CONTROLLER listener
/// (controller requests are small; a CreateTopics with explicit
/// assignments for thousands of partitions still fits).
pub const DEFAULT_MAX_REQUEST_BYTES: usize = 8 * 1024 * 1024;

/// Default bound on open connections to one CONTROLLER listener (voters'
/// raft links, brokers, admin clients).
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;

/// How long a new connection may take to send its first five bytes.
const CLASSIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// The milliseconds the controller's decisions are made at (session
/// expiry compares heartbeat times with `tick` times, so both read the same
/// clock). Only the active controller's clock matters: a new active
/// controller starts every session afresh.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// Milliseconds since the first call in this process, from the monotonic
/// clock.
pub fn monotonic_clock() -> Clock {
    let start = Instant::now();
    Arc::new(move || u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX))
}

/// What the CONTROLLER listener serves with. Cloning shares it.
#[derive(Clone)]
pub struct ListenerContext {
    pub node_id: u64,
    pub controller: QuorumController,
    pub images: ImageReader,
    /// For raft connections and DescribeQuorum.
    pub raft: weir_raft::Raft,
    /// The voters and their CONTROLLER endpoints `host:port`.
    pub voters: std::collections::BTreeMap<u64, String>,
    /// A registration with another cluster id is INCONSISTENT_CLUSTER_ID
    /// and a raft request naming another is refused; `None` accepts any.
    pub cluster_id: Option<String>,
    pub clock: Clock,
    pub max_request_bytes: usize,
    /// The raft transport's frame bound.
    pub max_raft_frame_bytes: usize,
    /// Connections beyond this many open ones are closed on accept.
    pub max_connections: usize,
}

/// The api keys served and their version ranges: exactly what
/// [`dispatch`] answers.
pub const SERVED_APIS: &[ApiKey] = &[
    ApiKey::ApiVersions,
    ApiKey::BrokerRegistration,
    ApiKey::BrokerHeartbeat,
    ApiKey::ControlledShutdown,
    ApiKey::CreateTopics,
    ApiKey::DeleteTopics,
    ApiKey::CreatePartitions,
    ApiKey::ElectLeaders,
    ApiKey::IncrementalAlterConfigs,
    ApiKey::CreateAcls,
    ApiKey::DeleteAcls,
    ApiKey::AlterUserScramCredentials,
    ApiKey::AlterClientQuotas,
    ApiKey::AlterPartition,
    ApiKey::AllocateProducerIds,
    ApiKey::AlterPartitionReassignments,
    ApiKey::ListPartitionReassignments,
    ApiKey::DescribeQuorum,
    ApiKey::Fetch,
    ApiKey::FetchSnapshot,
];

/// Accepts connections on `listener` until the returned future is dropped
/// (dropping it also ends every connection it accepted).
pub async fn serve(listener: TcpListener, ctx: ListenerContext) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    if connections.len() >= ctx.max_connections {
                        tracing::warn!(%peer, limit = ctx.max_connections, "controller listener full; connection closed");
                        drop(stream);
                        continue;
                    }
                    let ctx = ctx.clone();
                    connections.spawn(async move {
                        if let Err(e) = serve_connection(stream, ctx).await
                            && e.kind() != io::ErrorKind::UnexpectedEof
                        {
                            tracing::debug!(%peer, error = %e, "controller connection closed");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "controller listener accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(mut stream: TcpStream, ctx: ListenerContext) -> io::Result<()> {
    stream.set_nodelay(true)?;
    let mut head = [0u8; 5];
    tokio::time::timeout(CLASSIFY_TIMEOUT, stream.read_exact(&mut head))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no request within the timeout"))??;
    let stream = Rewind::new(head, stream);
    match head[4] {
        RAFT_FRAME_MARKER => {
            let cluster_id = ctx.cluster_id.as_deref();
            serve_raft_connection(
                stream,
                ctx.raft.clone(),
                ctx.max_raft_frame_bytes,
                cluster_id,
            )
            .await
        }
        0 => serve_kafka(stream, &ctx).await,
        other => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("byte 4 of the connection is {other:#04x}: neither a raft nor a Kafka frame"),
        )),
    }
}

async fn serve_kafka<S>(mut stream: S, ctx: &ListenerContext) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut out = BytesMut::new();
    loop {
        let frame = read_request_frame(&mut stream, ctx.max_request_bytes).await?;
        let (correlation_id, key, version, body) = match decode_request(frame) {
            Ok((header, body)) => {
                let key = body.api_key();
                let version = header.request_api_version;
                (
                    header.correlation_id,
                    key,
                    version,
                    respond(ctx, &header, body).await,
                )
            }
            Err(FrameError::UnsupportedVersion {
                api_key: ApiKey::ApiVersions,
                correlation_id,
                ..
            }) => (
                correlation_id,
                ApiKey::ApiVersions,
                0,
                Some(ResponseBody::ApiVersions(api_versions(
                    ErrorCode::UnsupportedVersion,
                ))),
            ),
            Err(e) => {
                return Err(io::Error::new(io::ErrorKind::InvalidData, e));
            }
        };
        let Some(body) = body else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is not served on the CONTROLLER listener", key.name()),
            ));
        };
        out.clear();
        encode_response(&mut out, correlation_id, key, version, &body)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        stream.write_all(&out).await?;
        stream.flush().await?;
    }
}

/// Reads one Kafka request frame (without its size), refusing a negative
/// size or one above `max_request_bytes` before reading any of it.
async fn read_request_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max_request_bytes: usize,
) -> io::Result<Bytes> {
    let mut size = [0u8; 4];
    r.read_exact(&mut size).await?;
    let size = i32::from_be_bytes(size);
    let len = usize::try_from(size).map_err(|_| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("negative request size {size}"),
        )
    })?;
    if len > max_request_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("request of {len} bytes exceeds max_request_bytes {max_request_bytes}"),
        ));
    }
    let mut buf = Vec::new();
    r.take(len as u64).read_to_end(&mut buf).await?;
    if buf.len() != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed inside a request",
        ));
    }
    Ok(Bytes::from(buf))
}

/// The response to one decoded request, or `None` for an api not served.
async fn respond(
    ctx: &ListenerContext,
    header: &RequestHeader,
    body: RequestBody,
) -> Option<ResponseBody> {
    let version = header.request_api_version;
    Some(match body {
        RequestBody::ApiVersions(_) => ResponseBody::ApiVersions(api_versions(ErrorCode::None)),
        RequestBody::BrokerRegistration(r) => {
            ResponseBody::BrokerRegistration(brokers::register(ctx, r).await)
        }
        RequestBody::BrokerHeartbeat(r) => {
            ResponseBody::BrokerHeartbeat(brokers::heartbeat(ctx, r).await)
        }
        RequestBody::ControlledShutdown(r) => {
            ResponseBody::ControlledShutdown(brokers::controlled_shutdown(ctx, r).await)
        }
        RequestBody::CreateTopics(r) => {
            ResponseBody::CreateTopics(topics::create(ctx, r, version).await)
        }
        RequestBody::DeleteTopics(r) => {
            ResponseBody::DeleteTopics(topics::delete(ctx, r, version).await)
        }
        RequestBody::CreatePartitions(r) => {
            ResponseBody::CreatePartitions(topics::create_partitions(ctx, r).await)
        }
        RequestBody::ElectLeaders(r) => {
            ResponseBody::ElectLeaders(leaders::elect(ctx, r, version).await)
        }
        RequestBody::IncrementalAlterConfigs(r) => {
            ResponseBody::IncrementalAlterConfigs(configs::incremental_alter(ctx, r).await)
        }
        RequestBody::CreateAcls(r) => ResponseBody::CreateAcls(acls::create(ctx, r).await),
        RequestBody::DeleteAcls(r) => ResponseBody::DeleteAcls(acls::delete(ctx, r).await),
        RequestBody::AlterUserScramCredentials(r) => {
            ResponseBody::AlterUserScramCredentials(security::alter_scram(ctx, r).await)
        }
        RequestBody::AlterClientQuotas(r) => {
            ResponseBody::AlterClientQuotas(security::alter_quotas(ctx, r).await)
        }
        RequestBody::AlterPartition(r) => {
            ResponseBody::AlterPartition(partitions::alter_partition(ctx, r, version).await)
        }
        RequestBody::AllocateProducerIds(r) => {
            ResponseBody::AllocateProducerIds(partitions::allocate_producer_ids(ctx, r).await)
        }
        RequestBody::AlterPartitionReassignments(r) => {
            ResponseBody::AlterPartitionReassignments(reassignments::alter(ctx, r).await)
        }
        RequestBody::ListPartitionReassignments(r) => {
            ResponseBody::ListPartitionReassignments(reassignments::list(ctx, r).await)
        }
        RequestBody::DescribeQuorum(r) => {
            ResponseBody::DescribeQuorum(quorum::describe(ctx, r, version))
        }
        RequestBody::Fetch(r) => ResponseBody::Fetch(metadata_fetch::fetch(ctx, r).await),
        RequestBody::FetchSnapshot(r) => {
            ResponseBody::FetchSnapshot(metadata_fetch::fetch_snapshot(ctx, r))
        }
        _ => return None,
    })
}

/// The versions of `key` served here: the protocol crate's, but
/// AlterPartition from v2 (Kafka 4's minimum; topics by id).
pub fn served_versions(key: ApiKey) -> (i16, i16) {
    match key {
        ApiKey::AlterPartition => partitions::ALTER_PARTITION_VERSIONS,
        other => other.valid_versions(),
    }
}

/// ApiVersions: exactly [`SERVED_APIS`] with [`served_versions`].
fn api_versions(error: ErrorCode) -> ApiVersionsResponse {
    use weir_protocol::messages::api_versions_response::ApiVersion;
    ApiVersionsResponse {
        error_code: error.code(),
        api_keys: SERVED_APIS
            .iter()
            .map(|k| {
                let (min_version, max_version) = served_versions(*k);
                ApiVersion {
                    api_key: *k as i16,
                    min_version,
                    max_version,
                    ..Default::default()
                }
            })
            .collect(),
        ..Default::default()
    }
}

/// A stream whose first bytes, already read to classify it, are replayed
/// before the rest.
struct Rewind<S> {
    head: [u8; 5],
    pos: usize,
    inner: S,
}

impl<S> Rewind<S> {
    fn new(head: [u8; 5], inner: S) -> Self {
        Rewind {
            head,
            pos: 0,
            inner,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Rewind<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Some(rest) = this.head.get(this.pos..).filter(|r| !r.is_empty()) {
            let n = rest.len().min(buf.remaining());
            if let Some(chunk) = rest.get(..n) {
                buf.put_slice(chunk);
            }
            this.pos += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Rewind<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
