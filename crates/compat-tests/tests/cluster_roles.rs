//! A cluster of separate roles: one controller-only node
//! (`process.roles=controller`) and two broker-only nodes
//! (`process.roles=broker`), three `weir serve` processes on loopback.
//! The brokers fetch the metadata log from the controller; librdkafka
//! creates an RF=2 topic through a broker, produces and consumes; a broker
//! killed with -9 loses its leaderships and, restarted, reads the image
//! again; a second process with a live broker's `node.id` exits with one
//! line; the controller stops cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use weir_compat_tests::cluster::{ClusterMetadata, FAST_FAILOVER, fetch_metadata};
use weir_compat_tests::{HarnessError, WeirProcess, weir_binary};

use crate::cluster::{
    PARTITIONS, admin, consume_with_rdkafka, create_topic, produce_keyed, rdkafka_controller_id,
};

const TOPIC: &str = "roles";
const RECORDS: usize = 300;
const READY: Duration = Duration::from_secs(60);
const FAILOVER: Duration = Duration::from_secs(30);
const POLL: Duration = Duration::from_millis(25);

/// A `weir serve` with `process.roles=controller`, killed when dropped.
struct ControllerProcess {
    child: Child,
    _data: tempfile::TempDir,
}

impl ControllerProcess {
    /// Starts node 1 as the only voter at `port`, and waits for its
    /// CONTROLLER listener line.
    fn start(port: u16) -> ControllerProcess {
        let data = tempfile::tempdir().unwrap();
        let mut child = Command::new(weir_binary().unwrap())
            .arg("serve")
            .arg("--data-dir")
            .arg(data.path())
            .args(["--set", "node.id=1", "--set", "process.roles=controller"])
            .args([
                "--set",
                &format!("controller.quorum.voters=1@127.0.0.1:{port}"),
            ])
            .args(["--set", &format!("listeners=CONTROLLER://127.0.0.1:{port}")])
            .args(["--set", "controller.listener.names=CONTROLLER"])
            .args(fast_failover_args())
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut process = ControllerProcess { child, _data: data };
        let deadline = Instant::now() + READY;
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(line) if line.starts_with("weir: controller only") => return process,
                Ok(_) => {}
                Err(_) => {
                    let status = process.child.try_wait().unwrap();
                    panic!("the controller-only node did not start (status {status:?})");
                }
            }
        }
    }

    /// SIGTERM, then its exit status within the deadline.
    fn terminate(&mut self) -> ExitStatus {
        signal(self.child.id(), libc::SIGTERM);
        let deadline = Instant::now() + FAILOVER;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the controller did not stop on SIGTERM"
            );
            thread::sleep(POLL);
        }
    }
}

impl Drop for ControllerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[allow(unsafe_code)]
fn signal(pid: u32, signal: libc::c_int) {
    let pid = libc::pid_t::try_from(pid).unwrap();
    // SAFETY: kill(2) takes plain integers; the pid is our own unreaped
    // child.
    unsafe {
        libc::kill(pid, signal);
    }
}

fn fast_failover_args() -> Vec<String> {
    FAST_FAILOVER
        .iter()
        .flat_map(|(k, v)| ["--set".to_string(), format!("{k}={v}")])
        .collect()
}

fn start_broker(id: i32, controller_port: u16) -> Result<WeirProcess, HarnessError> {
    let mut sets = vec![
        format!("node.id={id}"),
        "process.roles=broker".into(),
        format!("controller.quorum.voters=1@127.0.0.1:{controller_port}"),
        "listeners=PLAINTEXT://127.0.0.1:0".into(),
        "controller.listener.names=CONTROLLER".into(),
        "default.replication.factor=2".into(),
    ];
    sets.extend(FAST_FAILOVER.iter().map(|(k, v)| format!("{k}={v}")));
    let args: Vec<&str> = sets.iter().flat_map(|s| ["--set", s.as_str()]).collect();
    WeirProcess::start_with_args(&args)
}

