//! The `weir` command line: one binary for the broker and its tools.

mod cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "weir",
    version,
    about = "A Kafka-compatible streaming log broker",
    after_help = "Examples:\n  weir serve --data-dir ./weir-data\n  weir topics create --topic orders --partitions 3\n  printf 'k1:hello\\nk2:world\\n' | weir produce --topic orders --property parse.key=true --property key.separator=:\n  weir consume --topic orders --from-beginning --max-messages 2 --property print.key=true\n  weir consume --topic orders --group billing --from-beginning --timeout-ms 2000\n  weir groups describe billing\n  weir transactions list\n  weir offsets --topic orders --time earliest\n  weir configs alter --entity-type topics --entity-name orders --add-config retention.ms=3600000\n  weir delete-records --topic orders --partition 0 --offset 100\n  weir acls add --allow-principal User:alice --consumer --topic orders --group billing\n  weir users scram set --user alice --mechanism SCRAM-SHA-512 --password-stdin\n  weir dev cluster --nodes 3\n  weir cluster describe --bootstrap-controller 127.0.0.1:9093\n\nClient commands take --bootstrap-server HOST:PORT (default 127.0.0.1:9092,\nor $WEIR_BOOTSTRAP_SERVER), --connect-timeout-ms (default 5000) and\n--command-config FILE (client properties such as client.id; flags win over it)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a broker (embedded defaults: 127.0.0.1:9092, ./weir-data).
    #[command(
        after_help = "Examples:\n  weir serve\n  weir serve --listen 0.0.0.0:9092 --advertised-listener broker1:9092 --data-dir /var/lib/weir\n  weir serve --config server.properties --set log.retention.ms=3600000"
    )]
    Serve(cmd::serve::Args),
    /// Create, list, describe, alter (add partitions) and delete topics.
    Topics(cmd::topics::Args),
    /// Describe and alter topic and broker configs.
    Configs(cmd::configs::Args),
    /// Produce records read from stdin, one per line.
    Produce(cmd::produce::Args),
    /// Print records of a topic.
    Consume(cmd::consume::Args),
    /// Print earliest, latest or by-time offsets per partition.
    Offsets(cmd::offsets::Args),
    /// List, describe, reset offsets of and delete consumer groups.
    Groups(cmd::groups::Args),
    /// List and describe transactions.
    Transactions(cmd::transactions::Args),
    /// Add, list and remove ACLs.
    Acls(cmd::acls::Args),
    /// Delete records below an offset (moves the log start offset).
    DeleteRecords(cmd::delete_records::Args),
    /// Set, list and delete users' SCRAM credentials.
    Users(cmd::users::Args),
    /// Set, remove and list client quotas (users, clients, ips).
    Quotas(cmd::quotas::Args),
    /// Measure produce and consume throughput and latency.
    #[command(
        after_help = "Examples:\n  weir perf produce --topic perf --num-records 1000000 --record-size 1024\n  weir perf consume --topic perf --messages 1000000"
    )]
    Perf(cmd::perf::Args),
    /// Describe the cluster: brokers, controller and metadata quorum.
    Cluster(cmd::cluster::Args),
    /// Development helpers: a local multi-node cluster in one command.
    Dev(cmd::dev::Args),
    /// Print the contents of .log, .index, .timeindex and .txnindex files, like kafka-dump-log.sh.
    DumpLog(cmd::dump_log::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => cmd::serve::run(args),
        Command::Topics(args) => cmd::topics::run(args),
        Command::Configs(args) => cmd::configs::run(args),
        Command::DeleteRecords(args) => cmd::delete_records::run(args),
        Command::Produce(args) => cmd::produce::run(args),
        Command::Consume(args) => cmd::consume::run(args),
        Command::Offsets(args) => cmd::offsets::run(args),
        Command::Groups(args) => cmd::groups::run(args),
        Command::Transactions(args) => cmd::transactions::run(args),
        Command::Acls(args) => cmd::acls::run(args),
        Command::Users(args) => cmd::users::run(args),
        Command::Quotas(args) => cmd::quotas::run(args),
        Command::Perf(args) => cmd::perf::run(args),
        Command::DumpLog(args) => cmd::dump_log::run(args),
        Command::Cluster(args) => cmd::cluster::run(args),
        Command::Dev(args) => cmd::dev::run(args),
    }
}
