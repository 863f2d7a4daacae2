//! The `weir` command line: one binary for the broker and its tools.

mod cmd;

use clap::{Parser, Subcommand};

#[derive(Parser)]
#[command(name = "weir", version, about = "A Kafka-compatible streaming log broker")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Start a broker (embedded defaults: 127.0.0.1:9092, ./weir-data).
    Serve(cmd::serve::Args),
    /// Print the contents of .log, .index and .timeindex files, like kafka-dump-log.sh.
    DumpLog(cmd::dump_log::Args),
}

fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Serve(args) => cmd::serve::run(args),
        Command::DumpLog(args) => cmd::dump_log::run(args),
    }
}