/// Polls `probe` until it returns `Some` or `limit` passes.
fn wait_until<T>(what: &str, limit: Duration, mut probe: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        let last = match probe() {
            Ok(v) => return v,
            Err(e) => e,
        };
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?} waiting for {what}; last: {last}"
        );
        thread::sleep(POLL);
    }
}

fn metadata(broker: &WeirProcess) -> Result<ClusterMetadata, String> {
    fetch_metadata(broker.bootstrap(), Duration::from_secs(5)).map_err(|e| e.to_string())
}

fn brokers_are(m: &ClusterMetadata, ids: &[i32]) -> Result<(), String> {
    let seen: Vec<i32> = m.brokers.keys().copied().collect();
    if seen != ids {
        return Err(format!("brokers {seen:?}"));
    }
    // The controller-only node is no broker: clients are told a live one.
    if !ids.contains(&m.controller_id) {
        return Err(format!("controller id {}", m.controller_id));
    }
    Ok(())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_controller_only_node_and_two_broker_only_nodes_serve_librdkafka() {
    let port = free_port();
    let mut controller = ControllerProcess::start(port);
    let mut b2 = start_broker(2, port).unwrap();
    let mut b3 = start_broker(3, port).unwrap();
    for b in [&b2, &b3] {
        wait_until("both brokers registered", READY, || {
            brokers_are(&metadata(b)?, &[2, 3])
        });
    }
    let bootstrap = format!("{},{}", b2.bootstrap(), b3.bootstrap());
    let controller_id = rdkafka_controller_id(&admin(&bootstrap));
    assert!([2, 3].contains(&controller_id), "{controller_id}");

    // CreateTopics through a broker reaches the controller-only node.
    create_topic(&bootstrap, TOPIC, PARTITIONS, 2).expect("create an RF=2 topic");
    let m = wait_until("every partition led on both brokers", READY, || {
        let m = metadata(&b2)?;
        let ps = m.partitions(TOPIC);
        let led = ps.len() == PARTITIONS as usize
            && ps
                .iter()
                .all(|p| [2, 3].contains(&p.leader) && p.replicas.len() == 2);
        if led && metadata(&b3)?.partitions(TOPIC) == ps {
            Ok(m)
        } else {
            Err(format!("{ps:?}"))
        }
    });
    // Leaders are spread over both brokers.
    assert!(!m.led_by(2).is_empty() && !m.led_by(3).is_empty(), "{m:?}");
    produce_keyed(&bootstrap, TOPIC, RECORDS);
    consume_with_rdkafka(&bootstrap, TOPIC, RECORDS);

    // kill -9 of broker 3: its partitions move to broker 2.
    b3.kill_hard().unwrap();
    wait_until("broker 2 leads every partition", FAILOVER, || {
        let m = metadata(&b2)?;
        let ps = m.partitions(TOPIC);
        (ps.len() == PARTITIONS as usize && ps.iter().all(|p| p.leader == 2))
            .then_some(())
            .ok_or_else(|| format!("{ps:?}"))
    });

    // Restarted, it reads the image again and is a broker once more.
    b3.restart().unwrap();
    wait_until("broker 3 back in its own metadata", READY, || {
        let m = metadata(&b3)?;
        brokers_are(&m, &[2, 3])?;
        (m.partitions(TOPIC).len() == PARTITIONS as usize)
            .then_some(())
            .ok_or_else(|| "the topic is not in its metadata yet".to_string())
    });

    // A second process claiming node 2 while broker 2 lives is refused
    // for good and exits with one error line.
    let mut duplicate = start_broker(2, port).unwrap();
    let status = wait_until("the duplicate node 2 exits", READY, || {
        duplicate
            .exited()
            .ok_or_else(|| "still running".to_string())
    });
    assert!(!status.success(), "{status}");
    let stderr = duplicate.stderr_tail();
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("weir serve: error"))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].contains("node.id"), "{}", errors[0]);
    brokers_are(&metadata(&b2).unwrap(), &[2, 3]).unwrap();

    b2.stop().unwrap();
    b3.stop().unwrap();
    let status = controller.terminate();
    assert!(status.success(), "the controller exited with {status}");
}
