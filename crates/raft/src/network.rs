//! Transports for openraft's RPCs: TCP between controllers and an
//! in-memory router for tests.
//!
//! TCP framing: each request and each response is one frame
//! `[len: u32 BE][JSON payload]`; a connection carries one request at a
//! time, answered in order. A frame longer than the limit
//! ([`MAX_FRAME_BYTES`] by default) is refused with an error before any of
//! it is read, and the payload is read incrementally, so a peer's length
//! never drives an allocation by itself. A frame's payload is a JSON
//! object, so its first byte (byte 4 of a connection) is always `{`
//! ([`RAFT_FRAME_MARKER`]): a listener shared with another protocol tells
//! the two apart by it and hands raft connections to
//! [`serve_raft_connection`].
//!
//! Every request frame is an [`RpcEnvelope`]: the request and the cluster
//! id of the sender (`{"cluster_id":"…","request":{…}}`). A node that knows
//! its cluster id answers a request naming another one (or none) with
//! [`RpcResponse::Refused`] and never hands it to its raft: a node
//! configured with another `controller.quorum.voters` cannot move this
//! quorum's term or leader. The sender logs the refusal once (and on every
//! change), publishes it ([`PeerRefusal`]) and reports it to openraft as
//! the peer being unreachable, never as a vote or an append answer.

use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use openraft::BasicNode;
use openraft::error::{
    InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::{Raft, TypeConfig};

/// Default bound on one RPC frame. Snapshots travel in chunks of at most
/// `snapshot_max_chunk_size` (set well below this by the facade).
pub const MAX_FRAME_BYTES: usize = 16 * 1024 * 1024;

/// Byte 4 of every raft connection: the `{` opening the first frame's
/// JSON payload.
pub const RAFT_FRAME_MARKER: u8 = b'{';

type Err<E = openraft::error::Infallible> = RPCError<u64, BasicNode, RaftError<u64, E>>;

/// One request on the wire.
#[derive(Debug, Serialize, Deserialize)]
pub enum RpcRequest {
    AppendEntries(AppendEntriesRequest<TypeConfig>),
    Vote(VoteRequest<u64>),
    InstallSnapshot(InstallSnapshotRequest<TypeConfig>),
}

/// One request frame: the request and the cluster its sender belongs to.
#[derive(Debug, Serialize, Deserialize)]
pub struct RpcEnvelope {
    /// The sender's cluster id; `None` from a node that knows none.
    pub cluster_id: Option<String>,
    pub request: RpcRequest,
}

/// One response on the wire: the receiving raft's answer or its error, or
/// the refusal of a request from another cluster (which never reached the
/// receiving raft).
#[derive(Debug, Serialize, Deserialize)]
pub enum RpcResponse {
    AppendEntries(Result<AppendEntriesResponse<u64>, RaftError<u64>>),
    Vote(Result<VoteResponse<u64>, RaftError<u64>>),
    InstallSnapshot(Result<InstallSnapshotResponse<u64>, RaftError<u64, InstallSnapshotError>>),
    Refused {
        /// The receiver's cluster id.
        cluster_id: String,
    },
}

/// Whether a node of cluster `ours` serves a request from `theirs`: a node
/// that knows no cluster id serves any; one that knows it serves only
/// requests naming the same.
pub fn same_cluster(ours: Option<&str>, theirs: Option<&str>) -> bool {
    match ours {
        None => true,
        Some(ours) => theirs == Some(ours),
    }
}

/// The last refusal a peer answered this node's raft RPCs with, as one
/// line naming the setting to fix; `None` until a peer refuses. A refusal
/// alone is no reason to stop: the misconfigured node may be the peer.
pub type PeerRefusal = watch::Receiver<Option<String>>;

/// Writes one frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    payload: &[u8],
    max_frame_bytes: usize,
) -> io::Result<()> {
    if payload.len() > max_frame_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "raft frame of {} bytes exceeds the limit of {max_frame_bytes}",
                payload.len()
            ),
        ));
    }
    let len = u32::try_from(payload.len()).map_err(io::Error::other)?;
    w.write_all(&len.to_be_bytes()).await?;
    w.write_all(payload).await?;
    w.flush().await
}

/// Reads one frame, refusing one longer than `max_frame_bytes`.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max_frame_bytes: usize,
) -> io::Result<Vec<u8>> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).await?;
    let len = u32::from_be_bytes(len) as usize;
    if len > max_frame_bytes {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("raft frame of {len} bytes exceeds the limit of {max_frame_bytes}"),
        ));
    }
    let mut buf = Vec::new();
    r.take(len as u64).read_to_end(&mut buf).await?;
    if buf.len() != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "connection closed inside a raft frame",
        ));
    }
    Ok(buf)
}

