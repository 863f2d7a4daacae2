//! The `weir` command line: one binary for the broker and its tools.

mod cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "weir",
    version,
    about = "A Kafka-compatible streaming log broker"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a broker (embedded defaults: 127.0.0.1:9092, ./weir-data).
    Serve(cmd::serve::Args),
    /// Create, list, describe and delete topics.
    Topics(cmd::topics::Args),
    /// Produce records read from stdin, one per line.
    Produce(cmd::produce::Args),
    /// Print records of a topic.
    Consume(cmd::consume::Args),
    /// Print earliest, latest or by-time offsets per partition.
    Offsets(cmd::offsets::Args),
    /// List, describe, reset offsets of and delete consumer groups.
    Groups(cmd::groups::Args),
    /// Measure produce and consume throughput and latency.
    Perf(cmd::perf::Args),
    /// Print the contents of .log, .index and .timeindex files, like kafka-dump-log.sh.
    DumpLog(cmd::dump_log::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => cmd::serve::run(args),
        Command::Topics(args) => cmd::topics::run(args),
        Command::Produce(args) => cmd::produce::run(args),
        Command::Consume(args) => cmd::consume::run(args),
        Command::Offsets(args) => cmd::offsets::run(args),
        Command::Groups(args) => cmd::groups::run(args),
        Command::Perf(args) => cmd::perf::run(args),
        Command::DumpLog(args) => cmd::dump_log::run(args),
    }
}
