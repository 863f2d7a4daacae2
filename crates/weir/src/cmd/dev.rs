//! `weir dev cluster`: a local cluster of combined nodes (broker and
//! controller each) on 127.0.0.1, as child `weir serve` processes of this
//! one, for trying clustered weir on one machine.
//!
//! Every node gets three ports, picked once and written to
//! `<data-dir>/dev-cluster.properties`, so a cluster started again on the
//! same data dir keeps its bootstrap string and its voters (the metadata
//! log names them): the client listener, the CONTROLLER listener and the
//! metrics/console listener. Node `i` keeps its data in `<data-dir>/node-i`
//! and its stderr (and stdout) in `<data-dir>/node-i.log`.
//!
//! The children run in their own process group, so a Ctrl-C at the
//! terminal reaches this process only; it stops them in order: SIGTERM to
//! each, a bounded wait, then SIGKILL to any still running. A child that
//! exits on its own stops the whole cluster with its log tail printed.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use tokio::signal::unix::{SignalKind, signal};
use tokio::sync::mpsc;

use super::common::one_line;

/// The file in the data dir that fixes the cluster's ports.
const PORTS_FILE: &str = "dev-cluster.properties";
/// Where clusters go without `--data-dir`: a new numbered dir under it.
const DEFAULT_PARENT: &str = "weir-dev-cluster";
/// At most this many nodes (each is a full broker and controller process).
const MAX_NODES: usize = 9;
/// How many lines of a failed node's log are printed.
const LOG_TAIL_LINES: usize = 20;
/// Settings `weir dev cluster` sets itself; `--set` may not change them.
const MANAGED: &[&str] = &[
    "node.id",
    "process.roles",
    "controller.quorum.voters",
    "controller.quorum.bootstrap.servers",
    "listeners",
    "advertised.listeners",
    "controller.listener.names",
    "log.dirs",
    "log.dir",
    "http.listeners",
];

#[derive(clap::Args)]
pub struct Args {
    #[command(subcommand)]
    action: Action,
}

#[derive(clap::Subcommand)]
enum Action {
    /// Start a local cluster of combined nodes on 127.0.0.1 and run it
    /// until Ctrl-C (or SIGTERM).
    #[command(
        after_help = "Examples:\n  weir dev cluster --nodes 3\n  weir dev cluster --nodes 3 --data-dir ./my-cluster --base-port 19092\n  weir dev cluster --set broker.session.timeout.ms=3000\n\nNode i (1-based) listens for clients on 127.0.0.1:PORT, for controllers on PORT+1\nand serves metrics and the console on PORT+2, where PORT is --base-port + 3(i-1)\n(free ports when --base-port is not given). The ports are kept in\n<data-dir>/dev-cluster.properties: starting again on the same --data-dir reuses them."
    )]
    Cluster(ClusterArgs),
}

#[derive(clap::Args)]
struct ClusterArgs {
    /// Number of nodes, each a broker and a controller (1-9).
    #[arg(long, default_value_t = 3)]
    nodes: usize,
    /// Where the nodes keep their data and logs [default: a new numbered
    /// directory under ./weir-dev-cluster].
    #[arg(long = "data-dir", value_name = "DIR")]
    data_dir: Option<PathBuf>,
    /// First port of node 1; each node takes three consecutive ports
    /// (client, controller, metrics/console) [default: free ports].
    #[arg(long = "base-port", value_name = "PORT")]
    base_port: Option<u16>,
    /// A config for every node: --set name=value (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Give up when a node has not started listening after this long.
    #[arg(long = "start-timeout-ms", default_value_t = 60_000)]
    start_timeout_ms: u64,
    /// After SIGTERM, wait this long for the nodes before SIGKILL.
    #[arg(long = "stop-timeout-ms", default_value_t = 30_000)]
    stop_timeout_ms: u64,
}

pub fn run(args: Args) -> ExitCode {
    let Action::Cluster(args) = args.action;
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start runtime: {e}");
            return ExitCode::from(1);
        }
    };
    match rt.block_on(cluster(args)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {}", one_line(&e));
            ExitCode::from(1)
        }
    }
}

/// The three ports of one node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct NodePorts {
    client: u16,
    controller: u16,
    http: u16,
}