/// Opens TCP clients to the other controllers; every request names
/// `cluster_id`. The clients share one [`PeerRefusal`] channel.
#[derive(Debug, Clone)]
pub struct TcpNetworkFactory {
    max_frame_bytes: usize,
    cluster_id: Option<String>,
    refusal: Arc<watch::Sender<Option<String>>>,
}

impl Default for TcpNetworkFactory {
    fn default() -> Self {
        TcpNetworkFactory::new(MAX_FRAME_BYTES, None)
    }
}

impl TcpNetworkFactory {
    /// Clients sending frames of at most `max_frame_bytes` that name
    /// `cluster_id`.
    pub fn new(max_frame_bytes: usize, cluster_id: Option<String>) -> Self {
        TcpNetworkFactory {
            max_frame_bytes,
            cluster_id,
            refusal: Arc::new(watch::channel(None).0),
        }
    }

    /// The last refusal of a peer, as it changes.
    pub fn refusal(&self) -> PeerRefusal {
        self.refusal.subscribe()
    }
}

/// A lazily (re)connected TCP client to one controller.
#[derive(Debug)]
pub struct TcpClient {
    target: u64,
    addr: String,
    max_frame_bytes: usize,
    cluster_id: Option<String>,
    refusal: Arc<watch::Sender<Option<String>>>,
    conn: Option<TcpStream>,
}

impl RaftNetworkFactory<TypeConfig> for TcpNetworkFactory {
    type Network = TcpClient;

    async fn new_client(&mut self, target: u64, node: &BasicNode) -> TcpClient {
        TcpClient {
            target,
            addr: node.addr.clone(),
            max_frame_bytes: self.max_frame_bytes,
            cluster_id: self.cluster_id.clone(),
            refusal: Arc::clone(&self.refusal),
            conn: None,
        }
    }
}

impl TcpClient {
    /// Sends `request` and reads the answer; a refusal is returned as an
    /// error (logged and published once per distinct reason), so no caller
    /// can take it for an answer of the peer's raft.
    async fn call(&mut self, request: RpcRequest, ttl: Duration) -> io::Result<RpcResponse> {
        let envelope = RpcEnvelope {
            cluster_id: self.cluster_id.clone(),
            request,
        };
        match self.exchange(&envelope, ttl).await? {
            RpcResponse::Refused { cluster_id } => Err(self.refused(&cluster_id)),
            resp => Ok(resp),
        }
    }

    fn refused(&self, theirs: &str) -> io::Error {
        let reason = format!(
            "the controller at {} (node {}) refused this node's raft requests: it belongs to \
             cluster {theirs}, this node to {}: controller.quorum.voters must list the same \
             voters on every node",
            self.addr,
            self.target,
            self.cluster_id.as_deref().unwrap_or("(none)"),
        );
        let changed = self.refusal.send_if_modified(|last| {
            let changed = last.as_deref() != Some(reason.as_str());
            if changed {
                *last = Some(reason.clone());
            }
            changed
        });
        if changed {
            tracing::error!("{reason}");
        }
        io::Error::new(io::ErrorKind::PermissionDenied, reason)
    }

    async fn exchange(&mut self, req: &RpcEnvelope, ttl: Duration) -> io::Result<RpcResponse> {
        let payload = serde_json::to_vec(req).map_err(io::Error::other)?;
        // The connection is taken out for the exchange and put back only
        // once its answer is read: openraft drops this future at its own
        // timeouts, and a connection left with a request in flight would
        // answer the next request with this one's answer (a heartbeat's
        // success taken for an append's: a follower counted as holding
        // entries it never got).
        let conn = self.conn.take();
        let (addr, max_frame_bytes) = (self.addr.clone(), self.max_frame_bytes);
        let result = tokio::time::timeout(ttl, async move {
            let mut conn = match conn {
                Some(c) => c,
                None => {
                    let stream = TcpStream::connect(&addr).await?;
                    stream.set_nodelay(true)?;
                    stream
                }
            };
            write_frame(&mut conn, &payload, max_frame_bytes).await?;
            let resp = read_frame(&mut conn, max_frame_bytes).await?;
            let resp = serde_json::from_slice::<RpcResponse>(&resp)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
            Ok((conn, resp))
        })
        .await;
        match result {
            Ok(Ok((conn, resp))) => {
                self.conn = Some(conn);
                Ok(resp)
            }
            Ok(Err(e)) => Err(e),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("raft rpc to node {} timed out", self.target),
            )),
        }
    }
}

fn unreachable<E: std::error::Error>(e: &io::Error) -> RPCError<u64, BasicNode, E> {
    if e.kind() == io::ErrorKind::InvalidData || e.kind() == io::ErrorKind::InvalidInput {
        RPCError::Network(NetworkError::new(e))
    } else {
        RPCError::Unreachable(Unreachable::new(e))
    }
}

