//! The cluster under test: `weir serve` processes of combined nodes, on
//! loopback or one per network namespace, with the handles the nemesis needs
//! (kill -9, SIGTERM restart, SIGSTOP/SIGCONT, link down/up).
//!
//! Every node listens on fixed ports for the whole run (picked free on
//! 127.0.0.1 before the first start, or 9092/9093 on the node's own address
//! in a namespace), so a restarted node is where the clients' bootstrap list
//! says it is.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use super::{Config, JepsenError};
use crate::LISTENING_PREFIX;
use crate::cluster::{ClusterMetadata, fetch_metadata};
use crate::netns::Netns;

/// Wait for a node's listening line.
const START_DEADLINE: Duration = Duration::from_secs(60);
/// A clean shutdown (controlled shutdown is bounded by the session timeout).
const STOP_DEADLINE: Duration = Duration::from_secs(30);
/// One Metadata exchange of a probe; a stopped or cut-off node costs this.
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Client and CONTROLLER ports of a node inside its own namespace.
const NETNS_PORTS: (u16, u16) = (9092, 9093);

/// One `weir serve` process and what the nemesis did to it.
///
/// Invariant: `child` is `Some` while the process runs (stopped or not);
/// `stopped` and `isolated` are only true for a running node.
pub(crate) struct Node {
    pub(crate) id: i32,
    host: String,
    client_port: u16,
    sets: Vec<String>,
    dir: tempfile::TempDir,
    child: Option<Child>,
    starts: u32,
    pub(crate) stopped: bool,
    pub(crate) isolated: bool,
}

impl Node {
    pub(crate) fn bootstrap(&self) -> String {
        format!("{}:{}", self.host, self.client_port)
    }

    pub(crate) fn running(&self) -> bool {
        self.child.is_some()
    }

    /// Running, not stopped and not cut off: worth asking.
    pub(crate) fn reachable(&self) -> bool {
        self.running() && !self.stopped && !self.isolated
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("node.log")
    }

    /// The last `lines` lines of the node's log (all its starts), without
    /// the raft library's and partition hosting chatter, and with runs of
    /// one message (a warning per partition, a retry loop) collapsed.
    pub(crate) fn log_tail(&self, lines: usize) -> String {
        const QUIET: &[&str] = &["openraft::", "hosting partition"];
        let text = std::fs::read_to_string(self.log_path()).unwrap_or_default();
        let mut kept: Vec<String> = Vec::new();
        let mut run: Option<(&str, &str, usize)> = None;
        let flush = |kept: &mut Vec<String>, run: Option<(&str, &str, usize)>| {
            if let Some((_, last, n)) = run {
                if n > 1 {
                    kept.push(format!("[... {} more like the next ...]", n - 1));
                }
                kept.push(last.to_string());
            }
        };
        for line in text
            .lines()
            .filter(|l| !QUIET.iter().any(|q| l.contains(q)))
        {
            // The message without its timestamp and fields.
            let key = line
                .split_once(' ')
                .map_or(line, |(_, rest)| rest.split('=').next().unwrap_or(rest));
            match &mut run {
                Some((k, last, n)) if *k == key => {
                    *last = line;
                    *n += 1;
                }
                _ => {
                    flush(&mut kept, run.take());
                    run = Some((key, line, 1));
                }
            }
        }
        flush(&mut kept, run);
        let start = kept.len().saturating_sub(lines);
        format!(
            "--- node {} log (tail, {}) ---\n{}",
            self.id,
            self.log_path().display(),
            kept[start..].join("\n")
        )
    }

    /// Sends `signal` to the process; false when it is not running.
    #[allow(unsafe_code)]
    pub(crate) fn signal(&mut self, signal: libc::c_int) -> bool {
        let Some(pid) = self
            .child
            .as_ref()
            .and_then(|c| libc::pid_t::try_from(c.id()).ok())
        else {
            return false;
        };
        // SAFETY: kill(2) takes plain integers and touches no memory of ours.
        // The pid is our own unreaped child's (`ip netns exec` execs weir in
        // place), so it names no other process.
        let sent = unsafe { libc::kill(pid, signal) == 0 };
        match signal {
            libc::SIGSTOP => self.stopped |= sent,
            libc::SIGCONT if sent => self.stopped = false,
            _ => {}
        }
        sent
    }