/// One running child `weir serve`.
struct Node {
    id: usize,
    ports: NodePorts,
    child: Child,
    log: PathBuf,
    listening: bool,
    exited: bool,
}

/// What a child's stdout reader reports.
enum Event {
    Line {
        node: usize,
        line: String,
    },
    /// Its stdout closed: the process is exiting.
    Closed {
        node: usize,
    },
}

async fn cluster(args: ClusterArgs) -> Result<ExitCode> {
    if args.nodes == 0 || args.nodes > MAX_NODES {
        bail!("--nodes must be 1 to {MAX_NODES}, got {}", args.nodes);
    }
    for kv in &args.set {
        let name = kv.split_once('=').map_or(kv.as_str(), |(k, _)| k).trim();
        if MANAGED.contains(&name) {
            bail!("--set {name} is not allowed: weir dev cluster sets it for each node");
        }
    }
    // Installed before any child starts, so a signal during start-up
    // stops the children too.
    let mut signals = Signals::install()?;
    let data_dir = match &args.data_dir {
        Some(d) => {
            std::fs::create_dir_all(d)
                .with_context(|| format!("cannot create data dir {}", d.display()))?;
            d.clone()
        }
        None => new_numbered_dir(Path::new(DEFAULT_PARENT))?,
    };
    let ports = cluster_ports(&data_dir, args.nodes, args.base_port)?;
    let voters = ports
        .iter()
        .enumerate()
        .map(|(i, p)| format!("{}@127.0.0.1:{}", i + 1, p.controller))
        .collect::<Vec<_>>()
        .join(",");
    let exe = std::env::current_exe().context("cannot find the weir executable")?;
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut nodes = Vec::with_capacity(ports.len());
    for (i, p) in ports.iter().enumerate() {
        match spawn_node(&exe, &data_dir, i + 1, *p, &voters, &args.set, tx.clone()) {
            Ok(node) => nodes.push(node),
            Err(e) => {
                eprintln!("error: {}", one_line(&e));
                stop(&mut nodes, &mut rx, args.stop_timeout_ms).await;
                return Ok(ExitCode::from(1));
            }
        }
    }
    drop(tx);

    let deadline = tokio::time::Instant::now() + Duration::from_millis(args.start_timeout_ms);
    while nodes.iter().any(|n| !n.listening) {
        tokio::select! {
            ev = rx.recv() => match ev {
                Some(ev) => {
                    if let Some(failed) = on_event(&mut nodes, ev) {
                        return Ok(fail(&mut nodes, &mut rx, failed, args.stop_timeout_ms).await);
                    }
                }
                None => bail!("every node's output closed before it listened"),
            },
            name = signals.recv() => {
                eprintln!("weir dev cluster: {name} during start-up, stopping the nodes");
                return Ok(stop(&mut nodes, &mut rx, args.stop_timeout_ms).await);
            }
            _ = tokio::time::sleep_until(deadline) => {
                let waiting = nodes
                    .iter()
                    .filter(|n| !n.listening)
                    .map(|n| n.id.to_string())
                    .collect::<Vec<_>>()
                    .join(",");
                eprintln!(
                    "error: node(s) {waiting} did not start listening within {} ms",
                    args.start_timeout_ms
                );
                for n in nodes.iter().filter(|n| !n.listening) {
                    print_log_tail(n);
                }
                stop(&mut nodes, &mut rx, args.stop_timeout_ms).await;
                return Ok(ExitCode::from(1));
            }
        }
    }

    print_started(&data_dir, &nodes);

    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                Some(ev) => {
                    if let Some(failed) = on_event(&mut nodes, ev) {
                        return Ok(fail(&mut nodes, &mut rx, failed, args.stop_timeout_ms).await);
                    }
                }
                None => bail!("every node's output closed"),
            },
            name = signals.recv() => {
                eprintln!("weir dev cluster: {name}, stopping {} nodes", nodes.len());
                return Ok(stop(&mut nodes, &mut rx, args.stop_timeout_ms).await);
            }
        }
    }
}