fn unexpected<E: std::error::Error>() -> RPCError<u64, BasicNode, E> {
    RPCError::Network(NetworkError::new(&io::Error::new(
        io::ErrorKind::InvalidData,
        "response kind does not match the request",
    )))
}

impl RaftNetwork<TypeConfig> for TcpClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, Err> {
        match self
            .call(RpcRequest::AppendEntries(rpc), option.hard_ttl())
            .await
        {
            Ok(RpcResponse::AppendEntries(r)) => {
                r.map_err(|e| RemoteError::new(self.target, e).into())
            }
            Ok(_) => Err(unexpected()),
            Err(e) => Err(unreachable(&e)),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, Err<InstallSnapshotError>> {
        match self
            .call(RpcRequest::InstallSnapshot(rpc), option.hard_ttl())
            .await
        {
            Ok(RpcResponse::InstallSnapshot(r)) => {
                r.map_err(|e| RemoteError::new(self.target, e).into())
            }
            Ok(_) => Err(unexpected()),
            Err(e) => Err(unreachable(&e)),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        option: RPCOption,
    ) -> Result<VoteResponse<u64>, Err> {
        match self.call(RpcRequest::Vote(rpc), option.hard_ttl()).await {
            Ok(RpcResponse::Vote(r)) => r.map_err(|e| RemoteError::new(self.target, e).into()),
            Ok(_) => Err(unexpected()),
            Err(e) => Err(unreachable(&e)),
        }
    }
}

/// Serves raft RPCs arriving on `listener` until the returned future is
/// dropped (dropping it also ends every connection it accepted). Requests
/// from another cluster than `cluster_id` are refused.
pub async fn serve_tcp(
    listener: TcpListener,
    raft: Raft,
    max_frame_bytes: usize,
    cluster_id: Option<String>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, peer)) => {
                    let raft = raft.clone();
                    let cluster_id = cluster_id.clone();
                    connections.spawn(async move {
                        if let Err(e) = serve_connection(stream, raft, max_frame_bytes, cluster_id).await
                            && e.kind() != io::ErrorKind::UnexpectedEof
                        {
                            tracing::debug!(%peer, error = %e, "raft connection closed");
                        }
                    });
                }
                Err(e) => {
                    tracing::warn!(error = %e, "raft listener accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn serve_connection(
    stream: TcpStream,
    raft: Raft,
    max_frame_bytes: usize,
    cluster_id: Option<String>,
) -> io::Result<()> {
    stream.set_nodelay(true)?;
    serve_raft_connection(stream, raft, max_frame_bytes, cluster_id.as_deref()).await
}

/// Serves raft RPCs on one already-accepted connection until the peer
/// closes it (`UnexpectedEof`) or sends something that is not a raft
/// frame. For a listener that carries other protocols too: the caller
/// accepts, recognizes a raft connection (its first frame's payload is
/// JSON, so byte 4 of the stream is `{`) and hands the stream over with
/// those bytes still unread (replayed by the stream if it peeked them).
///
/// A request naming another cluster than `cluster_id` is answered
/// [`RpcResponse::Refused`] without reaching `raft` (see
/// [`same_cluster`]); the first on a connection is logged.
pub async fn serve_raft_connection<S>(
    mut stream: S,
    raft: Raft,
    max_frame_bytes: usize,
    cluster_id: Option<&str>,
) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut logged = false;
    loop {
        let frame = read_frame(&mut stream, max_frame_bytes).await?;
        let envelope: RpcEnvelope = serde_json::from_slice(&frame)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        let resp = match cluster_id {
            Some(ours) if !same_cluster(cluster_id, envelope.cluster_id.as_deref()) => {
                if !logged {
                    logged = true;
                    tracing::warn!(
                        "refused raft requests from a node of cluster {}: this quorum is \
                         cluster {ours} (that node's controller.quorum.voters differs)",
                        envelope.cluster_id.as_deref().unwrap_or("(none)")
                    );
                }
                RpcResponse::Refused {
                    cluster_id: ours.to_string(),
                }
            }
            _ => dispatch(&raft, envelope.request).await,
        };
        let bytes = serde_json::to_vec(&resp).map_err(io::Error::other)?;
        write_frame(&mut stream, &bytes, max_frame_bytes).await?;
    }
}

async fn dispatch(raft: &Raft, req: RpcRequest) -> RpcResponse {
    match req {
        RpcRequest::AppendEntries(r) => RpcResponse::AppendEntries(raft.append_entries(r).await),
        RpcRequest::Vote(r) => RpcResponse::Vote(raft.vote(r).await),
        RpcRequest::InstallSnapshot(r) => {
            RpcResponse::InstallSnapshot(raft.install_snapshot(r).await)
        }
    }
}

/// An in-memory network for tests: nodes register their raft handle and
/// links can be cut in either direction.
#[derive(Clone, Default)]
pub struct MemRouter {
    inner: Arc<Mutex<RouterInner>>,
}

#[derive(Default)]
struct RouterInner {
    nodes: BTreeMap<u64, Raft>,
    /// Cut links as (from, to).
    cut: BTreeSet<(u64, u64)>,
    /// Nodes whose AppendEntries carrying entries are lost (heartbeats pass).
    drop_entries: BTreeSet<u64>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl MemRouter {
    /// Makes `raft` reachable as node `id` (replacing a previous one).
    pub fn register(&self, id: u64, raft: Raft) {
        lock(&self.inner).nodes.insert(id, raft);
    }

    /// Makes node `id` unreachable, as if it were stopped.
    pub fn unregister(&self, id: u64) {
        lock(&self.inner).nodes.remove(&id);
    }

    /// Cuts every link to and from `id`.
    pub fn isolate(&self, id: u64) {
        let mut inner = lock(&self.inner);
        let others: Vec<u64> = inner.nodes.keys().copied().filter(|n| *n != id).collect();
        for other in others {
            inner.cut.insert((id, other));
            inner.cut.insert((other, id));
        }
    }

    /// Loses every AppendEntries from `id` that carries entries, while its
    /// heartbeats (empty AppendEntries) still pass: `id` keeps leading and
    /// confirming its leadership, but nothing it proposes commits.
    pub fn drop_entries_from(&self, id: u64) {
        lock(&self.inner).drop_entries.insert(id);
    }

    /// Restores every link and stops dropping entries.
    pub fn heal(&self) {
        let mut inner = lock(&self.inner);
        inner.cut.clear();
        inner.drop_entries.clear();
    }

    /// The network factory of node `from`.
    pub fn factory(&self, from: u64) -> MemNetworkFactory {
        MemNetworkFactory {
            from,
            router: self.clone(),
        }
    }

    fn target(&self, from: u64, to: u64) -> Result<Raft, io::Error> {
        let inner = lock(&self.inner);
        if inner.cut.contains(&(from, to)) || inner.cut.contains(&(to, from)) {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("link {from} -> {to} is cut"),
            ));
        }
        inner.nodes.get(&to).cloned().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("node {to} is down"),
            )
        })
    }
}

