//! A network partition of a three-node weir cluster, one node per Linux
//! network namespace (see `weir_compat_tests::netns` and "Network partitions
//! in tests" in docs/testing.md).
//!
//! The active controller's link is taken down; the two others must elect a
//! new controller, fence the isolated broker and still create topics, while
//! a topic cannot be created through the isolated node. After the link comes
//! back the node must rejoin and catch up. Clients are `weir` CLI processes
//! run with `ip netns exec`: from the hub namespace (a host on the bridge)
//! for the connected nodes, from the node's own namespace for the isolated
//! one.
//!
//! Needs root and iproute2 (`skip_or_fail` otherwise).

use std::fs::File;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::thread;
use std::time::{Duration, Instant};

use weir_compat_tests::netns::Netns;
use weir_compat_tests::{
    CommandOutput, LISTENING_PREFIX, run_with_timeout, skip_or_fail, weir_binary,
};

const NODES: usize = 3;
const CLIENT_PORT: u16 = 9092;
const CONTROLLER_PORT: u16 = 9093;
/// Election (1–2 s) plus fencing (the 3 s session timeout), with room.
const FAILOVER_DEADLINE: Duration = Duration::from_secs(20);
const STARTUP_DEADLINE: Duration = Duration::from_secs(30);
/// One CLI call; the CLI's own connect and request timeouts are shorter.
const CLI_LIMIT: Duration = Duration::from_secs(10);

/// One `weir serve` inside a namespace; killed (SIGKILL) on drop, before
/// the namespaces go (declare it after the [`Netns`]).
struct Node {
    id: usize,
    child: Child,
    stderr_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Node {
    fn start(net: &Netns, id: usize, bin: &Path) -> Node {
        let dir = tempfile::Builder::new()
            .prefix("weir-netns-node-")
            .tempdir()
            .expect("temp dir");
        let voters = (1..=NODES)
            .map(|i| format!("{i}@{}:{CONTROLLER_PORT}", net.addr(i)))
            .collect::<Vec<_>>()
            .join(",");
        let addr = net.addr(id);
        let sets = [
            format!("node.id={id}"),
            "process.roles=broker,controller".into(),
            format!("controller.quorum.voters={voters}"),
            format!(
                "listeners=PLAINTEXT://{addr}:{CLIENT_PORT},CONTROLLER://{addr}:{CONTROLLER_PORT}"
            ),
            "controller.listener.names=CONTROLLER".into(),
            "broker.heartbeat.interval.ms=200".into(),
            "broker.session.timeout.ms=3000".into(),
            "http.listeners=".into(),
        ];
        let data_dir = dir.path().join("data");
        let stderr_path = dir.path().join("stderr.log");
        let mut command = net.command(id, bin);
        command.arg("serve").arg("--data-dir").arg(&data_dir);
        for s in &sets {
            command.arg("--set").arg(s);
        }
        without_weir_env(&mut command);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(File::create(&stderr_path).expect("stderr file"));
        let mut child = command.spawn().expect("spawn ip netns exec weir serve");
        let lines = line_reader(child.stdout.take().expect("piped stdout"));
        let mut node = Node {
            id,
            child,
            stderr_path,
            _dir: dir,
        };
        let deadline = Instant::now() + STARTUP_DEADLINE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) if line.starts_with(LISTENING_PREFIX) => return node,
                Ok(_) => {}
                Err(RecvTimeoutError::Timeout) => panic!(
                    "node {id} did not print its listening line within {STARTUP_DEADLINE:?}\n{}",
                    node.stderr_tail()
                ),
                Err(RecvTimeoutError::Disconnected) => panic!(
                    "node {id} exited before listening ({:?})\n{}",
                    node.child.try_wait(),
                    node.stderr_tail()
                ),
            }
        }
    }

    fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        let start = text.len().saturating_sub(6 * 1024);
        let start = (start..text.len())
            .find(|&i| text.is_char_boundary(i))
            .unwrap_or(text.len());
        format!("--- node {} stderr (tail) ---\n{}", self.id, &text[start..])
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        // `ip netns exec` execs the program: this pid is weir's own.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn line_reader(source: impl std::io::Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        for line in BufReader::new(source).lines() {
            let Ok(line) = line else { break };
            // Keep draining the pipe after the receiver is gone.
            let _ = tx.send(line);
        }
    });
    rx
}

