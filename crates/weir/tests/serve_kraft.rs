//! `weir serve --config` with Kafka's KRaft settings: a combined-mode
//! server.properties written like Apache Kafka 4's quickstart file runs one
//! node that serves clients on its PLAINTEXT listener, and inconsistent
//! quorum or secured settings are refused at start with the setting named.

use crate::common;

use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};

use common::weir;

const BIN: &str = env!("CARGO_BIN_EXE_weir");

/// A port that was free a moment ago (bound to port 0, then released).
fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").expect("bind port 0");
    l.local_addr().expect("local addr").port()
}

/// A properties file in the shape of Kafka 4's combined-mode quickstart
/// `config/server.properties`, on `client`/`controller` ports, with
/// `changes` (name, value) replacing or adding lines.
fn properties(dir: &Path, client: u16, controller: u16, changes: &[(&str, &str)]) -> String {
    let data = dir.join("kraft-combined-logs");
    let mut settings: Vec<(String, String)> = [
        ("process.roles", "broker,controller".to_string()),
        ("node.id", "1".to_string()),
        (
            "controller.quorum.bootstrap.servers",
            format!("localhost:{controller}"),
        ),
        (
            "listeners",
            format!("PLAINTEXT://:{client},CONTROLLER://:{controller}"),
        ),
        ("inter.broker.listener.name", "PLAINTEXT".to_string()),
        (
            "advertised.listeners",
            format!("PLAINTEXT://localhost:{client},CONTROLLER://localhost:{controller}"),
        ),
        ("controller.listener.names", "CONTROLLER".to_string()),
        (
            "listener.security.protocol.map",
            "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
                .to_string(),
        ),
        ("num.network.threads", "3".to_string()),
        ("num.io.threads", "8".to_string()),
        ("socket.send.buffer.bytes", "102400".to_string()),
        ("socket.receive.buffer.bytes", "102400".to_string()),
        ("socket.request.max.bytes", "104857600".to_string()),
        ("log.dirs", data.display().to_string()),
        ("num.partitions", "1".to_string()),
        ("num.recovery.threads.per.data.dir", "1".to_string()),
        ("offsets.topic.replication.factor", "1".to_string()),
        (
            "share.coordinator.state.topic.replication.factor",
            "1".to_string(),
        ),
        ("share.coordinator.state.topic.min.isr", "1".to_string()),
        ("transaction.state.log.replication.factor", "1".to_string()),
        ("transaction.state.log.min.isr", "1".to_string()),
        ("log.retention.hours", "168".to_string()),
        ("log.segment.bytes", "1073741824".to_string()),
        ("log.retention.check.interval.ms", "300000".to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect();
    for (k, v) in changes {
        settings.retain(|(n, _)| n != k);
        settings.push((k.to_string(), v.to_string()));
    }
    let mut text = String::from("# combined broker and controller, one node\n");
    for (k, v) in settings {
        text.push_str(&format!("{k}={v}\n"));
    }
    let path = dir.join("server.properties");
    std::fs::write(&path, text).expect("write server.properties");
    path.display().to_string()
}

/// `weir serve --config <file>`, with the HTTP listener on a free port.
fn serve(config: &str) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["serve", "--config", config])
        .args(["--set", "http.listeners=127.0.0.1:0"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn kafka_quickstart_combined_mode_file_serves_clients_on_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let (client, controller) = (free_port(), free_port());
    let config = properties(dir.path(), client, controller, &[]);
    let mut child = Killed(serve(&config).stderr(Stdio::null()).spawn().unwrap());
    let lines = BufReader::new(child.0.stdout.take().unwrap()).lines();
    let mut printed = Vec::new();
    for line in lines {
        let Ok(line) = line else { break };
        let done = line.starts_with("weir: metrics") || line.starts_with("weir: metrics and");
        printed.push(line);
        if done {
            break;
        }
    }
    let printed = printed.join("\n");
    assert!(
        printed.contains(&format!("weir: listening on 0.0.0.0:{client}")),
        "{printed}"
    );
    assert!(
        printed.contains(&format!("weir: advertised as localhost:{client}")),
        "{printed}"
    );
    assert!(printed.contains("node id 1"), "{printed}");
    assert!(
        printed.contains(&format!(
            "weir: controller listener CONTROLLER://:{controller} not opened"
        )),
        "{printed}"
    );
    // the CONTROLLER port is not opened: nothing answers there
    assert!(std::net::TcpStream::connect(("127.0.0.1", controller)).is_err());

    let bootstrap = format!("localhost:{client}");
    let b = Some(bootstrap.as_str());
    let c = weir(
        b,
        &["topics", "create", "--topic", "quickstart-events"],
        None,
    );
    assert_eq!(c.code, 0, "{}", c.stderr);
    let p = weir(
        b,
        &["produce", "--topic", "quickstart-events"],
        Some("first event\nsecond event\n"),
    );
    assert_eq!(p.code, 0, "{}", p.stderr);
    let r = weir(
        b,
        &[
            "consume",
            "--topic",
            "quickstart-events",
            "--from-beginning",
            "--max-messages",
            "2",
        ],
        None,
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout, "first event\nsecond event\n");
    assert!(dir.path().join("kraft-combined-logs").is_dir());
}

#[test]
fn inconsistent_quorum_and_secured_kraft_settings_are_refused_at_start() {
    for (changes, words) in [
        (
            vec![(
                "controller.quorum.voters",
                "1@localhost:19094,2@localhost:29093",
            )],
            vec!["listeners", "says node 1 is at localhost:19094"],
        ),
        (
            vec![(
                "controller.quorum.voters",
                "1@localhost:19093,1@localhost:29093",
            )],
            vec!["controller.quorum.voters", "names node 1 twice"],
        ),
        (
            vec![("process.roles", "broker")],
            vec!["controller.quorum.voters", "process.roles=broker"],
        ),
        (
            vec![
                ("process.roles", "broker"),
                ("node.id", "4"),
                ("controller.quorum.voters", "1@localhost:29093"),
            ],
            vec!["listeners", "CONTROLLER", "opens no controller listener"],
        ),
        (
            vec![
                ("process.roles", "controller"),
                ("controller.quorum.voters", "1@localhost:19093"),
            ],
            vec!["listeners", "PLAINTEXT", "serves no clients"],
        ),
        (
            vec![(
                "listeners",
                "PLAINTEXT://:19092,KERBEROS://:19094,CONTROLLER://:19093",
            )],
            vec!["listeners", "no security protocol for listener KERBEROS"],
        ),
        (
            vec![("process.roles", "broker,observer")],
            vec!["process.roles", "unknown role \"observer\""],
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let config = properties(dir.path(), 19092, 19093, &changes);
        let out = serve(&config).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{changes:?}: {stderr}");
        assert!(
            stderr.starts_with("weir serve: invalid configuration: "),
            "{stderr}"
        );
        for w in &words {
            assert!(stderr.contains(w), "{changes:?}: {stderr}");
        }
        // refused before anything is written
        assert!(!dir.path().join("kraft-combined-logs").exists());
    }
}

#[test]
fn a_cluster_member_refuses_a_data_dir_with_partitions_but_no_cluster_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    // A single node's data: a partition directory, no weir-metadata/.
    std::fs::create_dir_all(data.join("orders-0")).unwrap();
    let (c1, c2) = (free_port(), free_port());
    let out = Command::new(BIN)
        .arg("serve")
        .arg("--data-dir")
        .arg(&data)
        .args(["--set", "node.id=1"])
        .args(["--set", "process.roles=broker,controller"])
        .args([
            "--set",
            &format!("controller.quorum.voters=1@127.0.0.1:{c1},2@127.0.0.1:{c2}"),
        ])
        .args([
            "--set",
            &format!("listeners=PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{c1}"),
        ])
        .args(["--set", "controller.listener.names=CONTROLLER"])
        .args(["--set", "http.listeners="])
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: a node that wrongly starts is killed, and the test fails.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut child = Killed(out);
    let status = loop {
        if let Some(status) = child.0.try_wait().unwrap() {
            break Some(status);
        }
        if std::time::Instant::now() >= deadline {
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.0.stderr.take()
        && status.is_some()
    {
        use std::io::Read;
        e.read_to_string(&mut stderr).unwrap();
    }
    assert_eq!(status.and_then(|s| s.code()), Some(1), "{stderr}");
    assert!(
        stderr.contains("holds 1 partition directories (orders-0, ...)"),
        "{stderr}"
    );
    // nothing was touched
    assert!(data.join("orders-0").is_dir());
    assert!(!data.join("weir-metadata").exists());
}