/// Applies one event; returns the id of a node that exited on its own.
fn on_event(nodes: &mut [Node], ev: Event) -> Option<usize> {
    match ev {
        Event::Line { node, line } => {
            if line.starts_with("weir: listening on ") {
                nodes[node - 1].listening = true;
            }
            None
        }
        Event::Closed { node } => {
            nodes[node - 1].exited = true;
            Some(node)
        }
    }
}

/// A node exited on its own: says so with its log tail, stops the rest.
async fn fail(
    nodes: &mut [Node],
    rx: &mut mpsc::UnboundedReceiver<Event>,
    failed: usize,
    stop_timeout_ms: u64,
) -> ExitCode {
    let node = &mut nodes[failed - 1];
    let status = node
        .child
        .wait()
        .map_or_else(|e| format!("unknown status ({e})"), |s| s.to_string());
    eprintln!("error: node {failed} exited: {status}");
    print_log_tail(node);
    stop(nodes, rx, stop_timeout_ms).await;
    ExitCode::from(1)
}

/// Stops every running node: SIGTERM, a wait of `stop_timeout_ms` for
/// their output to close, then SIGKILL. 0 when each one exited cleanly.
async fn stop(
    nodes: &mut [Node],
    rx: &mut mpsc::UnboundedReceiver<Event>,
    stop_timeout_ms: u64,
) -> ExitCode {
    for n in nodes.iter().filter(|n| !n.exited) {
        terminate(&n.child);
    }
    let deadline = tokio::time::Instant::now() + Duration::from_millis(stop_timeout_ms);
    while nodes.iter().any(|n| !n.exited) {
        tokio::select! {
            ev = rx.recv() => match ev {
                Some(Event::Closed { node }) => nodes[node - 1].exited = true,
                Some(Event::Line { .. }) => {}
                None => break,
            },
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    let mut clean = true;
    for n in nodes.iter_mut() {
        if !n.exited {
            eprintln!(
                "weir dev cluster: node {} still running after {stop_timeout_ms} ms, killing it",
                n.id
            );
            let _ = n.child.kill();
            clean = false;
        }
        match n.child.wait() {
            Ok(s) if s.success() => {}
            Ok(s) => {
                eprintln!("weir dev cluster: node {} exited: {s}", n.id);
                clean = false;
            }
            Err(e) => {
                eprintln!("weir dev cluster: node {}: {e}", n.id);
                clean = false;
            }
        }
    }
    if clean {
        eprintln!("weir dev cluster: all nodes stopped");
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

/// Sends SIGTERM to `child` with kill(1) (the workspace makes no unsafe
/// signal calls). A failure means it is already gone; its closed output
/// says so, and the deadline in [`stop`] covers anything else.
fn terminate(child: &Child) {
    let _ = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

fn print_started(data_dir: &Path, nodes: &[Node]) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(
        out,
        "weir dev cluster: {} nodes, data in {}",
        nodes.len(),
        data_dir.display()
    );
    for n in nodes {
        let _ = writeln!(
            out,
            "node {}: pid={} client=127.0.0.1:{} controller=127.0.0.1:{} console=http://127.0.0.1:{}/ log={}",
            n.id,
            n.child.id(),
            n.ports.client,
            n.ports.controller,
            n.ports.http,
            n.log.display()
        );
    }
    let join = |f: fn(&NodePorts) -> u16| {
        nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", f(&n.ports)))
            .collect::<Vec<_>>()
            .join(",")
    };
    let bootstrap = join(|p| p.client);
    let controllers = join(|p| p.controller);
    let _ = writeln!(out, "bootstrap: {bootstrap}");
    let _ = writeln!(out, "controllers: {controllers}");
    let _ = writeln!(
        out,
        "try: weir cluster describe --bootstrap-server {bootstrap} --bootstrap-controller {controllers}"
    );
    let _ = writeln!(out, "Ctrl-C stops every node.");
    let _ = out.flush();
}

/// Starts node `id` as a child `weir serve`; a thread forwards its stdout
/// lines (also appended to its log) as events.
fn spawn_node(
    exe: &Path,
    data_dir: &Path,
    id: usize,
    ports: NodePorts,
    voters: &str,
    extra: &[String],
    events: mpsc::UnboundedSender<Event>,
) -> Result<Node> {
    let log = data_dir.join(format!("node-{id}.log"));
    let open_log = || {
        OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .with_context(|| format!("cannot open {}", log.display()))
    };
    let stderr = open_log()?;
    let mut stdout_copy = open_log()?;
    let mut cmd = Command::new(exe);
    cmd.arg("serve")
        .arg("--data-dir")
        .arg(data_dir.join(format!("node-{id}")));
    let managed = [
        format!("node.id={id}"),
        "process.roles=broker,controller".to_string(),
        format!("controller.quorum.voters={voters}"),
        format!(
            "listeners=PLAINTEXT://127.0.0.1:{},CONTROLLER://127.0.0.1:{}",
            ports.client, ports.controller
        ),
        "controller.listener.names=CONTROLLER".to_string(),
        format!("http.listeners=127.0.0.1:{}", ports.http),
    ];
    for kv in managed.iter().chain(extra) {
        cmd.arg("--set").arg(kv);
    }
    let mut child = cmd
        // The log is a file: no colour codes in it.
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr))
        // Its own process group: a terminal's Ctrl-C reaches this process
        // only, which stops the nodes in order.
        .process_group(0)
        .spawn()
        .with_context(|| format!("cannot start node {id} ({})", exe.display()))?;
    let stdout = child.stdout.take().context("child stdout")?;
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let _ = writeln!(stdout_copy, "{line}");
            if events.send(Event::Line { node: id, line }).is_err() {
                return;
            }
        }
        let _ = events.send(Event::Closed { node: id });
    });
    Ok(Node {
        id,
        ports,
        child,
        log,
        listening: false,
        exited: false,
    })
}