/// Node `from`'s side of a [`MemRouter`].
#[derive(Clone)]
pub struct MemNetworkFactory {
    from: u64,
    router: MemRouter,
}

/// A client from one node to another through a [`MemRouter`].
pub struct MemClient {
    from: u64,
    to: u64,
    router: MemRouter,
}

impl RaftNetworkFactory<TypeConfig> for MemNetworkFactory {
    type Network = MemClient;

    async fn new_client(&mut self, target: u64, _node: &BasicNode) -> MemClient {
        MemClient {
            from: self.from,
            to: target,
            router: self.router.clone(),
        }
    }
}

impl MemClient {
    /// Checks the link both before and after the call, so a reply crossing
    /// a link cut meanwhile is lost like the request would be.
    fn check(&self) -> Result<Raft, io::Error> {
        self.router.target(self.from, self.to)
    }
}

impl RaftNetwork<TypeConfig> for MemClient {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<u64>, Err> {
        let raft = self.check().map_err(|e| unreachable(&e))?;
        if !rpc.entries.is_empty() && lock(&self.router.inner).drop_entries.contains(&self.from) {
            let e = io::Error::new(
                io::ErrorKind::ConnectionReset,
                format!("entries {} -> {} dropped", self.from, self.to),
            );
            return Err(unreachable(&e));
        }
        let resp = raft.append_entries(rpc).await;
        self.check().map_err(|e| unreachable(&e))?;
        resp.map_err(|e| RemoteError::new(self.to, e).into())
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<u64>, Err<InstallSnapshotError>> {
        let raft = self.check().map_err(|e| unreachable(&e))?;
        let resp = raft.install_snapshot(rpc).await;
        self.check().map_err(|e| unreachable(&e))?;
        resp.map_err(|e| RemoteError::new(self.to, e).into())
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<u64>,
        _option: RPCOption,
    ) -> Result<VoteResponse<u64>, Err> {
        let raft = self.check().map_err(|e| unreachable(&e))?;
        let resp = raft.vote(rpc).await;
        self.check().map_err(|e| unreachable(&e))?;
        resp.map_err(|e| RemoteError::new(self.to, e).into())
    }
}
