//! [`WeirCluster`]: several `weir serve` processes on loopback forming one
//! cluster of combined nodes (broker and controller each), with their own
//! data directories and ports.
//!
//! Each node's CONTROLLER port is fixed for the cluster's life (the voters
//! list names it), picked free on 127.0.0.1 before the first start; client
//! listeners use port 0, so a restarted node may serve clients on another
//! port (read [`WeirCluster::bootstrap`] again).
//!
//! [`fetch_metadata`] reads what a node tells clients (brokers, controller
//! id, each partition's leader, leader epoch, replicas and ISR) with a
//! Metadata v7 request written from the protocol spec, not weir's codec.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::Duration;

use crate::{HarnessError, WeirProcess};

/// The nodes of one cluster; node `i` of the vector has `node.id = i + 1`.
pub struct WeirCluster {
    pub nodes: Vec<WeirProcess>,
    controller_ports: Vec<u16>,
}

/// Settings every node of a test cluster gets: short heartbeats and
/// session timeouts so failover is quick, no metrics listener.
pub const FAST_FAILOVER: &[(&str, &str)] = &[
    ("broker.heartbeat.interval.ms", "200"),
    ("broker.session.timeout.ms", "3000"),
];

impl WeirCluster {
    /// Starts `n` combined nodes with `extra` settings (`name=value`) on
    /// top of the cluster's own.
    pub fn start(n: usize, extra: &[(&str, &str)]) -> Result<Self, HarnessError> {
        Self::start_with_listeners(n, "PLAINTEXT://127.0.0.1:0", extra)
    }

    /// [`start`](Self::start) with `client_listeners` (a `listeners` value
    /// without the CONTROLLER entry, which is added) on every node, e.g.
    /// `PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0`. The first is each
    /// node's [`WeirProcess::bootstrap`]; find the others with
    /// [`WeirProcess::listener_addr`].
    pub fn start_with_listeners(
        n: usize,
        client_listeners: &str,
        extra: &[(&str, &str)],
    ) -> Result<Self, HarnessError> {
        // The controller ports are picked free, then released for the nodes
        // to bind: another process may take one in between. Such a start
        // is tried again on other ports.
        let mut attempt = 0;
        loop {
            attempt += 1;
            match Self::start_once(n, client_listeners, extra) {
                Err(e) if attempt < 3 && e.to_string().contains("Address already in use") => {
                    eprintln!("cluster start: a port was taken meanwhile, trying other ports: {e}");
                }
                result => return result,
            }
        }
    }

    fn start_once(
        n: usize,
        client_listeners: &str,
        extra: &[(&str, &str)],
    ) -> Result<Self, HarnessError> {
        let controller_ports = free_ports(n)?;
        let voters = controller_ports
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::with_capacity(n);
        for (i, port) in controller_ports.iter().enumerate() {
            let mut sets: Vec<String> = vec![
                format!("node.id={}", i + 1),
                "process.roles=broker,controller".into(),
                format!("controller.quorum.voters={voters}"),
                format!("listeners={client_listeners},CONTROLLER://127.0.0.1:{port}"),
                "controller.listener.names=CONTROLLER".into(),
                "http.listeners=127.0.0.1:0".into(),
            ];
            sets.extend(extra.iter().map(|(k, v)| format!("{k}={v}")));
            let mut args: Vec<&str> = Vec::new();
            for s in &sets {
                args.push("--set");
                args.push(s);
            }
            nodes.push(WeirProcess::start_with_args(&args)?);
        }
        Ok(WeirCluster {
            nodes,
            controller_ports,
        })
    }

    /// A bootstrap string naming every running node's client listener.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .filter(|n| n.pid().is_some())
            .map(|n| n.bootstrap().to_string())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// `host:port` of node `id`'s CONTROLLER listener.
    pub fn controller_address(&self, id: i32) -> Option<String> {
        let i = usize::try_from(id).ok()?.checked_sub(1)?;
        self.controller_ports
            .get(i)
            .map(|p| format!("127.0.0.1:{p}"))
    }

