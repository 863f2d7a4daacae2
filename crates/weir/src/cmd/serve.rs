//! `weir serve`.

use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> ExitCode {
    eprintln!("weir serve: not implemented yet");
    ExitCode::from(1)
}
