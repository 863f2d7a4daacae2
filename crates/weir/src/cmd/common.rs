//! Options and helpers shared by the client-side subcommands.

use std::io::IsTerminal;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use weir_client::{Client, ClientOptions};
use weir_protocol::records::Compression;

/// `--bootstrap-server`, as in Kafka's tools, and the client's timeouts.
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
    /// Give up connecting to a broker after this many milliseconds.
    #[arg(
        long = "connect-timeout-ms",
        default_value_t = 5_000,
        env = "WEIR_CONNECT_TIMEOUT_MS",
        global = true
    )]
    pub connect_timeout_ms: u64,
    /// Give up waiting for a response after this many milliseconds.
    #[arg(long = "request-timeout-ms", default_value_t = 30_000, global = true)]
    pub request_timeout_ms: u64,
}

impl Bootstrap {
    pub async fn connect(&self) -> Result<Client> {
        let options = ClientOptions {
            connect_timeout: Duration::from_millis(self.connect_timeout_ms.max(1)),
            request_timeout: Duration::from_millis(self.request_timeout_ms.max(1)),
        };
        Client::connect_with(&self.bootstrap_server, "weir-cli", options)
            .await
            .with_context(|| format!("cannot reach a broker at {}", self.bootstrap_server))
    }
}

/// A progress bar on stderr when stderr is a terminal, hidden otherwise
/// (so piped and scripted runs print nothing extra). `len` None gives a
/// spinner with a counter.
pub fn progress_bar(len: Option<u64>, unit: &str) -> ProgressBar {
    if !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let (bar, template) = match len {
        Some(n) => (
            ProgressBar::new(n),
            format!("{{bar:40}} {{pos}}/{{len}} {unit} ({{per_sec}}, {{eta}} left)"),
        ),
        None => (
            ProgressBar::new_spinner(),
            format!("{{spinner}} {{pos}} {unit} ({{per_sec}})"),
        ),
    };
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style);
    }
    bar.set_draw_target(ProgressDrawTarget::stderr_with_hz(4));
    bar
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

/// `\t`, `\n`, `\r` and `\\` in separators given on the command line.
pub fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
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
            eprintln!("error: {}", one_line(&e));
            std::process::ExitCode::from(1)
        }
    }
}

/// An error and its causes on one line, leaving out a cause whose text the
/// message already ends with (errors that print their source themselves).
pub fn one_line(e: &anyhow::Error) -> String {
    let mut msg = e.to_string();
    for cause in e.chain().skip(1) {
        let c = cause.to_string();
        if !msg.ends_with(&c) {
            msg.push_str(": ");
            msg.push_str(&c);
        }
    }
    msg.replace('\n', " ")
}