    /// The node with `node.id = id`.
    pub fn node(&mut self, id: i32) -> &mut WeirProcess {
        let i = usize::try_from(id - 1).unwrap_or(usize::MAX);
        &mut self.nodes[i]
    }
}

/// `n` distinct ports that were free on 127.0.0.1 a moment ago (all bound
/// at once, then released).
fn free_ports(n: usize) -> Result<Vec<u16>, HarnessError> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()?)
}

impl WeirCluster {
    /// The `controller.quorum.voters` value every node was started with.
    pub fn voters(&self) -> String {
        self.controller_ports
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// The ids of the nodes whose process is running (stopped ones too).
    pub fn running_ids(&self) -> Vec<i32> {
        (1..)
            .zip(&self.nodes)
            .filter(|(_, n)| n.pid().is_some())
            .map(|(id, _)| id)
            .collect()
    }

    /// Metadata (v7) from node `id`'s client listener.
    pub fn metadata_from(&self, id: i32) -> Result<ClusterMetadata, HarnessError> {
        let i = usize::try_from(id - 1).unwrap_or(usize::MAX);
        let node = self.nodes.get(i).ok_or_else(|| {
            HarnessError::Io(std::io::Error::other(format!(
                "no node {id} in the cluster"
            )))
        })?;
        fetch_metadata(node.bootstrap(), METADATA_TIMEOUT)
    }

    /// Sends `signal` (`libc::SIGSTOP`, `libc::SIGCONT`, …) to node `id`'s
    /// process; false if it is not running.
    #[allow(unsafe_code)]
    pub fn signal(&mut self, id: i32, signal: libc::c_int) -> bool {
        let Some(pid) = self
            .node(id)
            .pid()
            .and_then(|p| libc::pid_t::try_from(p).ok())
        else {
            return false;
        };
        // SAFETY: kill(2) takes plain integers and touches no memory of ours.
        // The pid is that of our own child, which has not been reaped (the
        // `WeirProcess` holds its `Child` unwaited), so it names no other
        // process.
        unsafe { libc::kill(pid, signal) == 0 }
    }
}

/// How long one Metadata exchange may take before it counts as failed.
pub const METADATA_TIMEOUT: Duration = Duration::from_secs(5);

/// What a broker's Metadata response (v7, all topics) said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterMetadata {
    /// The controller id the broker reports (-1: none known).
    pub controller_id: i32,
    /// Listed brokers: node id to `host:port`.
    pub brokers: BTreeMap<i32, String>,
    /// Topics by name, each with its partitions sorted by index.
    pub topics: BTreeMap<String, Vec<PartitionMetadata>>,
}

/// One partition of a Metadata response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionMetadata {
    pub partition: i32,
    pub error_code: i16,
    /// -1 when the partition has no leader.
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    pub offline: Vec<i32>,
}

impl ClusterMetadata {
    /// The partitions of `topic` (empty when it is not listed).
    pub fn partitions(&self, topic: &str) -> &[PartitionMetadata] {
        self.topics.get(topic).map(Vec::as_slice).unwrap_or(&[])
    }

    /// `(topic, partition)` of every partition `leader` leads.
    pub fn led_by(&self, leader: i32) -> Vec<(String, PartitionMetadata)> {
        self.topics
            .iter()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), p.clone())))
            .filter(|(_, p)| p.leader == leader)
            .collect()
    }
}

