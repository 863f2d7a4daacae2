//! A client quota set with `weir quotas` slows a real producer: librdkafka
//! (rdkafka crate) with `client.id=slow-producer` produces a few megabytes
//! to a `weir serve` process whose `producer_byte_rate` for that client id
//! is 256 KiB/s; the broker reports throttle time (`/metrics`), and the
//! rate the producer achieves stays within a small multiple of the quota.
//! Another client id, without a quota, is not throttled.

use std::time::{Duration, Instant};

use rdkafka::ClientConfig;
use rdkafka::producer::{FutureProducer, FutureRecord};
use weir_compat_tests::{CommandOutput, WeirProcess, run_with_timeout, sum_samples, weir_binary};

const QUOTA: f64 = 256.0 * 1024.0;
const TIMEOUT: Duration = Duration::from_secs(60);

/// Two windows of one second, so a few megabytes go well over the quota.
fn start() -> WeirProcess {
    WeirProcess::start_with_args(&[
        "--set",
        "http.listeners=127.0.0.1:0",
        "--set",
        "quota.window.num=2",
        "--set",
        "quota.window.size.seconds=1",
    ])
    .unwrap_or_else(|e| panic!("weir did not start: {e}"))
}

/// `weir quotas ARGS…` against the broker.
fn quotas(b: &WeirProcess, args: &[&str]) -> CommandOutput {
    let bin = weir_binary().unwrap_or_else(|e| panic!("{e}"));
    let mut cmd = std::process::Command::new(bin);
    cmd.arg("quotas")
        .args(args)
        .args(["--bootstrap-server", b.bootstrap()]);
    let out = run_with_timeout(&mut cmd, None, TIMEOUT).expect("weir quotas runs");
    assert!(out.success(), "{}", out.describe("weir quotas"));
    out
}

fn throttle_ms(b: &WeirProcess) -> f64 {
    let text = b.metrics().expect("metrics");
    sum_samples(
        &text,
        "weir_quota_throttle_time_ms_total",
        &[("type", "produce")],
    )
}

/// Produces `total` bytes in 1 KiB records as `client_id` and waits for
/// every delivery; returns the time it took.
async fn produce(b: &WeirProcess, client_id: &str, total: usize) -> Duration {
    let producer: FutureProducer = ClientConfig::new()
        .set("bootstrap.servers", b.bootstrap())
        .set("client.id", client_id)
        .set("acks", "1")
        .set("linger.ms", "5")
        .set("compression.type", "none")
        .set("message.timeout.ms", "120000")
        .create()
        .expect("producer");
    let value: Vec<u8> = (0..1024u32).map(|i| (i * 7 % 251) as u8).collect();
    let started = Instant::now();
    let mut sends = Vec::with_capacity(total / value.len());
    for _ in 0..total / value.len() {
        let record = FutureRecord::<(), _>::to("quota-topic")
            .payload(&value)
            .partition(0);
        match producer.send_result(record) {
            Ok(delivery) => sends.push(delivery),
            Err((e, _)) => panic!("enqueue: {e}"),
        }
    }
    for delivery in sends {
        delivery
            .await
            .expect("delivery future")
            .unwrap_or_else(|(e, _)| panic!("delivery: {e}"));
    }
    started.elapsed()
}

#[tokio::test(flavor = "multi_thread")]
async fn librdkafka_is_slowed_by_a_producer_byte_rate_set_with_weir_quotas() {
    let b = start();
    quotas(
        &b,
        &[
            "alter",
            "--entity-type",
            "clients",
            "--entity-name",
            "slow-producer",
            "--add-config",
            &format!("producer_byte_rate={}", QUOTA as u64),
        ],
    );
    let described = quotas(&b, &["describe", "--entity-type", "clients"]);
    assert!(
        described
            .stdout
            .contains("client-id 'slow-producer' are producer_byte_rate=262144.0"),
        "{}",
        described.stdout
    );

    // no quota for this one
    produce(&b, "fast-producer", 2 << 20).await;
    assert_eq!(
        throttle_ms(&b),
        0.0,
        "a client without a quota was throttled"
    );

    let total = 3 << 20;
    let elapsed = produce(&b, "slow-producer", total).await;
    let throttled = throttle_ms(&b);
    assert!(
        throttled > 0.0,
        "no throttle time reported\n{}",
        b.stderr_tail()
    );
    let achieved = total as f64 / elapsed.as_secs_f64();
    println!("slow-producer: {achieved:.0} B/s over {elapsed:?}, {throttled} ms of throttle");
    assert!(
        achieved < 3.0 * QUOTA,
        "{achieved:.0} B/s against a quota of {QUOTA} B/s"
    );
}
