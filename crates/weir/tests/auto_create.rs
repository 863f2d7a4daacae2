//! Topic auto-creation on produce against a real `weir serve`: the
//! producing commands ask the broker to create a missing topic, as Kafka's
//! producer does, and say so; consumers and admin commands do not; a broker
//! with `auto.create.topics.enable=false` gets a clear error.

use crate::common;

use common::Broker;

/// Topic names `weir topics list` prints.
fn topics(b: &Broker) -> Vec<String> {
    let out = b.run(&["topics", "list"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out.stdout.lines().map(str::to_string).collect()
}

fn created_line(topic: &str, partitions: usize) -> String {
    format!(
        "weir: topic \"{topic}\" did not exist; the broker created it ({partitions} partitions)\n"
    )
}

#[test]
fn produce_to_a_missing_topic_creates_it_and_the_records_are_readable() {
    let b = Broker::start_with(&["--set", "num.partitions=3"]);
    let input: String = (0..30).map(|i| format!("k{i}:v{i}\n")).collect();
    let args = [
        "produce",
        "--topic",
        "fresh",
        "--property",
        "parse.key=true",
        "--property",
        "key.separator=:",
    ];
    let p = b.run_stdin(&args, &input);
    assert_eq!(p.code, 0, "{}", p.stderr);
    assert_eq!(p.stderr, created_line("fresh", 3));

    let d = b.run(&["topics", "describe", "--topic", "fresh"]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    assert!(d.stdout.contains("\tPartitionCount: 3\t"), "{}", d.stdout);
    let c = b.run(&[
        "consume",
        "--topic",
        "fresh",
        "--from-beginning",
        "--max-messages",
        "30",
        "--property",
        "print.key=true",
        "--property",
        "key.separator=:",
    ]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    let mut got: Vec<&str> = c.stdout.lines().collect();
    let mut want: Vec<&str> = input.lines().collect();
    got.sort_unstable();
    want.sort_unstable();
    assert_eq!(got, want);

    // The topic exists now: nothing is said the second time.
    let again = b.run_stdin(&args, "k:v\n");
    assert_eq!(again.code, 0, "{}", again.stderr);
    assert_eq!(again.stderr, "");
}

#[test]
fn perf_tools_get_their_topic_created_too() {
    let b = Broker::start_with(&["--set", "num.partitions=2"]);
    let p = b.run(&[
        "perf",
        "produce",
        "--topic",
        "perf-auto",
        "--num-records",
        "100",
        "--record-size",
        "10",
    ]);
    assert_eq!(p.code, 0, "{}", p.stderr);
    assert_eq!(p.stderr, created_line("perf-auto", 2));
    let c = b.run(&[
        "perf",
        "consume",
        "--topic",
        "perf-auto",
        "--messages",
        "100",
        "--json",
    ]);
    assert_eq!(c.code, 0, "{}", c.stderr);
    assert!(c.stdout.contains("\"records\":100,"), "{}", c.stdout);

    let e = b.run(&[
        "perf",
        "e2e",
        "--topic",
        "e2e-auto",
        "--throughput",
        "1000",
        "--num-records",
        "50",
        "--json",
    ]);
    assert_eq!(e.code, 0, "{}", e.stderr);
    assert_eq!(e.stderr, created_line("e2e-auto", 2));
    assert!(
        e.stdout.contains("\"records_received\":50,"),
        "{}",
        e.stdout
    );
}

#[test]
fn consumers_and_admin_commands_do_not_create_topics() {
    let b = Broker::start();
    for args in [
        vec!["consume", "--topic", "ghost", "--timeout-ms", "100"],
        vec!["perf", "consume", "--topic", "ghost", "--messages", "1"],
        vec!["offsets", "--topic", "ghost"],
        vec!["topics", "describe", "--topic", "ghost"],
    ] {
        let out = b.run(&args);
        assert_eq!(out.code, 1, "{args:?}");
        assert_eq!(out.stderr, "error: unknown topic ghost\n", "{args:?}");
    }
    assert!(!topics(&b).contains(&"ghost".to_string()));
}

#[test]
fn without_broker_auto_creation_producing_is_a_clear_error() {
    let b = Broker::start_with(&["--set", "auto.create.topics.enable=false"]);
    let want = "error: unknown topic nope and the broker does not auto-create topics \
                (auto.create.topics.enable=false); create it with `weir topics create --topic nope`\n";
    let p = b.run_stdin(&["produce", "--topic", "nope"], "x\n");
    assert_eq!(p.code, 1);
    assert_eq!(p.stderr, want);
    for args in [
        vec![
            "perf",
            "produce",
            "--topic",
            "nope",
            "--num-records",
            "1",
            "--record-size",
            "1",
        ],
        vec![
            "perf",
            "e2e",
            "--topic",
            "nope",
            "--throughput",
            "10",
            "--num-records",
            "1",
        ],
    ] {
        let out = b.run(&args);
        assert_eq!(out.code, 1, "{args:?}");
        assert_eq!(out.stderr, want, "{args:?}");
    }
    assert!(!topics(&b).contains(&"nope".to_string()));

    // Once created, producing works and says nothing about creation.
    assert_eq!(b.run(&["topics", "create", "--topic", "nope"]).code, 0);
    let p = b.run_stdin(&["produce", "--topic", "nope"], "x\n");
    assert_eq!(p.code, 0, "{}", p.stderr);
    assert_eq!(p.stderr, "");
}
