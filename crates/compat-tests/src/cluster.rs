//! [`WeirCluster`]: several `weir serve` processes on loopback forming one
//! cluster of combined nodes (broker and controller each), with their own
//! data directories and ports.
//!
//! Each node's CONTROLLER port is fixed for the cluster's life (the voters
//! list names it), picked free on 127.0.0.1 before the first start; client
//! listeners use port 0, so a restarted node may serve clients on another
//! port (read [`WeirCluster::bootstrap`] again).

use std::net::TcpListener;

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
                format!("listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}"),
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
