//! `weir consume --group` commits and `weir groups` against a real
//! `weir serve`: lag while a consumer is behind, reset-offsets, delete.

use crate::common;

use common::Broker;

/// One row of the `weir groups describe` partition table, by column name.
fn group_row(text: &str, topic: &str, partition: i32) -> std::collections::HashMap<String, String> {
    let mut lines = text.lines();
    let header: Vec<&str> = lines
        .by_ref()
        .find(|l| l.starts_with("TOPIC ") && l.contains("CURRENT-OFFSET"))
        .unwrap_or_else(|| panic!("no partition table in:\n{text}"))
        .split_whitespace()
        .collect();
    for line in lines {
        let cells: Vec<&str> = line.split_whitespace().collect();
        if cells.len() == header.len() && cells[0] == topic && cells[1] == partition.to_string() {
            return header
                .iter()
                .zip(cells)
                .map(|(h, c)| (h.to_string(), c.to_string()))
                .collect();
        }
    }
    panic!("no row for {topic}-{partition} in:\n{text}");
}

fn consume_group(b: &Broker, topic: &str, group: &str, extra: &[&str]) -> common::Output {
    let mut args = vec!["consume", "--topic", topic, "--group", group];
    args.extend_from_slice(extra);
    let out = b.run(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    out
}

#[test]
fn group_lag_follows_the_committed_offset() {
    let b = Broker::start();
    assert_eq!(b.run(&["topics", "create", "--topic", "lag"]).code, 0);
    let input: String = (0..100).map(|i| format!("m{i}\n")).collect();
    assert_eq!(b.run_stdin(&["produce", "--topic", "lag"], &input).code, 0);

    let first = consume_group(
        &b,
        "lag",
        "g",
        &["--from-beginning", "--max-messages", "40"],
    );
    let want: String = (0..40).map(|i| format!("m{i}\n")).collect();
    assert_eq!(first.stdout, want);

    let d = b.run(&["groups", "describe", "g"]);
    assert_eq!(d.code, 0, "{}", d.stderr);
    let row = group_row(&d.stdout, "lag", 0);
    assert_eq!(row["CURRENT-OFFSET"], "40", "{}", d.stdout);
    assert_eq!(row["LOG-END-OFFSET"], "100");
    assert_eq!(row["LAG"], "60");
    // The member left on exit.
    assert!(
        d.stdout.starts_with("GROUP g  TYPE classic  STATE Empty"),
        "{}",
        d.stdout
    );

    // The group resumes at its committed offset (not at the beginning).
    let rest = consume_group(&b, "lag", "g", &["--from-beginning", "--timeout-ms", "500"]);
    let want: String = (40..100).map(|i| format!("m{i}\n")).collect();
    assert_eq!(rest.stdout, want);
    let d = b.run(&["groups", "describe", "g"]);
    let row = group_row(&d.stdout, "lag", 0);
    assert_eq!(row["CURRENT-OFFSET"], "100", "{}", d.stdout);
    assert_eq!(row["LOG-END-OFFSET"], "100");
    assert_eq!(row["LAG"], "0");

    // Commits live in the internal topic, which --exclude-internal hides.
    let all = b.run(&["topics", "list"]);
    assert!(
        all.stdout.lines().any(|l| l == "__consumer_offsets"),
        "{}",
        all.stdout
    );
    let user = b.run(&["topics", "list", "--exclude-internal"]);
    assert_eq!(user.stdout, "lag\n");
}

#[test]
fn a_group_member_reads_and_commits_every_partition() {
    let b = Broker::start();
    assert_eq!(
        b.run(&["topics", "create", "--topic", "multi", "--partitions", "3"])
            .code,
        0
    );
    for p in 0..3 {
        let input: String = (0..10).map(|i| format!("p{p}-{i}\n")).collect();
        let out = b.run_stdin(
            &["produce", "--topic", "multi", "--partition", &p.to_string()],
            &input,
        );
        assert_eq!(out.code, 0, "{}", out.stderr);
    }
    let out = consume_group(
        &b,
        "multi",
        "mg",
        &["--from-beginning", "--timeout-ms", "500"],
    );
    let mut got: Vec<&str> = out.stdout.lines().collect();
    got.sort();
    let mut want: Vec<String> = (0..3)
        .flat_map(|p| (0..10).map(move |i| format!("p{p}-{i}")))
        .collect();
    want.sort();
    assert_eq!(got, want);
    let d = b.run(&["groups", "describe", "mg"]);
    for p in 0..3 {
        let row = group_row(&d.stdout, "multi", p);
        assert_eq!(
            (row["CURRENT-OFFSET"].as_str(), row["LAG"].as_str()),
            ("10", "0"),
            "{}",
            d.stdout
        );
    }
    let list = b.run(&["groups", "list"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    assert!(
        list.stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["mg", "consumer", "Empty"]),
        "{}",
        list.stdout
    );
}

#[test]
fn reset_offsets_dry_run_then_execute_then_delete() {
    let b = Broker::start();
    assert_eq!(b.run(&["topics", "create", "--topic", "rs"]).code, 0);
    let input: String = (0..20).map(|i| format!("v{i}\n")).collect();
    assert_eq!(b.run_stdin(&["produce", "--topic", "rs"], &input).code, 0);
    consume_group(
        &b,
        "rs",
        "rg",
        &["--from-beginning", "--max-messages", "15"],
    );

    let table = |out: &str| -> Vec<Vec<String>> {
        out.lines()
            .map(|l| l.split_whitespace().map(str::to_string).collect())
            .collect()
    };
    let dry = b.run(&[
        "groups",
        "reset-offsets",
        "rg",
        "--topic",
        "rs",
        "--to-offset",
        "5",
        "--dry-run",
    ]);
    assert_eq!(dry.code, 0, "{}", dry.stderr);
    assert_eq!(
        table(&dry.stdout),
        [["TOPIC", "PARTITION", "NEW-OFFSET"], ["rs", "0", "5"]]
    );
    // A dry run commits nothing.
    let d = b.run(&["groups", "describe", "rg"]);
    assert_eq!(group_row(&d.stdout, "rs", 0)["CURRENT-OFFSET"], "15");

    let exec = b.run(&[
        "groups",
        "reset-offsets",
        "rg",
        "--topic",
        "rs",
        "--shift-by",
        "-10",
        "--execute",
    ]);
    assert_eq!(exec.code, 0, "{}", exec.stderr);
    assert_eq!(
        table(&exec.stdout),
        [["TOPIC", "PARTITION", "NEW-OFFSET"], ["rs", "0", "5"]]
    );
    let d = b.run(&["groups", "describe", "rg"]);
    let row = group_row(&d.stdout, "rs", 0);
    assert_eq!(
        (row["CURRENT-OFFSET"].as_str(), row["LAG"].as_str()),
        ("5", "15")
    );
    // The group then reads from offset 5.
    let out = consume_group(&b, "rs", "rg", &["--max-messages", "1"]);
    assert_eq!(out.stdout, "v5\n");

    // Out-of-range targets are clamped to the log, like Kafka.
    let exec = b.run(&[
        "groups",
        "reset-offsets",
        "rg",
        "--topic",
        "rs",
        "--to-offset",
        "500",
        "--execute",
    ]);
    assert_eq!(table(&exec.stdout)[1], ["rs", "0", "20"]);
    let exec = b.run(&[
        "groups",
        "reset-offsets",
        "rg",
        "--topic",
        "rs",
        "--to-earliest",
        "--execute",
    ]);
    assert_eq!(table(&exec.stdout)[1], ["rs", "0", "0"]);

    let del = b.run(&["groups", "delete", "rg"]);
    assert_eq!(del.code, 0, "{}", del.stderr);
    assert_eq!(del.stdout, "Deleted group rg\n");
    let gone = b.run(&["groups", "describe", "rg"]);
    assert_eq!(gone.code, 1);
    assert_eq!(gone.stderr, "error: consumer group rg does not exist\n");
}