/// Sends one Metadata v7 request for all topics to `addr` and decodes the
/// answer. Written against the protocol spec, independently of weir's own
/// codec, so that it checks the broker rather than agreeing with it.
pub fn fetch_metadata(addr: &str, timeout: Duration) -> Result<ClusterMetadata, HarnessError> {
    const API_KEY_METADATA: i16 = 3;
    const VERSION: i16 = 7;
    const CORRELATION_ID: i32 = 7;
    let client_id = b"weir-compat-cluster";
    let mut body = Vec::new();
    body.extend_from_slice(&API_KEY_METADATA.to_be_bytes());
    body.extend_from_slice(&VERSION.to_be_bytes());
    body.extend_from_slice(&CORRELATION_ID.to_be_bytes());
    body.extend_from_slice(&(client_id.len() as i16).to_be_bytes());
    body.extend_from_slice(client_id);
    body.extend_from_slice(&(-1i32).to_be_bytes()); // topics: null = all
    body.push(0); // allow_auto_topic_creation = false

    let socket = addr
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| std::io::Error::other(format!("{addr}: no address")))?;
    let mut stream = TcpStream::connect_timeout(&socket, timeout)?;
    stream.set_read_timeout(Some(timeout))?;
    stream.set_write_timeout(Some(timeout))?;
    let mut frame = (body.len() as i32).to_be_bytes().to_vec();
    frame.extend_from_slice(&body);
    stream.write_all(&frame)?;
    let mut len = [0u8; 4];
    stream.read_exact(&mut len)?;
    let len = usize::try_from(i32::from_be_bytes(len))
        .ok()
        .filter(|&l| l <= MAX_RESPONSE_BYTES)
        .ok_or_else(|| malformed("response length out of range"))?;
    let mut response = vec![0u8; len];
    stream.read_exact(&mut response)?;
    let mut r = Reader(&response);
    if r.i32()? != CORRELATION_ID {
        return Err(malformed("correlation id mismatch"));
    }
    decode_metadata_v7(&mut r)
}

/// Largest Metadata response [`fetch_metadata`] accepts.
const MAX_RESPONSE_BYTES: usize = 16 << 20;

fn decode_metadata_v7(r: &mut Reader<'_>) -> Result<ClusterMetadata, HarnessError> {
    let _throttle_ms = r.i32()?;
    let mut brokers = BTreeMap::new();
    for _ in 0..r.count()? {
        let id = r.i32()?;
        let host = r.string()?.unwrap_or_default();
        let port = r.i32()?;
        let _rack = r.string()?;
        brokers.insert(id, format!("{host}:{port}"));
    }
    let _cluster_id = r.string()?;
    let controller_id = r.i32()?;
    let mut topics = BTreeMap::new();
    for _ in 0..r.count()? {
        let _topic_error = r.i16()?;
        let name = r.string()?.unwrap_or_default();
        let _internal = r.take(1)?;
        let mut partitions = Vec::new();
        for _ in 0..r.count()? {
            partitions.push(PartitionMetadata {
                error_code: r.i16()?,
                partition: r.i32()?,
                leader: r.i32()?,
                leader_epoch: r.i32()?,
                replicas: r.ids()?,
                isr: r.ids()?,
                offline: r.ids()?,
            });
        }
        partitions.sort_by_key(|p| p.partition);
        topics.insert(name, partitions);
    }
    Ok(ClusterMetadata {
        controller_id,
        brokers,
        topics,
    })
}

fn malformed(what: &str) -> HarnessError {
    HarnessError::Io(std::io::Error::other(format!(
        "malformed Metadata response: {what}"
    )))
}

/// A cursor over a response body; every read checks the bytes are there.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], HarnessError> {
        if self.0.len() < n {
            return Err(malformed("truncated"));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn i16(&mut self) -> Result<i16, HarnessError> {
        let b = self.take(2)?;
        Ok(i16::from_be_bytes([b[0], b[1]]))
    }

    fn i32(&mut self) -> Result<i32, HarnessError> {
        let b = self.take(4)?;
        Ok(i32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// An array length; null (-1) reads as empty. A count larger than the
    /// bytes left (at least one per item) is refused before any allocation.
    fn count(&mut self) -> Result<usize, HarnessError> {
        let n = self.i32()?;
        if n < 0 {
            return Ok(0);
        }
        let n = n as usize;
        if n > self.0.len() {
            return Err(malformed("array count beyond the frame"));
        }
        Ok(n)
    }

    fn string(&mut self) -> Result<Option<String>, HarnessError> {
        let n = self.i16()?;
        if n < 0 {
            return Ok(None);
        }
        let bytes = self.take(n as usize)?;
        Ok(Some(String::from_utf8_lossy(bytes).into_owned()))
    }

    fn ids(&mut self) -> Result<Vec<i32>, HarnessError> {
        (0..self.count()?).map(|_| self.i32()).collect()
    }
}