/// `WEIR_*` variables are broker and CLI configuration; the test's own
/// (`WEIR_BIN`, …) must not reach the processes.
fn without_weir_env(command: &mut Command) {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("WEIR_") {
            command.env_remove(&key);
        }
    }
}

/// The cluster as one broker's Metadata answers it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct View {
    controller: Option<i32>,
    brokers: Vec<i32>,
}

/// Runs the `weir` CLI inside a namespace, bounded.
fn cli(mut command: Command, args: &[&str]) -> CommandOutput {
    command.args(args).args([
        "--connect-timeout-ms",
        "1000",
        "--request-timeout-ms",
        "3000",
    ]);
    without_weir_env(&mut command);
    run_with_timeout(&mut command, None, CLI_LIMIT).expect("spawn ip netns exec weir")
}

/// `weir cluster describe` against `server`; `None` when it fails.
fn describe(command: Command, server: &str) -> Option<View> {
    let out = cli(
        command,
        &["cluster", "--bootstrap-server", server, "describe"],
    );
    out.success().then(|| parse_view(&out.stdout))
}

/// Reads `ControllerId:` and the broker table's first column.
fn parse_view(stdout: &str) -> View {
    let mut controller = None;
    let mut brokers = Vec::new();
    for line in stdout.lines() {
        if let Some(id) = line.strip_prefix("ControllerId:") {
            controller = id.trim().parse().ok();
        } else if let Some(id) = line.split_whitespace().next().and_then(|t| t.parse().ok()) {
            brokers.push(id);
        }
    }
    brokers.sort_unstable();
    View {
        controller,
        brokers,
    }
}

fn topics(command: Command, server: &str) -> Option<Vec<String>> {
    let out = cli(command, &["topics", "--bootstrap-server", server, "list"]);
    out.success()
        .then(|| out.stdout.lines().map(|l| l.trim().to_string()).collect())
}

