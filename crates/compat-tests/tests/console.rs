//! The web console end to end: a real `weir serve` filled with the `weir`
//! CLI (topics, records, a consumer group with lag), then headless Chromium
//! (Debian's `chromium`, driven by puppeteer-core from
//! `tests/console/package-lock.json`) opens the console and checks that the
//! topic, its partitions with their high watermarks, the segment files and
//! the group's lag appear. Screenshots are kept in
//! `target/test-artifacts/console*.png`.
//!
//! Without chromium (or node, or `npm ci` in tests/console) the test says
//! SKIPPED and passes, unless `CI` is set: then it fails.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use weir_compat_tests::{
    WeirProcess, assert_checks_passed, run_with_timeout, skip_or_fail, tools, weir_binary,
    workspace_root,
};

/// Time limit of one CLI call.
const CLI_TIMEOUT: Duration = Duration::from_secs(60);
/// Time limit of the browser script (it abandons itself after 55 s).
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(90);

const TOPIC: &str = "orders";
/// Records produced per partition of [`TOPIC`].
const PER_PARTITION: [usize; 3] = [200, 120, 0];
const GROUP: &str = "console-group";
/// Records in `events`, and how many the group consumes (and commits).
const EVENTS: usize = 100;
const CONSUMED: usize = 40;

/// `chromium`: env `CHROMIUM`, else `chromium` on `PATH`.
fn chromium() -> Option<PathBuf> {
    match std::env::var_os("CHROMIUM") {
        Some(p) => Some(PathBuf::from(p)).filter(|p| p.is_file()),
        None => tools::find_on_path("chromium"),
    }
}

fn script_dir() -> PathBuf {
    workspace_root().join("tests/console")
}

/// A port that was free a moment ago, for the HTTP listener (the harness
/// only reports the Kafka address, so the test picks the HTTP one).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("bind an ephemeral port")
}

/// Starts weir with its HTTP listener on a port chosen here; retries with
/// another port if that one was taken in between.
fn start_broker() -> (WeirProcess, String) {
    let mut last = String::new();
    for _ in 0..3 {
        let http = format!("127.0.0.1:{}", free_port());
        match WeirProcess::start_with_args(&["--set", &format!("http.listeners={http}")]) {
            Ok(p) => return (p, http),
            Err(e) => last = e.to_string(),
        }
    }
    panic!("weir did not start: {last}");
}

fn weir(broker: &WeirProcess, args: &[&str], stdin: Option<&[u8]>) -> String {
    let bin = weir_binary().unwrap_or_else(|e| panic!("no weir binary: {e}"));
    let mut cmd = Command::new(bin);
    cmd.args(args)
        .args(["--bootstrap-server", broker.bootstrap()]);
    let out = run_with_timeout(&mut cmd, stdin, CLI_TIMEOUT).expect("weir runs");
    assert!(
        out.success(),
        "{}\n--- weir serve stderr (tail) ---\n{}",
        out.describe(&format!("weir {}", args.join(" "))),
        broker.stderr_tail()
    );
    out.stdout
}

fn lines(prefix: &str, n: usize) -> Vec<u8> {
    (0..n)
        .map(|i| format!("{prefix}{i}\n"))
        .collect::<String>()
        .into_bytes()
}

/// Base offsets of the segment files in a partition directory.
fn segment_bases(dir: &Path) -> Vec<i64> {
    let mut bases: Vec<i64> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            name.strip_suffix(".log").and_then(|s| s.parse().ok())
        })
        .collect();
    bases.sort_unstable();
    bases
}

#[test]
fn console_in_headless_chromium() {
    let Some(chromium) = chromium() else {
        skip_or_fail("chromium (apt-get install chromium)");
        return;
    };
    let Some(node) = tools::node() else {
        skip_or_fail("node (Node.js)");
        return;
    };
    let dir = script_dir();
    if !dir
        .join("node_modules/puppeteer-core/package.json")
        .is_file()
    {
        skip_or_fail("puppeteer-core (npm ci in tests/console)");
        return;
    }
    let (broker, http) = start_broker();

    // Small segments so that a partition has several segment files; small
    // batches so that each fits one.
    weir(
        &broker,
        &[
            "topics",
            "create",
            "--topic",
            TOPIC,
            "--partitions",
            "3",
            "--config",
            "segment.bytes=1024",
        ],
        None,
    );
    for (p, n) in PER_PARTITION.iter().enumerate() {
        if *n > 0 {
            let partition = p.to_string();
            let args = [
                "produce",
                "--topic",
                TOPIC,
                "--partition",
                &partition,
                "--batch-size",
                "512",
            ];
            weir(&broker, &args, Some(&lines(&format!("o-{p}-"), *n)));
        }
    }
    weir(
        &broker,
        &["topics", "create", "--topic", "events", "--partitions", "1"],
        None,
    );
    weir(
        &broker,
        &["produce", "--topic", "events"],
        Some(&lines("e-", EVENTS)),
    );
    let consumed = weir(
        &broker,
        &[
            "consume",
            "--topic",
            "events",
            "--group",
            GROUP,
            "--from-beginning",
            "--max-messages",
            &CONSUMED.to_string(),
            "--timeout-ms",
            "20000",
        ],
        None,
    );
    assert_eq!(consumed.lines().count(), CONSUMED, "consumed:\n{consumed}");

    let segments = segment_bases(&broker.data_dir().join(format!("{TOPIC}-0")));
    assert!(
        segments.len() > 1,
        "expected several segments in {TOPIC}-0, found {segments:?}"
    );
    let hw = PER_PARTITION
        .iter()
        .enumerate()
        .map(|(p, n)| format!("{p}={n}"))
        .collect::<Vec<_>>()
        .join(",");
    let seg_arg = format!(
        "0={}",
        segments
            .iter()
            .map(i64::to_string)
            .collect::<Vec<_>>()
            .join(",")
    );
    let records_arg = format!("{TOPIC}:0:5=o-0-5,o-0-6,o-0-7");
    let artifacts = workspace_root().join("target/test-artifacts");
    std::fs::create_dir_all(&artifacts).expect("create target/test-artifacts");
    let shot = artifacts.join("console.png");
    let _ = std::fs::remove_file(&shot);

    let url = format!("http://{http}/");
    let lag = (EVENTS - CONSUMED).to_string();
    let out = run_with_timeout(
        Command::new(&node)
            .current_dir(&dir)
            .arg(dir.join("console_check.js"))
            .args(["--url", &url])
            .arg("--chromium")
            .arg(&chromium)
            .args(["--topic", TOPIC, "--hw", &hw, "--segments", &seg_arg])
            .args(["--group", GROUP, "--lag", &lag, "--records", &records_arg])
            // TOPIC's partitions and the one of "events"; __consumer_offsets
            // is internal
            .args(["--user-partitions", &(PER_PARTITION.len() + 1).to_string()])
            .arg("--screenshot-dir")
            .arg(&artifacts),
        None,
        SCRIPT_TIMEOUT,
    )
    .expect("node runs");
    println!("{}", out.stdout);
    assert_checks_passed(&out, &broker, "console_check.js");

    let png = std::fs::read(&shot).unwrap_or_else(|e| panic!("{}: {e}", shot.display()));
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "{} is not a plausible screenshot ({} bytes)",
        shot.display(),
        png.len()
    );
    println!("screenshot: {}", shot.display());
}
