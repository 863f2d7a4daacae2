//! P8's cluster: several `weir serve` processes on loopback forming one
//! cluster of combined nodes (broker and controller each), all pinned to
//! the broker core.
//!
//! Node `i` (from 1) gets `node.id = i`, a client listener on port 0 and a
//! CONTROLLER listener on a port picked free before the first start (the
//! voters list names it), and no HTTP listener (the default `127.0.0.1:9644`
//! would collide between nodes). These are the settings of
//! `crates/compat-tests/src/cluster.rs`, whose heartbeat and session
//! timeouts are left at weir's defaults here: P8 measures a steady cluster,
//! not failover.

use std::net::TcpListener;
use std::path::Path;

use anyhow::{Context, Result};

use crate::broker::WeirProcess;

/// The running nodes of one cluster; dropping it stops every node.
pub struct WeirCluster {
    pub nodes: Vec<WeirProcess>,
}

impl WeirCluster {
    /// Starts `n` combined nodes under `taskset -c <core>`, node `i` on
    /// `<work>/p8-node-<i>`, and waits for each one's listening line.
    /// The nodes are not yet known to form a quorum; see
    /// [`crate::workloads::wait_for_brokers`].
    pub fn start(weir: &Path, core: usize, work: &Path, n: usize) -> Result<Self> {
        let ports = free_ports(n)?;
        let voters = ports
            .iter()
            .enumerate()
            .map(|(i, p)| format!("{}@127.0.0.1:{p}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        let mut nodes = Vec::with_capacity(n);
        for (i, port) in ports.iter().enumerate() {
            let id = i + 1;
            let sets = node_settings(id, *port, &voters);
            let dir = work.join(format!("p8-node-{id}"));
            std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
            let p = WeirProcess::start(weir, core, &dir, &sets)
                .with_context(|| format!("start cluster node {id}"))?;
            eprintln!("P8: node {id} pid {} listening on {}", p.pid(), p.bootstrap);
            nodes.push(p);
        }
        Ok(WeirCluster { nodes })
    }

    /// Every node's client listener, comma-separated.
    pub fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.bootstrap.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }

    pub fn pids(&self) -> Vec<u32> {
        self.nodes.iter().map(WeirProcess::pid).collect()
    }

    /// "all N nodes running", or which node exited (for error context).
    pub fn describe(&mut self) -> String {
        let n = self.nodes.len();
        self.first_exited().map_or_else(
            || format!("P8 cluster: all {n} nodes running"),
            |e| format!("P8 cluster: {e}"),
        )
    }

    /// The first node that is no longer running, with its log's tail.
    pub fn first_exited(&mut self) -> Option<String> {
        self.nodes.iter_mut().enumerate().find_map(|(i, n)| {
            (!n.alive()).then(|| {
                format!(
                    "node {} exited; log tail:\n{}",
                    i + 1,
                    crate::broker::log_tail(&n.log_path)
                )
            })
        })
    }
}

/// The `--set` values of node `id` whose CONTROLLER listener is `port`.
fn node_settings(id: usize, port: u16, voters: &str) -> Vec<String> {
    vec![
        format!("node.id={id}"),
        "process.roles=broker,controller".into(),
        format!("controller.quorum.voters={voters}"),
        format!("listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{port}"),
        "controller.listener.names=CONTROLLER".into(),
        "http.listeners=".into(),
    ]
}

/// `n` distinct ports that were free on 127.0.0.1 a moment ago (all bound
/// at once, then released).
fn free_ports(n: usize) -> Result<Vec<u16>> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .context("bind a free port")?;
    listeners
        .iter()
        .map(|l| Ok(l.local_addr()?.port()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_name_themselves_and_every_voter() {
        let s = node_settings(2, 4001, "1@127.0.0.1:4000,2@127.0.0.1:4001");
        assert!(s.contains(&"node.id=2".to_string()));
        assert!(s.contains(&"controller.quorum.voters=1@127.0.0.1:4000,2@127.0.0.1:4001".into()));
        assert!(
            s.contains(&"listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:4001".into())
        );
        assert!(s.contains(&"http.listeners=".to_string()));
    }

    #[test]
    fn free_ports_are_distinct() {
        let mut p = free_ports(3).unwrap();
        p.sort_unstable();
        p.dedup();
        assert_eq!(p.len(), 3);
    }
}