/// Polls `check` until it returns `Some`, or panics after `limit` with the
/// last thing seen and the nodes' logs.
fn wait_for<T>(
    what: &str,
    limit: Duration,
    nodes: &[Node],
    mut check: impl FnMut() -> Result<T, String>,
) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let last = match check() {
            Ok(value) => return value,
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            let logs: Vec<String> = nodes.iter().map(Node::stderr_tail).collect();
            panic!(
                "{what}: not within {limit:?}; last seen: {last}\n{}",
                logs.join("\n")
            );
        }
        thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn the_majority_fences_a_partitioned_controller_and_it_catches_up_after_healing() {
    if !Netns::supported() {
        skip_or_fail("ip netns (root)");
        return;
    }
    let bin = weir_binary()
        .expect("weir binary")
        .canonicalize()
        .expect("absolute path of the weir binary");
    let started = Instant::now();
    let net = Netns::create(NODES, [77, 0]).expect("create namespaces");
    // Declared after `net`: dropped (killed) before the namespaces go.
    let nodes: Vec<Node> = (1..=NODES).map(|id| Node::start(&net, id, &bin)).collect();
    let server = |i: usize| format!("{}:{CLIENT_PORT}", net.addr(i));
    let all: Vec<i32> = (1..=NODES as i32).collect();

    // Every node lists all three brokers and they agree on a controller.
    let old = wait_for("all three brokers listed", STARTUP_DEADLINE, &nodes, || {
        let views: Vec<Option<View>> = (1..=NODES)
            .map(|i| describe(net.hub_command(&bin), &server(i)))
            .collect();
        match views.first() {
            Some(Some(
                v @ View {
                    controller: Some(c),
                    ..
                },
            )) if v.brokers == all && views.iter().all(|w| w.as_ref() == Some(v)) => Ok(*c),
            _ => Err(format!("{views:?}")),
        }
    });
    let old = usize::try_from(old).expect("controller id");
    assert!((1..=NODES).contains(&old), "controller {old}");
    let majority: Vec<usize> = (1..=NODES).filter(|&i| i != old).collect();
    let majority_ids: Vec<i32> = majority.iter().map(|&i| i as i32).collect();

    net.partition(old).expect("take the controller's link down");

    // The two others elect one of themselves and fence the isolated broker.
    let new = wait_for(
        "a new controller on the majority side, the isolated broker fenced",
        FAILOVER_DEADLINE,
        &nodes,
        || {
            let views: Vec<Option<View>> = majority
                .iter()
                .map(|&i| describe(net.hub_command(&bin), &server(i)))
                .collect();
            match views.first() {
                Some(Some(
                    v @ View {
                        controller: Some(c),
                        ..
                    },
                )) if majority_ids.contains(c)
                    && v.brokers == majority_ids
                    && views.iter().all(|w| w.as_ref() == Some(v)) =>
                {
                    Ok(*c)
                }
                _ => Err(format!("{views:?}")),
            }
        },
    );

    // CreateTopics through the majority succeeds.
    let majority_servers = majority
        .iter()
        .map(|&i| server(i))
        .collect::<Vec<_>>()
        .join(",");
    wait_for(
        "CreateTopics through the majority",
        FAILOVER_DEADLINE,
        &nodes,
        || {
            let out = cli(
                net.hub_command(&bin),
                &[
                    "topics",
                    "--bootstrap-server",
                    &majority_servers,
                    "create",
                    "--topic",
                    "during-partition",
                    "--if-not-exists",
                ],
            );
            if out.success() {
                Ok(())
            } else {
                Err(out.describe("weir topics create"))
            }
        },
    );

    // Through the isolated node (a client inside its namespace) it does not.
    let isolated = cli(
        net.command(old, &bin),
        &[
            "topics",
            "--bootstrap-server",
            &server(old),
            "create",
            "--topic",
            "from-isolated",
        ],
    );
    assert!(
        !isolated.success(),
        "a topic was created through the partitioned node {old}\n{}",
        isolated.describe("weir topics create")
    );
    // ... though the node is up and answers there: the refusal is the
    // partition's doing, not a dead node or a broken command.
    let stale = describe(net.command(old, &bin), &server(old));
    assert!(
        stale.is_some(),
        "node {old} does not answer Metadata inside its namespace\n{}",
        nodes[old - 1].stderr_tail()
    );
    let listed = topics(net.hub_command(&bin), &majority_servers).expect("list topics");
    assert!(
        listed.iter().any(|t| t == "during-partition")
            && !listed.iter().any(|t| t == "from-isolated"),
        "topics on the majority side: {listed:?}"
    );

    net.heal(old).expect("bring the link up");

    // The node rejoins: listed again everywhere, one controller (the new
    // one) named by all three, and its metadata has the topic created while
    // it was away.
    wait_for(
        "the healed node rejoins and catches up",
        FAILOVER_DEADLINE,
        &nodes,
        || {
            let views: Vec<Option<View>> = (1..=NODES)
                .map(|i| describe(net.hub_command(&bin), &server(i)))
                .collect();
            let expected = View {
                controller: Some(new),
                brokers: all.clone(),
            };
            if views.iter().any(|v| v.as_ref() != Some(&expected)) {
                return Err(format!("{views:?}, expected {expected:?} from every node"));
            }
            match topics(net.hub_command(&bin), &server(old)) {
                Some(t) if t.iter().any(|t| t == "during-partition") => Ok(()),
                other => Err(format!("topics through node {old}: {other:?}")),
            }
        },
    );

    eprintln!(
        "netns partition: controller {old} isolated, {new} took over; {:.1?} in all",
        started.elapsed()
    );
    drop(nodes);
    drop(net);
}
