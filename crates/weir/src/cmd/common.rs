//! Options and helpers shared by the client-side subcommands.

use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use weir_client::{Client, ClientError, ClientOptions, TopicInfo};
use weir_protocol::records::Compression;

use super::command_config::CommandConfig;

/// Where client commands connect and how long they wait, when neither a
/// flag nor `--command-config` says.
pub const DEFAULT_BOOTSTRAP_SERVER: &str = "127.0.0.1:9092";
pub const DEFAULT_CLIENT_ID: &str = "weir-cli";
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_millis(5_000);
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_millis(30_000);
/// How long a producer waits for its topic's metadata (Kafka's
/// `max.block.ms` default), e.g. while the broker auto-creates it.
pub const DEFAULT_MAX_BLOCK: Duration = Duration::from_millis(60_000);

/// `--bootstrap-server` and `--command-config`, as in Kafka's tools, and
/// the client's timeouts. A flag (or its environment variable) wins over
/// the `--command-config` file, which wins over the defaults above.
#[derive(clap::Args, Debug, Clone)]
pub struct Bootstrap {
    /// Broker(s) to connect to, host:port[,host:port…] [default:
    /// bootstrap.servers of --command-config, else 127.0.0.1:9092]
    #[arg(
        long = "bootstrap-server",
        env = "WEIR_BOOTSTRAP_SERVER",
        global = true
    )]
    pub bootstrap_server: Option<String>,
    /// Give up connecting to a broker after this many milliseconds [default:
    /// socket.connection.setup.timeout.ms of --command-config, else 5000]
    #[arg(
        long = "connect-timeout-ms",
        env = "WEIR_CONNECT_TIMEOUT_MS",
        global = true
    )]
    pub connect_timeout_ms: Option<u64>,
    /// Give up waiting for a response after this many milliseconds [default:
    /// request.timeout.ms of --command-config, else 30000]
    #[arg(long = "request-timeout-ms", global = true)]
    pub request_timeout_ms: Option<u64>,
    /// Client properties file (Java properties format), like Kafka's
    /// --command-config: client.id, bootstrap.servers, request.timeout.ms,
    /// socket.connection.setup.timeout.ms, security.protocol with ssl.* and
    /// sasl.* (TLS and SASL, see docs/security.md), and the command's own
    /// (see docs/cli.md). Command-line flags win over it.
    #[arg(long = "command-config", value_name = "FILE", global = true)]
    pub command_config: Option<PathBuf>,
}

/// How a command connects, settled from flags, `--command-config` and
/// defaults.
#[derive(Debug, Clone)]
pub struct ClientSettings {
    pub bootstrap: String,
    /// `client.id` of the file; None: the command's own default.
    pub client_id: Option<String>,
    pub options: ClientOptions,
}

impl ClientSettings {
    /// Connects with `client.id`, or [`DEFAULT_CLIENT_ID`].
    pub async fn connect(&self) -> Result<Client> {
        self.connect_as(DEFAULT_CLIENT_ID).await
    }

    /// Connects with `client.id`, or `default_client_id` when none is set.
    pub async fn connect_as(&self, default_client_id: &str) -> Result<Client> {
        let client_id = self.client_id.as_deref().unwrap_or(default_client_id);
        match Client::connect_with(&self.bootstrap, client_id, self.options.clone()).await {
            Ok(client) => Ok(client),
            // The broker was reached; the error names it and says why the
            // connection was refused.
            Err(
                e @ (ClientError::Authentication { .. }
                | ClientError::SaslMechanism { .. }
                | ClientError::Tls { .. }
                | ClientError::TlsExpected { .. }),
            ) => Err(e.into()),
            Err(e) => {
                Err(e).with_context(|| format!("cannot reach a broker at {}", self.bootstrap))
            }
        }
    }
}

impl Bootstrap {
    /// The `--command-config` file's properties (none without the flag).
    pub fn load_config(&self) -> Result<CommandConfig> {
        match &self.command_config {
            Some(path) => CommandConfig::load(path),
            None => Ok(CommandConfig::default()),
        }
    }

    /// Connection settings: flags, then `config`, then the defaults. The
    /// security settings' stores are read here.
    pub fn settings(&self, config: &CommandConfig) -> Result<ClientSettings> {
        let ms = |flag: Option<u64>, key: &str, default: Duration| -> Result<Duration> {
            let from_file = config.millis(key)?;
            let d = flag
                .map(Duration::from_millis)
                .or(from_file)
                .unwrap_or(default);
            Ok(d.max(Duration::from_millis(1)))
        };
        Ok(ClientSettings {
            bootstrap: self
                .bootstrap_server
                .clone()
                .or_else(|| config.get("bootstrap.servers").map(str::to_string))
                .unwrap_or_else(|| DEFAULT_BOOTSTRAP_SERVER.to_string()),
            client_id: config.get("client.id").map(str::to_string),
            options: ClientOptions {
                connect_timeout: ms(
                    self.connect_timeout_ms,
                    "socket.connection.setup.timeout.ms",
                    DEFAULT_CONNECT_TIMEOUT,
                )?,
                request_timeout: ms(
                    self.request_timeout_ms,
                    "request.timeout.ms",
                    DEFAULT_REQUEST_TIMEOUT,
                )?,
                security: config.security()?,
            },
        })
    }

    /// Connects for a command that applies only the common properties
    /// (others in `--command-config` are warned about).
    pub async fn connect(&self) -> Result<Client> {
        let config = self.load_config()?;
        config.warn_unknown(&[]);
        self.settings(&config)?.connect().await
    }
}

/// The metadata of a topic to produce to (see
/// [`Client::producer_topic`]): a missing topic is auto-created by the
/// broker when it allows it, which is said in one line on stderr; when it
/// does not, the error says how to create the topic.
pub async fn producer_topic(
    client: &mut Client,
    topic: &str,
    max_block: Duration,
) -> Result<TopicInfo> {
    match client.producer_topic(topic, max_block).await {
        Ok(t) => {
            if t.auto_created {
                let n = t.info.partitions.len();
                let s = if n == 1 { "" } else { "s" };
                eprintln!(
                    "weir: topic {topic:?} did not exist; the broker created it ({n} partition{s})"
                );
            }
            Ok(t.info)
        }
        Err(e @ ClientError::AutoCreateDisabled(_)) => {
            bail!("{e}; create it with `weir topics create --topic {topic}`")
        }
        Err(e) => Err(e.into()),
    }
}

/// Parses Kafka's `acks`: all or -1, 0, 1.
pub fn parse_acks(v: &str) -> Result<i16> {
    Ok(match v {
        "all" | "-1" => -1,
        "0" => 0,
        "1" => 1,
        other => bail!("invalid acks {other:?} (all, -1, 0, 1)"),
    })
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