    /// `Some(status)` once when the process has exited on its own (it is
    /// then no longer running).
    pub(crate) fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok().flatten()?;
        self.child = None;
        self.stopped = false;
        Some(status)
    }

    /// kill -9 and reap.
    pub(crate) fn kill9(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stopped = false;
    }

    /// SIGTERM and wait (bounded) for the exit; SIGKILL after the deadline.
    /// Says how it ended.
    pub(crate) fn terminate(&mut self) -> String {
        self.signal(libc::SIGCONT);
        self.signal(libc::SIGTERM);
        let Some(mut child) = self.child.take() else {
            return "not running".into();
        };
        let deadline = Instant::now() + STOP_DEADLINE;
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return "clean exit".into(),
                Ok(Some(status)) => return format!("UNCLEAN EXIT ({status})"),
                Ok(None) if Instant::now() < deadline => thread::sleep(Duration::from_millis(20)),
                Ok(None) | Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return format!("still running after {STOP_DEADLINE:?}: killed");
                }
            }
        }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill9();
    }
}

/// The nodes of one run and the network they sit on.
pub(crate) struct Cluster<'n> {
    bin: PathBuf,
    netns: Option<&'n Netns>,
    pub(crate) nodes: Vec<Node>,
}

impl<'n> Cluster<'n> {
    /// Starts `config.nodes` combined nodes, in `netns`'s namespaces when
    /// given (the caller runs in its hub namespace), else on loopback.
    pub(crate) fn start(
        config: &Config,
        bin: &Path,
        netns: Option<&'n Netns>,
    ) -> Result<Self, JepsenError> {
        let n = config.nodes;
        let (hosts, ports): (Vec<String>, Vec<(u16, u16)>) = match netns {
            Some(net) => (1..=n)
                .map(|i| (net.addr(i).to_string(), NETNS_PORTS))
                .unzip(),
            None => {
                let free = free_ports(2 * n)?;
                (0..n)
                    .map(|i| ("127.0.0.1".to_string(), (free[2 * i], free[2 * i + 1])))
                    .unzip()
            }
        };
        let voters = (0..n)
            .map(|i| format!("{}@{}:{}", i + 1, hosts[i], ports[i].1))
            .collect::<Vec<_>>()
            .join(",");
        let mut cluster = Cluster {
            bin: bin.to_path_buf(),
            netns,
            nodes: Vec::with_capacity(n),
        };
        for (i, (host, (client, controller))) in hosts.into_iter().zip(ports).enumerate() {
            let mut sets = vec![
                format!("node.id={}", i + 1),
                "process.roles=broker,controller".into(),
                format!("controller.quorum.voters={voters}"),
                format!("listeners=PLAINTEXT://{host}:{client},CONTROLLER://{host}:{controller}"),
                "controller.listener.names=CONTROLLER".into(),
                "http.listeners=".into(),
            ];
            sets.extend(config.broker_settings());
            let dir = tempfile::Builder::new()
                .prefix("weir-jepsen-node-")
                .tempdir()
                .map_err(|e| JepsenError::Setup(format!("temp dir: {e}")))?;
            cluster.nodes.push(Node {
                id: i as i32 + 1,
                host,
                client_port: client,
                sets,
                dir,
                child: None,
                starts: 0,
                stopped: false,
                isolated: false,
            });
        }
        for id in 1..=n as i32 {
            cluster.start_node(id)?;
        }
        Ok(cluster)
    }

    pub(crate) fn node(&mut self, id: i32) -> &mut Node {
        &mut self.nodes[(id - 1) as usize]
    }

