//! Options and helpers shared by the client-side subcommands.

use anyhow::{Context, Result, bail};
use weir_client::Client;
use weir_protocol::records::Compression;

/// `--bootstrap-server`, as in Kafka's tools.
#[derive(clap::Args, Debug, Clone)]
pub struct Bootstrap {
    /// Broker(s) to connect to, host:port[,host:port…].
    #[arg(
        long = "bootstrap-server",
        default_value = "127.0.0.1:9092",
        env = "WEIR_BOOTSTRAP_SERVER",
        global = true
    )]
    pub bootstrap_server: String,
}

impl Bootstrap {
    pub async fn connect(&self) -> Result<Client> {
        Client::connect(&self.bootstrap_server, "weir-cli")
            .await
            .with_context(|| format!("cannot reach a broker at {}", self.bootstrap_server))
    }
}

/// Parses a compression codec name as Kafka's `compression.type`.
pub fn parse_compression(name: &str) -> Result<Compression> {
    Ok(match name {
        "none" => Compression::None,
        "gzip" => Compression::Gzip,
        "snappy" => Compression::Snappy,
        "lz4" => Compression::Lz4,
        "zstd" => Compression::Zstd,
        other => bail!("unknown compression type {other:?} (none, gzip, snappy, lz4, zstd)"),
    })
}

/// Parses `name=value` pairs.
pub fn parse_kv(s: &str) -> Result<(String, String), String> {
    s.split_once('=')
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .ok_or_else(|| format!("expected name=value, got {s:?}"))
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Runs an async command body on a small runtime and maps errors to one
/// line on stderr and exit status 1.
pub fn run_async<F>(f: F) -> std::process::ExitCode
where
    F: std::future::Future<Output = Result<()>>,
{
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start runtime: {e}");
            return std::process::ExitCode::from(1);
        }
    };
    match rt.block_on(f) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::from(1)
        }
    }
}