/// Prints the last lines of a node's log to stderr.
fn print_log_tail(node: &Node) {
    let text = std::fs::read_to_string(&node.log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
    eprintln!(
        "--- last {} lines of {} ---",
        tail.len(),
        node.log.display()
    );
    for l in tail {
        eprintln!("{l}");
    }
    eprintln!("---");
}

/// A new directory `parent/1`, `parent/2`, … (the first that does not
/// exist yet).
fn new_numbered_dir(parent: &Path) -> Result<PathBuf> {
    std::fs::create_dir_all(parent)
        .with_context(|| format!("cannot create {}", parent.display()))?;
    for n in 1u32.. {
        let dir = parent.join(n.to_string());
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("cannot create {}", dir.display())),
        }
    }
    bail!("no free directory name under {}", parent.display())
}

/// The ports of each node: those saved in `data_dir` when it has them
/// (the cluster was started there before), else new ones, saved.
fn cluster_ports(data_dir: &Path, nodes: usize, base_port: Option<u16>) -> Result<Vec<NodePorts>> {
    let path = data_dir.join(PORTS_FILE);
    match std::fs::read_to_string(&path) {
        Ok(text) => {
            let saved = parse_ports(&text).with_context(|| format!("{}", path.display()))?;
            if saved.len() != nodes {
                bail!(
                    "{} holds a cluster of {} nodes; start it with --nodes {} or use another --data-dir",
                    data_dir.display(),
                    saved.len(),
                    saved.len()
                );
            }
            if let Some(base) = base_port
                && saved[0].client != base
            {
                bail!(
                    "{} holds a cluster on base port {}; drop --base-port or use another --data-dir",
                    data_dir.display(),
                    saved[0].client
                );
            }
            Ok(saved)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let ports = match base_port {
                Some(base) => ports_from_base(base, nodes)?,
                None => free_ports(nodes)?,
            };
            let mut f =
                File::create(&path).with_context(|| format!("cannot create {}", path.display()))?;
            f.write_all(format_ports(&ports).as_bytes())
                .and_then(|()| f.sync_all())
                .with_context(|| format!("cannot write {}", path.display()))?;
            Ok(ports)
        }
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

/// Node `i` (0-based) on `base + 3i`, `+1`, `+2`.
fn ports_from_base(base: u16, nodes: usize) -> Result<Vec<NodePorts>> {
    (0..nodes)
        .map(|i| {
            let at = |k: usize| -> Result<u16> {
                u16::try_from(usize::from(base) + 3 * i + k)
                    .ok()
                    .filter(|p| *p != 0)
                    .with_context(|| format!("--base-port {base} leaves no room for {nodes} nodes"))
            };
            Ok(NodePorts {
                client: at(0)?,
                controller: at(1)?,
                http: at(2)?,
            })
        })
        .collect()
}

/// Three ports per node that were free on 127.0.0.1 a moment ago (all
/// bound at once, so distinct, then released).
fn free_ports(nodes: usize) -> Result<Vec<NodePorts>> {
    let listeners = (0..nodes * 3)
        .map(|_| TcpListener::bind("127.0.0.1:0"))
        .collect::<std::io::Result<Vec<_>>>()
        .context("cannot find free ports on 127.0.0.1")?;
    let ports = listeners
        .iter()
        .map(|l| l.local_addr().map(|a| a.port()))
        .collect::<std::io::Result<Vec<_>>>()?;
    Ok(ports
        .chunks(3)
        .map(|c| NodePorts {
            client: c[0],
            controller: c[1],
            http: c[2],
        })
        .collect())
}

fn format_ports(ports: &[NodePorts]) -> String {
    let mut s = String::from(
        "# weir dev cluster: the ports of each node, kept for restarts on this data dir\n",
    );
    s.push_str(&format!("nodes={}\n", ports.len()));
    for (i, p) in ports.iter().enumerate() {
        let id = i + 1;
        s.push_str(&format!("node.{id}.client.port={}\n", p.client));
        s.push_str(&format!("node.{id}.controller.port={}\n", p.controller));
        s.push_str(&format!("node.{id}.http.port={}\n", p.http));
    }
    s
}

fn parse_ports(text: &str) -> Result<Vec<NodePorts>> {
    let values: BTreeMap<&str, &str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect();
    let get = |key: &str| -> Result<&str> {
        values
            .get(key)
            .copied()
            .with_context(|| format!("{key} missing"))
    };
    let nodes: usize = get("nodes")?.parse().context("nodes is not a number")?;
    if nodes == 0 || nodes > MAX_NODES {
        bail!("nodes={nodes} is out of range");
    }
    (1..=nodes)
        .map(|id| {
            let port = |kind: &str| -> Result<u16> {
                let key = format!("node.{id}.{kind}.port");
                get(&key)?
                    .parse()
                    .with_context(|| format!("{key} is not a port"))
            };
            Ok(NodePorts {
                client: port("client")?,
                controller: port("controller")?,
                http: port("http")?,
            })
        })
        .collect()
}

/// SIGINT, SIGTERM and SIGHUP; [`Signals::recv`] names the first to come.
struct Signals {
    int: tokio::signal::unix::Signal,
    term: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn install() -> Result<Signals> {
        let listen = |kind: SignalKind, name: &str| {
            signal(kind).with_context(|| format!("cannot install the {name} handler"))
        };
        Ok(Signals {
            int: listen(SignalKind::interrupt(), "SIGINT")?,
            term: listen(SignalKind::terminate(), "SIGTERM")?,
            hup: listen(SignalKind::hangup(), "SIGHUP")?,
        })
    }

    async fn recv(&mut self) -> &'static str {
        tokio::select! {
            _ = self.int.recv() => "SIGINT",
            _ = self.term.recv() => "SIGTERM",
            _ = self.hup.recv() => "SIGHUP",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ports_round_trip_through_the_file() {
        let ports = ports_from_base(9092, 3).unwrap();
        assert_eq!(
            ports[1],
            NodePorts {
                client: 9095,
                controller: 9096,
                http: 9097
            }
        );
        assert_eq!(parse_ports(&format_ports(&ports)).unwrap(), ports);
    }

    #[test]
    fn a_base_port_too_high_for_the_nodes_is_refused() {
        assert!(ports_from_base(65530, 3).is_err());
        assert!(ports_from_base(65527, 3).is_ok());
    }

    #[test]
    fn a_ports_file_without_a_node_is_refused() {
        let err = parse_ports(
            "nodes=2\nnode.1.client.port=1\nnode.1.controller.port=2\nnode.1.http.port=3\n",
        )
        .unwrap_err();
        assert!(err.to_string().contains("node.2.client.port"), "{err}");
    }
}