    /// `"netns"` or `"loopback"`.
    pub(crate) fn network(&self) -> &'static str {
        if self.netns.is_some() {
            "netns"
        } else {
            "loopback"
        }
    }

    pub(crate) fn ids(&self) -> Vec<i32> {
        self.nodes.iter().map(|n| n.id).collect()
    }

    /// Every node's client address (running or not: they keep their ports).
    pub(crate) fn bootstrap(&self) -> String {
        self.nodes
            .iter()
            .map(Node::bootstrap)
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Starts node `id` (again) on its data directory and waits for its
    /// listening line.
    pub(crate) fn start_node(&mut self, id: i32) -> Result<(), JepsenError> {
        let bin = self.bin.clone();
        let netns = self.netns;
        let node = self.node(id);
        node.starts += 1;
        let mut log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(node.log_path())?;
        writeln!(
            log,
            "===== jepsen: start {} of node {id} =====",
            node.starts
        )?;
        let mut command = match netns {
            Some(net) => net.command(id as usize, &bin),
            None => Command::new(&bin),
        };
        command
            .arg("serve")
            .arg("--data-dir")
            .arg(node.dir.path().join("data"));
        for s in &node.sets {
            command.arg("--set").arg(s);
        }
        // WEIR_* variables are broker configuration; the run's own knobs
        // must not reach the processes.
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("WEIR_") {
                command.env_remove(&key);
            }
        }
        if std::env::var_os("RUST_LOG").is_none() {
            // Produce decisions at debug: the kept directories of a run
            // with anomalies show which broker answered what.
            command.env("RUST_LOG", "info,weir_broker::handler::produce=debug");
        }
        command
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(log.try_clone()?));
        let mut child = command.spawn().map_err(|e| JepsenError::Node {
            id,
            reason: format!("spawn {}: {e}", bin.display()),
        })?;
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                // Keep draining after the receiver is gone.
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            match lines.recv_timeout(Duration::from_millis(100)) {
                Ok(line) if line.starts_with(LISTENING_PREFIX) => break,
                Ok(_) | Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => thread::sleep(Duration::from_millis(20)),
            }
            let exited = child.try_wait()?;
            if exited.is_some() || Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                return Err(JepsenError::Node {
                    id,
                    reason: format!(
                        "no listening line ({}):\n{}",
                        exited.map_or("timed out".to_string(), |s| s.to_string()),
                        node.log_tail(30)
                    ),
                });
            }
        }
        node.child = Some(child);
        node.stopped = false;
        Ok(())
    }

    /// Takes node `id`'s link down (namespaces only).
    pub(crate) fn isolate(&mut self, id: i32) -> Result<(), JepsenError> {
        let net = self
            .netns
            .ok_or_else(|| JepsenError::Setup("a network partition needs the namespaces".into()))?;
        net.partition(id as usize)?;
        self.node(id).isolated = true;
        Ok(())
    }

    pub(crate) fn reconnect(&mut self, id: i32) -> Result<(), JepsenError> {
        if let Some(net) = self.netns {
            net.heal(id as usize)?;
        }
        self.node(id).isolated = false;
        Ok(())
    }

    /// The nodes whose process exited on its own since the last call, with
    /// how it ended.
    pub(crate) fn reap(&mut self) -> Vec<(i32, String)> {
        self.nodes
            .iter_mut()
            .filter_map(|n| n.exited().map(|s| (n.id, s.to_string())))
            .collect()
    }

    /// Undoes every fault: links up, stopped processes continued, dead
    /// nodes started again.
    pub(crate) fn heal_all(&mut self) -> Result<(), JepsenError> {
        for id in self.ids() {
            if self.node(id).isolated {
                self.reconnect(id)?;
            }
            self.node(id).signal(libc::SIGCONT);
            if !self.node(id).running() {
                self.start_node(id)?;
            }
        }
        Ok(())
    }

    /// Metadata from the first reachable node that answers.
    pub(crate) fn metadata(&self) -> Option<ClusterMetadata> {
        self.nodes
            .iter()
            .filter(|n| n.reachable())
            .find_map(|n| fetch_metadata(&n.bootstrap(), PROBE_TIMEOUT).ok())
    }

    /// Metadata from every node, `Err` naming the first that did not answer.
    pub(crate) fn metadata_from_all(&self) -> Result<Vec<ClusterMetadata>, String> {
        self.nodes
            .iter()
            .map(|n| {
                fetch_metadata(&n.bootstrap(), PROBE_TIMEOUT)
                    .map_err(|e| format!("Metadata from node {}: {e}", n.id))
            })
            .collect()
    }

    /// Leaves every node's directory (data and `node.log`) behind when the
    /// run ends, for a post-mortem; returns their paths.
    pub(crate) fn keep_dirs(&mut self) -> Vec<PathBuf> {
        self.nodes
            .iter_mut()
            .map(|n| {
                n.dir.disable_cleanup(true);
                n.dir.path().to_path_buf()
            })
            .collect()
    }

    /// The log tails of every node, for a report.
    pub(crate) fn log_tails(&self, lines: usize) -> String {
        self.nodes
            .iter()
            .map(|n| n.log_tail(lines))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Runs the `weir` CLI (as a client on the nodes' network), bounded.
    pub(crate) fn cli(&self, args: &[&str]) -> Result<crate::CommandOutput, JepsenError> {
        let mut command = Command::new(&self.bin);
        command.args(args);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("WEIR_") {
                command.env_remove(&key);
            }
        }
        Ok(crate::run_with_timeout(
            &mut command,
            None,
            Duration::from_secs(30),
        )?)
    }
}

/// `n` distinct ports that were free on 127.0.0.1 a moment ago.
fn free_ports(n: usize) -> Result<Vec<u16>, JepsenError> {
    let listeners = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<Result<Vec<_>, _>>()?)
}

/// Moves the calling thread into network namespace `name` (made by `ip
/// netns add`); threads and processes it starts afterwards are born there,
/// librdkafka's broker threads included.
#[allow(unsafe_code)]
pub(crate) fn enter_namespace(name: &str) -> Result<(), JepsenError> {
    use std::os::fd::AsRawFd;
    let file = File::open(Path::new("/run/netns").join(name))?;
    // SAFETY: setns(2) reads only the descriptor number, which `file` keeps
    // open for the call; it changes the network namespace of this thread
    // alone and touches no memory of ours.
    let rc = unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error().into());
    }
    Ok(())
}
