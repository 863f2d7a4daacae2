//! `--command-config FILE` against a real `weir serve`: properties the
//! commands apply (seen from the broker's side), flags over the file,
//! unknown ones warned about, file errors (security settings: see
//! `security_cli`).

use crate::common;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{Broker, closed_port, weir};

/// Writes `text` to `name` in the broker's temporary directory.
fn properties(b: &Broker, name: &str, text: &str) -> PathBuf {
    let path = b.dir().join(name);
    std::fs::write(&path, text).expect("write properties");
    path
}

fn warning(key: &str) -> String {
    format!("warning: the configuration '{key}' was supplied but isn't a known config (ignored)")
}

#[test]
fn client_id_group_id_and_offset_reset_come_from_the_file() {
    let b = Broker::start();
    assert_eq!(b.run(&["topics", "create", "--topic", "bills"]).code, 0);
    assert_eq!(
        b.run_stdin(&["produce", "--topic", "bills"], "old\n").code,
        0
    );
    let config = properties(
        &b,
        "consumer.properties",
        "# who reads\nclient.id = billing-cli\ngroup.id: billing\nauto.offset.reset=earliest\n",
    );
    let config = config.to_str().unwrap();
    let consumer = b.spawn(&[
        "consume",
        "--topic",
        "bills",
        "--max-messages",
        "2",
        "--command-config",
        config,
    ]);
    // The member the broker knows carries the file's client.id, in the
    // file's group.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let d = b.run(&["groups", "describe", "billing"]);
        let member = d
            .stdout
            .lines()
            .skip_while(|l| !l.starts_with("CONSUMER-ID"))
            .nth(1)
            .map(|l| l.split_whitespace().collect::<Vec<_>>());
        if let Some(cells) = member {
            assert_eq!(cells.get(2), Some(&"billing-cli"), "{}", d.stdout);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no member in group billing:\n{}{}",
            d.stdout,
            d.stderr
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        b.run_stdin(&["produce", "--topic", "bills"], "new\n").code,
        0
    );
    let out = consumer.wait();
    assert_eq!(out.code, 0, "{}", out.stderr);
    // auto.offset.reset=earliest: the record from before the group existed.
    assert_eq!(out.stdout, "old\nnew\n");
    assert_eq!(out.stderr, "");
}

#[test]
fn flags_win_over_the_file() {
    let b = Broker::start();
    // bootstrap.servers of the file is used when no flag names a broker…
    let good = properties(
        &b,
        "good.properties",
        &format!("bootstrap.servers={}\n", b.addr),
    );
    let out = weir(
        None,
        &[
            "topics",
            "create",
            "--topic",
            "t",
            "--command-config",
            good.to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    // …and --bootstrap-server wins over it.
    let dead = format!("127.0.0.1:{}", closed_port());
    let bad = properties(&b, "bad.properties", &format!("bootstrap.servers={dead}\n"));
    let bad = bad.to_str().unwrap();
    let out = weir(None, &["topics", "list", "--command-config", bad], None);
    assert_eq!(out.code, 1);
    assert!(out.stderr.contains(&dead), "{}", out.stderr);
    let out = weir(
        None,
        &[
            "topics",
            "list",
            "--command-config",
            bad,
            "--bootstrap-server",
            &b.addr,
        ],
        None,
    );
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stdout, "t\n");

    // compression.type of the file, then --compression-codec over it.
    let gzip = properties(&b, "gzip.properties", "compression.type=gzip\nacks=all\n");
    let gzip = gzip.to_str().unwrap();
    let p = b.run_stdin(
        &["produce", "--topic", "t", "--command-config", gzip],
        "a\n",
    );
    assert_eq!((p.code, p.stderr.as_str()), (0, ""));
    let p = b.run_stdin(
        &[
            "produce",
            "--topic",
            "t",
            "--command-config",
            gzip,
            "--compression-codec",
            "lz4",
        ],
        "b\n",
    );
    assert_eq!((p.code, p.stderr.as_str()), (0, ""));
    let log = b.data_dir().join("t-0").join("00000000000000000000.log");
    let dump = weir(None, &["dump-log", log.to_str().unwrap()], None);
    assert_eq!(dump.code, 0, "{}", dump.stderr);
    let stored: Vec<&str> = dump
        .stdout
        .lines()
        .filter_map(|l| l.split("compresscodec: ").nth(1))
        .filter_map(|r| r.split_whitespace().next())
        .collect();
    assert_eq!(stored, ["gzip", "lz4"]);

    // A value the command cannot use is an error naming the property.
    let acks = properties(&b, "acks.properties", "acks=some\n");
    let p = b.run_stdin(
        &[
            "produce",
            "--topic",
            "t",
            "--command-config",
            acks.to_str().unwrap(),
        ],
        "c\n",
    );
    assert_eq!(p.code, 1);
    assert_eq!(p.stderr, "error: invalid acks \"some\" (all, -1, 0, 1)\n");
}

#[test]
fn unknown_properties_are_warned_about_and_ignored() {
    let b = Broker::start();
    assert_eq!(b.run(&["topics", "create", "--topic", "t"]).code, 0);
    let path = properties(
        &b,
        "mixed.properties",
        "client.id=tools\nacks=1\nfetch.max.bytes=1048576\nno.such.thing=1\n",
    );
    let path = path.to_str().unwrap();
    // Every command applies client.id; each warns about what it ignores.
    let cases: [(&[&str], &[&str]); 3] = [
        (
            &["topics", "list"],
            &["acks", "fetch.max.bytes", "no.such.thing"],
        ),
        (
            &["produce", "--topic", "t"],
            &["fetch.max.bytes", "no.such.thing"],
        ),
        (
            &["consume", "--topic", "t", "--timeout-ms", "100"],
            &["acks", "no.such.thing"],
        ),
    ];
    for (args, ignored) in cases {
        let mut args = args.to_vec();
        args.extend(["--command-config", path]);
        let out = b.run_stdin(&args, "x\n");
        assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
        let warned: Vec<String> = ignored.iter().map(|k| warning(k)).collect();
        assert_eq!(out.stderr.lines().collect::<Vec<_>>(), warned, "{args:?}");
    }
}

#[test]
fn a_missing_or_malformed_file_is_an_error() {
    let b = Broker::start();
    let missing = b.dir().join("missing.properties");
    let missing = missing.to_str().unwrap();
    for args in [
        vec!["topics", "list", "--command-config", missing],
        vec![
            "perf",
            "consume",
            "--topic",
            "t",
            "--messages",
            "1",
            "--command-config",
            missing,
        ],
    ] {
        let out = b.run(&args);
        assert_eq!(out.code, 1, "{args:?}");
        assert_eq!(
            out.stderr,
            format!(
                "error: cannot read --command-config {missing}: No such file or directory (os error 2)\n"
            ),
            "{args:?}"
        );
    }
    let bad = properties(&b, "bad.properties", "client.id=x\nclient.id=\\u00zz\n");
    let bad = bad.to_str().unwrap();
    let out = b.run(&["topics", "list", "--command-config", bad]);
    assert_eq!(out.code, 1);
    assert_eq!(
        out.stderr,
        format!("error: --command-config {bad}: line 2: malformed \\uXXXX escape\n")
    );
    // Not the broker's command: `serve` and `dump-log` have no such option.
    for args in [
        vec!["serve", "--command-config", bad],
        vec!["dump-log", "--command-config", bad, "x.log"],
    ] {
        assert_eq!(weir(None, &args, None).code, 2, "{args:?}");
    }
}
