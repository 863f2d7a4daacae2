//! The `weir` command line against a real `weir serve`: each subcommand's
//! output and exit status, including the error cases.

use crate::common;

use common::{Broker, closed_port, now_ms, weir};

#[test]
fn help_has_examples_everywhere() {
    let commands: &[&[&str]] = &[
        &[],
        &["serve"],
        &["topics"],
        &["topics", "create"],
        &["topics", "list"],
        &["topics", "describe"],
        &["topics", "alter"],
        &["topics", "delete"],
        &["configs"],
        &["configs", "describe"],
        &["configs", "alter"],
        &["produce"],
        &["consume"],
        &["offsets"],
        &["groups"],
        &["groups", "list"],
        &["groups", "describe"],
        &["groups", "reset-offsets"],
        &["groups", "delete"],
        &["delete-records"],
        &["perf"],
        &["perf", "produce"],
        &["perf", "consume"],
        &["dump-log"],
    ];
    for c in commands {
        let mut args = c.to_vec();
        args.push("--help");
        let out = weir(None, &args, None);
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        assert!(
            out.stdout.contains("Example"),
            "{args:?} has no examples:\n{}",
            out.stdout
        );
    }
}

#[test]
fn topics_create_list_describe_alter_delete() {
    let b = Broker::start();
    let out = b.run(&[
        "topics",
        "create",
        "--topic",
        "orders",
        "--partitions",
        "2",
        "--config",
        "retention.ms=86400000",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "Created topic orders.\n");

    // Creating it again fails, unless --if-not-exists.
    let again = b.run(&["topics", "create", "--topic", "orders"]);
    assert_eq!(again.code, 1);
    assert!(
        again.stderr.contains("TOPIC_ALREADY_EXISTS"),
        "{}",
        again.stderr
    );
    let quiet = b.run(&["topics", "create", "--topic", "orders", "--if-not-exists"]);
    assert_eq!(quiet.code, 0, "{}", quiet.stderr);

    let list = b.run(&["topics", "list"]);
    assert_eq!(list.code, 0);
    assert!(
        list.stdout.lines().any(|l| l == "orders"),
        "{}",
        list.stdout
    );

    let d = b.run(&["topics", "describe", "--topic", "orders"]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let lines: Vec<&str> = d.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", d.stdout);
    assert!(
        lines[0].starts_with("Topic: orders\tTopicId: "),
        "{}",
        lines[0]
    );
    assert!(
        lines[0]
            .ends_with("\tPartitionCount: 2\tReplicationFactor: 1\tConfigs: retention.ms=86400000"),
        "{}",
        lines[0]
    );
    for (i, line) in lines[1..].iter().enumerate() {
        let f = fields(line);
        assert_eq!(f["Partition"], i.to_string());
        assert_eq!(f["Leader"], "1");
        assert_eq!(f["LogStartOffset"], "0");
        assert_eq!(f["HighWatermark"], "0");
        assert_eq!(f["LogEndOffset"], "0");
        assert_eq!(f["Size"], "0");
        // weir reports its segment count (DescribeLogDirs extension)
        assert_eq!(f["Segments"], "1");
    }

    // Records move the high watermark and the size of partition 1 only.
    let p = b.run_stdin(
        &["produce", "--topic", "orders", "--partition", "1"],
        "a\nb\nc\n",
    );
    assert_eq!(p.code, 0, "{}", p.stderr);
    let d = b.run(&["topics", "describe", "--topic", "orders"]);
    let lines: Vec<&str> = d.stdout.lines().collect();
    let p0 = fields(lines[1]);
    let p1 = fields(lines[2]);
    assert_eq!((p0["HighWatermark"], p0["Size"]), ("0", "0"));
    assert_eq!(p1["HighWatermark"], "3");
    assert_eq!(p1["LogEndOffset"], "3");
    let size: u64 = p1["Size"].parse().unwrap();
    assert!(size > 3, "size {size}");

    let alter = b.run(&["topics", "alter", "--topic", "orders", "--partitions", "4"]);
    assert_eq!(alter.code, 0, "{}", alter.stderr);
    let d = b.run(&["topics", "describe", "--topic", "orders"]);
    assert!(d.stdout.contains("\tPartitionCount: 4\t"), "{}", d.stdout);
    assert_eq!(d.stdout.lines().count(), 5);
    // Partitions cannot be removed.
    let shrink = b.run(&["topics", "alter", "--topic", "orders", "--partitions", "2"]);
    assert_eq!(shrink.code, 1);
    assert_one_error_line(&shrink.stderr);

    let del = b.run(&["topics", "delete", "--topic", "orders"]);
    assert_eq!(del.code, 0, "{}", del.stderr);
    assert_eq!(del.stdout, "Deleted topic orders.\n");
    let list = b.run(&["topics", "list"]);
    assert!(
        !list.stdout.lines().any(|l| l == "orders"),
        "{}",
        list.stdout
    );
    let gone = b.run(&["topics", "describe", "--topic", "orders"]);
    assert_eq!(gone.code, 1);
    assert_eq!(gone.stderr, "error: unknown topic orders\n");
}

#[test]
fn produce_keys_and_headers_then_consume_with_print_properties() {
    let b = Broker::start();
    assert_eq!(b.run(&["topics", "create", "--topic", "kh"]).code, 0);
    let before = now_ms();
    let p = b.run_stdin(
        &[
            "produce",
            "--topic",
            "kh",
            "--property",
            "parse.key=true",
            "--property",
            "key.separator=:",
            "--property",
            "parse.headers=true",
        ],
        "h1:a,h2:b\tk1:v1\nh3:c\tk2:v2\n\tk3:v3\n",
    );
    assert_eq!(p.code, 0, "{}", p.stderr);
    // stderr is not a terminal here: no progress bar, nothing at all.
    assert_eq!(p.stderr, "");
    let after = now_ms();

    let c = b.run(&[
        "consume",
        "--topic",
        "kh",
        "--from-beginning",
        "--max-messages",
        "3",
        "--property",
        "print.key=true",
        "--property",
        "print.offset=true",
        "--property",
        "print.partition=true",
        "--property",
        "print.headers=true",
        "--property",
        "print.timestamp=true",
    ]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert_eq!(c.stderr, "");
    let lines: Vec<&str> = c.stdout.lines().collect();
    let expected_rest = [
        "Partition:0\tOffset:0\th1:a,h2:b\tk1\tv1",
        "Partition:0\tOffset:1\th3:c\tk2\tv2",
        "Partition:0\tOffset:2\tNO_HEADERS\tk3\tv3",
    ];
    assert_eq!(lines.len(), 3, "{}", c.stdout);
    for (line, want) in lines.iter().zip(expected_rest) {
        let (ts, rest) = line.split_once('\t').unwrap();
        let ts: i64 = ts
            .strip_prefix("CreateTime:")
            .unwrap_or_else(|| panic!("{line}"))
            .parse()
            .unwrap();
        assert!(
            (before..=after).contains(&ts),
            "{ts} not in {before}..={after}"
        );
        assert_eq!(rest, want);
    }

    // Other separators and only some fields.
    let c = b.run(&[
        "consume",
        "--topic",
        "kh",
        "--partition",
        "0",
        "--offset",
        "1",
        "--max-messages",
        "2",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=|",
    ]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert_eq!(c.stdout, "k2|v2\nk3|v3\n");

    // A keyed line without the separator is refused.
    let bad = b.run_stdin(
        &["produce", "--topic", "kh", "--property", "parse.key=true"],
        "no separator here\n",
    );
    assert_eq!(bad.code, 1);
    assert_one_error_line(&bad.stderr);
}

#[test]
fn produce_with_each_compression_codec() {
    let b = Broker::start();
    assert_eq!(b.run(&["topics", "create", "--topic", "zip"]).code, 0);
    let codecs = ["none", "gzip", "snappy", "lz4", "zstd"];
    let mut expected = String::new();
    for codec in codecs {
        let input: String = (0..20).map(|i| format!("{codec}-{i}\n")).collect();
        let p = b.run_stdin(
            &["produce", "--topic", "zip", "--compression-codec", codec],
            &input,
        );
        assert_eq!(p.code, 0, "{codec}: {}", p.stderr);
        expected.push_str(&input);
    }
    let c = b.run(&[
        "consume",
        "--topic",
        "zip",
        "--from-beginning",
        "--max-messages",
        "100",
    ]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert_eq!(c.stdout, expected);
    // The batches are stored with the codec they were produced with.
    let log = b.data_dir().join("zip-0").join("00000000000000000000.log");
    let dump = weir(None, &["dump-log", log.to_str().unwrap()], None);
    assert_eq!(dump.code, 0, "{}", dump.stderr);
    let stored: Vec<&str> = dump
        .stdout
        .lines()
        .filter_map(|l| l.split("compresscodec: ").nth(1))
        .filter_map(|r| r.split_whitespace().next())
        .collect();
    assert_eq!(stored, codecs);

    let bad = b.run_stdin(
        &["produce", "--topic", "zip", "--compression-codec", "brotli"],
        "x\n",
    );
    assert_eq!(bad.code, 1);
    assert_one_error_line(&bad.stderr);
}

#[test]
fn consume_stops_on_timeout_and_reads_from_the_end_by_default() {
    let b = Broker::start();
    assert_eq!(b.run(&["topics", "create", "--topic", "tail"]).code, 0);
    assert_eq!(
        b.run_stdin(&["produce", "--topic", "tail"], "old\n").code,
        0
    );
    // Without --from-beginning only new records are read: none here.
    let c = b.run(&["consume", "--topic", "tail", "--timeout-ms", "300"]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert_eq!(c.stdout, "");
    let c = b.run(&[
        "consume",
        "--topic",
        "tail",
        "--offset",
        "earliest",
        "--timeout-ms",
        "300",
    ]);
    assert_eq!(c.stdout, "old\n");
}

#[test]
fn offsets_earliest_latest_and_by_time() {
    let b = Broker::start();
    assert_eq!(
        b.run(&["topics", "create", "--topic", "off", "--partitions", "2"])
            .code,
        0
    );
    let first: String = (0..5).map(|i| format!("a{i}\n")).collect();
    assert_eq!(
        b.run_stdin(&["produce", "--topic", "off", "--partition", "0"], &first)
            .code,
        0
    );
    // Every record of the second run is stamped at or after `mark`, every
    // record of the first strictly before it.
    std::thread::sleep(std::time::Duration::from_millis(20));
    let mark = now_ms();
    std::thread::sleep(std::time::Duration::from_millis(5));
    let second: String = (0..3).map(|i| format!("b{i}\n")).collect();
    assert_eq!(
        b.run_stdin(&["produce", "--topic", "off", "--partition", "0"], &second)
            .code,
        0
    );

    let latest = b.run(&["offsets", "--topic", "off"]);
    assert_eq!(latest.code, 0, "{}", latest.stderr);
    assert_eq!(latest.stdout, "off:0:8\noff:1:0\n");
    let earliest = b.run(&["offsets", "--topic", "off", "--time", "earliest"]);
    assert_eq!(earliest.stdout, "off:0:0\noff:1:0\n");
    let by_time = b.run(&[
        "offsets",
        "--topic",
        "off",
        "--partitions",
        "0",
        "--time",
        &mark.to_string(),
    ]);
    assert_eq!(by_time.code, 0, "{}", by_time.stderr);
    assert_eq!(by_time.stdout, "off:0:5\n");
    let future = b.run(&[
        "offsets",
        "--topic",
        "off",
        "--partitions",
        "0",
        "--time",
        &(now_ms() + 3_600_000).to_string(),
    ]);
    assert_eq!(future.stdout, "off:0:-1\n");

    let bad = b.run(&["offsets", "--topic", "off", "--time", "yesterday"]);
    assert_eq!(bad.code, 1);
    assert_one_error_line(&bad.stderr);
}

#[test]
fn configs_describe_alter_round_trip() {
    let b = Broker::start();
    assert_eq!(b.run(&["topics", "create", "--topic", "cfg"]).code, 0);
    let all = |b: &Broker| {
        let out = b.run(&[
            "configs",
            "describe",
            "--entity-type",
            "topics",
            "--entity-name",
            "cfg",
            "--all",
        ]);
        assert_eq!(out.code, 0, "{}", out.stderr);
        out.stdout
    };
    let entry = |text: &str, name: &str| -> String {
        text.lines()
            .map(str::trim)
            .find(|l| l.starts_with(&format!("{name}=")))
            .map(|l| l.split(" sensitive=").next().unwrap_or(l).to_string())
            .unwrap_or_default()
    };
    let before = all(&b);
    assert!(
        before.starts_with("All configs for topic cfg are:\n"),
        "{before}"
    );
    assert_eq!(
        entry(&before, "retention.ms"),
        "retention.ms=604800000 source=DEFAULT_CONFIG"
    );

    let alter = b.run(&[
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cfg",
        "--add-config",
        "retention.ms=1234,cleanup.policy=[compact,delete]",
    ]);
    assert_eq!(alter.code, 0, "{}", alter.stderr);
    assert_eq!(alter.stdout, "Completed updating config for topic cfg.\n");
    let after = all(&b);
    assert_eq!(
        entry(&after, "retention.ms"),
        "retention.ms=1234 source=DYNAMIC_TOPIC_CONFIG"
    );
    assert_eq!(
        entry(&after, "cleanup.policy"),
        "cleanup.policy=compact,delete source=DYNAMIC_TOPIC_CONFIG"
    );
    // Without --all only the overrides are listed.
    let overrides = b.run(&[
        "configs",
        "describe",
        "--entity-type",
        "topics",
        "--entity-name",
        "cfg",
    ]);
    let names: Vec<&str> = overrides
        .stdout
        .lines()
        .skip(1)
        .filter_map(|l| l.trim().split('=').next())
        .collect();
    assert_eq!(names, ["cleanup.policy", "retention.ms"]);
    // topics describe shows the overrides too.
    let d = b.run(&["topics", "describe", "--topic", "cfg"]);
    assert!(
        d.stdout
            .contains("Configs: cleanup.policy=compact,delete,retention.ms=1234\n"),
        "{}",
        d.stdout
    );

    let del = b.run(&[
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cfg",
        "--delete-config",
        "retention.ms",
    ]);
    assert_eq!(del.code, 0, "{}", del.stderr);
    let restored = all(&b);
    assert_eq!(
        entry(&restored, "retention.ms"),
        "retention.ms=604800000 source=DEFAULT_CONFIG"
    );
    assert_eq!(
        entry(&restored, "cleanup.policy"),
        "cleanup.policy=compact,delete source=DYNAMIC_TOPIC_CONFIG"
    );

    // Errors: unknown config name, unknown topic, read-only broker configs.
    let unknown = b.run(&[
        "configs",
        "alter",
        "--entity-type",
        "topics",
        "--entity-name",
        "cfg",
        "--add-config",
        "no.such.config=1",
    ]);
    assert_eq!(unknown.code, 1);
    assert!(
        unknown.stderr.contains("INVALID_CONFIG"),
        "{}",
        unknown.stderr
    );
    assert_one_error_line(&unknown.stderr);
    let missing = b.run(&[
        "configs",
        "describe",
        "--entity-type",
        "topics",
        "--entity-name",
        "nope",
    ]);
    assert_eq!(missing.code, 1);
    assert_eq!(missing.stderr, "error: unknown topic nope\n");

    let broker = b.run(&[
        "configs",
        "describe",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
    ]);
    assert_eq!(broker.code, 0, "{}", broker.stderr);
    assert!(
        broker.stdout.contains(
            "  group.initial.rebalance.delay.ms=0 source=STATIC_BROKER_CONFIG sensitive=false"
        ),
        "{}",
        broker.stdout
    );
    let unnamed = b.run(&["configs", "describe", "--entity-type", "brokers"]);
    assert_eq!(unnamed.code, 0, "{}", unnamed.stderr);
    assert!(
        unnamed
            .stdout
            .starts_with("Non-default configs for broker 1 are:\n"),
        "{}",
        unnamed.stdout
    );
    // a read-only broker config (dynamic ones: tests/dynamic_configs.rs)
    let static_alter = b.run(&[
        "configs",
        "alter",
        "--entity-type",
        "brokers",
        "--entity-name",
        "1",
        "--add-config",
        "node.id=2",
    ]);
    assert_eq!(static_alter.code, 1);
    assert_one_error_line(&static_alter.stderr);
}

/// `.log` files in a partition directory: the segments on disk.
fn log_files(partition_dir: &std::path::Path) -> usize {
    std::fs::read_dir(partition_dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(".log")
        })
        .count()
}

#[test]
fn topics_describe_counts_the_segment_files() {
    let b = Broker::start();
    let create = b.run(&[
        "topics",
        "create",
        "--topic",
        "segs",
        "--partitions",
        "2",
        "--config",
        "segment.bytes=200",
    ]);
    assert_eq!(create.code, 0, "{}", create.stderr);
    // one produce run per record: one batch each, larger than half a
    // segment, so each batch rolls a new segment
    let value = "v".repeat(100);
    for _ in 0..4 {
        let p = b.run_stdin(
            &["produce", "--topic", "segs", "--partition", "0"],
            &format!("{value}\n"),
        );
        assert_eq!(p.code, 0, "{}", p.stderr);
    }
    let d = b.run(&["topics", "describe", "--topic", "segs"]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let lines: Vec<&str> = d.stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{}", d.stdout);
    let mut counts = Vec::new();
    for line in &lines[1..] {
        let f = fields(line);
        let partition = f["Partition"];
        let segments: usize = f["Segments"].parse().unwrap();
        let on_disk = log_files(&b.data_dir().join(format!("segs-{partition}")));
        assert_eq!(segments, on_disk, "partition {partition}: {line}");
        counts.push(segments);
    }
    assert!(counts[0] >= 4, "{counts:?}");
    assert_eq!(counts[1], 1);
}

#[test]
fn delete_records_moves_the_log_start() {
    let b = Broker::start();
    assert_eq!(b.run(&["topics", "create", "--topic", "dr"]).code, 0);
    let input: String = (0..10).map(|i| format!("r{i}\n")).collect();
    assert_eq!(b.run_stdin(&["produce", "--topic", "dr"], &input).code, 0);

    let out = b.run(&[
        "delete-records",
        "--topic",
        "dr",
        "--partition",
        "0",
        "--offset",
        "4",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "Records delete operation completed:\npartition: dr-0\tlow_watermark: 4\n"
    );
    let earliest = b.run(&["offsets", "--topic", "dr", "--time", "earliest"]);
    assert_eq!(earliest.stdout, "dr:0:4\n");
    let c = b.run(&[
        "consume",
        "--topic",
        "dr",
        "--from-beginning",
        "--max-messages",
        "1",
        "--property",
        "print.offset=true",
    ]);
    assert_eq!(c.stdout, "Offset:4\tr4\n");

    // Past the high watermark: refused.
    let past = b.run(&[
        "delete-records",
        "--topic",
        "dr",
        "--partition",
        "0",
        "--offset",
        "11",
    ]);
    assert_eq!(past.code, 1);
    assert!(
        past.stderr.contains("OFFSET_OUT_OF_RANGE"),
        "{}",
        past.stderr
    );

    // The JSON file form; -1 deletes up to the high watermark.
    let file = b.dir().join("offsets.json");
    std::fs::write(
        &file,
        r#"{"partitions":[{"topic":"dr","partition":0,"offset":-1}],"version":1}"#,
    )
    .unwrap();
    let out = b.run(&[
        "delete-records",
        "--offset-json-file",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(
        out.stdout,
        "Records delete operation completed:\npartition: dr-0\tlow_watermark: 10\n"
    );
    let earliest = b.run(&["offsets", "--topic", "dr", "--time", "earliest"]);
    assert_eq!(earliest.stdout, "dr:0:10\n");
}

#[test]
fn errors_are_one_line_with_a_nonzero_status() {
    let b = Broker::start();
    // Unreachable broker: a port nobody listens on.
    let port = closed_port();
    let addr = format!("127.0.0.1:{port}");
    for args in [
        vec!["topics", "list"],
        vec!["consume", "--topic", "x", "--timeout-ms", "100"],
        vec!["groups", "list"],
        vec!["configs", "describe", "--entity-type", "brokers"],
    ] {
        let mut a = args.clone();
        a.extend(["--bootstrap-server", &addr]);
        let out = weir(None, &a, None);
        assert_eq!(out.code, 1, "{a:?}");
        assert_one_error_line(&out.stderr);
        assert!(
            out.stderr
                .starts_with(&format!("error: cannot reach a broker at {addr}: ")),
            "{}",
            out.stderr
        );
        assert_eq!(out.stdout, "");
    }

    // A listener that never answers: the connect timeout bounds the wait.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap().to_string();
    let out = weir(
        None,
        &[
            "topics",
            "list",
            "--bootstrap-server",
            &silent_addr,
            "--connect-timeout-ms",
            "300",
        ],
        None,
    );
    assert_eq!(out.code, 1);
    assert_one_error_line(&out.stderr);
    assert!(out.stderr.contains("timed out"), "{}", out.stderr);
    drop(silent);

    // Unknown topic, for every command that names one.
    for args in [
        vec!["consume", "--topic", "nope", "--timeout-ms", "100"],
        vec!["offsets", "--topic", "nope"],
        vec!["topics", "describe", "--topic", "nope"],
        vec!["topics", "alter", "--topic", "nope", "--partitions", "3"],
        vec!["topics", "delete", "--topic", "nope"],
        vec![
            "delete-records",
            "--topic",
            "nope",
            "--partition",
            "0",
            "--offset",
            "1",
        ],
    ] {
        let out = b.run(&args);
        assert_eq!(out.code, 1, "{args:?}");
        assert_eq!(out.stderr, "error: unknown topic nope\n", "{args:?}");
    }
    // (`weir produce` gets a missing topic auto-created: tests/auto_create.rs.)

    // Bad arguments: clap's usage errors exit with 2, bad values with 1.
    for args in [
        vec!["topics", "create"],
        vec!["topics", "bogus"],
        vec!["consume"],
        vec!["configs", "describe", "--entity-type", "users"],
        vec!["delete-records", "--topic", "t"],
        vec![
            "groups",
            "reset-offsets",
            "g",
            "--topic",
            "t",
            "--to-earliest",
        ],
        vec![
            "consume",
            "--topic",
            "t",
            "--group",
            "g",
            "--partition",
            "0",
        ],
    ] {
        let out = b.run(&args);
        assert_eq!(out.code, 2, "{args:?}: {}", out.stderr);
        assert!(out.stderr.starts_with("error: "), "{}", out.stderr);
    }
    assert_eq!(b.run(&["topics", "create", "--topic", "t"]).code, 0);
    for args in [
        vec!["consume", "--topic", "t", "--property", "print.key=maybe"],
        vec!["consume", "--topic", "t", "--property", "bogus=1"],
        vec!["consume", "--topic", "t", "--partition", "7"],
        vec![
            "consume",
            "--topic",
            "t",
            "--offset",
            "x",
            "--partition",
            "0",
        ],
        vec![
            "configs",
            "alter",
            "--entity-type",
            "topics",
            "--entity-name",
            "t",
        ],
        vec!["groups", "describe", "no-such-group"],
    ] {
        let out = b.run(&args);
        assert_eq!(out.code, 1, "{args:?}: {}", out.stderr);
        assert_one_error_line(&out.stderr);
    }
}

/// `Key: value` fields of a tab-separated describe line.
fn fields(line: &str) -> std::collections::HashMap<&str, &str> {
    line.split('\t')
        .filter_map(|f| f.split_once(": "))
        .collect()
}

/// Exactly one line, an `error: …` message, no panic or debug output.
fn assert_one_error_line(stderr: &str) {
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.ends_with('\n'));
    for bad in ["panicked", "RUST_BACKTRACE", "Os {", "kind:"] {
        assert!(!stderr.contains(bad), "{stderr}");
    }
}
