//! `weir dump-log`.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> ExitCode {
    eprintln!("weir dump-log: not implemented yet");
    ExitCode::from(1)
}
