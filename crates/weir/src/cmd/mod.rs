//! One module per subcommand.

pub mod common;
pub mod consume;
pub mod dump_log;
pub mod groups;
pub mod offsets;
pub mod perf;
pub mod produce;
pub mod serve;
pub mod topics;
