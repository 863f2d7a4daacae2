//! One module per subcommand.

pub mod dump_log;
pub mod serve;
