//! `weir serve`: start a broker.
//!
//! Configuration precedence (later wins): embedded defaults, `--config`
//! file, `WEIR_*` environment variables, `--set name=value`, then the
//! shorthands `--listen`, `--advertised-listener`, `--data-dir`. A listener
//! shorthand must agree with a `listeners` / `advertised.listeners` value
//! from an earlier source (an unsupported protocol there is still an error).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use weir_broker::config::ConfigSources;

#[derive(clap::Args)]
pub struct Args {
    /// A server.properties-style file with Kafka broker config names.
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
    /// Override one config: --set name=value (repeatable).
    #[arg(long = "set", value_name = "NAME=VALUE")]
    set: Vec<String>,
    /// Shorthand for listeners=PLAINTEXT://HOST:PORT (port 0 picks a free
    /// port); an error when listeners is also set to another address.
    #[arg(long, value_name = "HOST:PORT")]
    listen: Option<String>,
    /// Shorthand for advertised.listeners (host:port announced to clients);
    /// an error when advertised.listeners is also set to another address.
    #[arg(long, value_name = "HOST:PORT")]
    advertised_listener: Option<String>,
    /// Shorthand for log.dirs.
    #[arg(long, value_name = "DIR")]
    data_dir: Option<PathBuf>,
}

fn build_config(args: &Args) -> Result<weir_broker::BrokerConfig, weir_broker::ConfigError> {
    let mut s = ConfigSources::default();
    if let Some(path) = &args.config {
        s.add_file(path)?;
    }
    s.add_env(std::env::vars());
    for kv in &args.set {
        s.add_override(kv)?;
    }
    // a shorthand must agree with a setting from another source
    if let Some(l) = &args.listen {
        s.listener_shorthand("--listen", "listeners", l)?;
    }
    if let Some(l) = &args.advertised_listener {
        s.listener_shorthand("--advertised-listener", "advertised.listeners", l)?;
    }
    if let Some(d) = &args.data_dir {
        s.set("log.dirs", &d.display().to_string());
    }
    s.build()
}

pub fn run(args: Args) -> ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .try_init();
    let config = match build_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("weir serve: invalid configuration: {e}");
            return ExitCode::from(2);
        }
    };
    if config.is_cluster() {
        eprintln!(
            "weir serve: invalid configuration: controller.quorum.voters names other nodes; \
             this build of weir serve runs a single node (its own controller quorum)"
        );
        return ExitCode::from(2);
    }
    for k in &config.unused {
        tracing::warn!("configuration {k} was supplied but is not used by weir");
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("weir serve: cannot start the runtime: {e}");
            return ExitCode::from(1);
        }
    };
    rt.block_on(serve(config))
}

async fn serve(config: weir_broker::BrokerConfig) -> ExitCode {
    let data_dirs: Vec<String> = config
        .log_dirs
        .iter()
        .map(|d| d.display().to_string())
        .collect();
    // Installed before the listening line is printed: a SIGTERM that a
    // supervisor (or a test) sends as soon as it sees that line must stop
    // the broker cleanly, not kill it by the signal's default action.
    let signals = Signals::install();
    let running = match weir_broker::start(config).await {
        Ok(r) => r,
        Err(e) => {
            eprintln!("weir serve: {e}");
            return ExitCode::from(1);
        }
    };
    {
        let (host, port) = running.broker.advertised();
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "weir: listening on {}", running.local_addr);
        let _ = writeln!(out, "weir: advertised as {host}:{port}");
        let _ = writeln!(out, "weir: data dir {}", data_dirs.join(","));
        let _ = writeln!(
            out,
            "weir: cluster id {}, node id {}",
            running.broker.meta.cluster_id, running.broker.config.node_id
        );
        if let Some((name, l)) = &running.broker.config.controller_listener {
            let _ = writeln!(
                out,
                "weir: controller listener {name}://{}:{} not opened: single node, its own controller quorum",
                l.host, l.port
            );
        }
        match running.http_addr() {
            Some(http) => {
                let _ = writeln!(out, "weir: metrics http://{http}/metrics");
                let _ = writeln!(out, "weir: console http://{http}/");
            }
            None => {
                let _ = writeln!(
                    out,
                    "weir: metrics and console off (http.listeners empty or its address taken)"
                );
            }
        }
        let _ = out.flush();
    }
    signals.wait().await;
    tracing::info!("shutting down");
    match running.shutdown().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir serve: shutdown failed: {e}");
            ExitCode::from(1)
        }
    }
}

/// SIGTERM and SIGINT listeners; either one ends [`Signals::wait`].
struct Signals {
    term: Option<tokio::signal::unix::Signal>,
    int: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    fn install() -> Signals {
        use tokio::signal::unix::{SignalKind, signal};
        let listen = |kind: SignalKind, name: &str| match signal(kind) {
            Ok(s) => Some(s),
            Err(e) => {
                tracing::warn!("cannot install the {name} handler: {e}");
                None
            }
        };
        Signals {
            term: listen(SignalKind::terminate(), "SIGTERM"),
            int: listen(SignalKind::interrupt(), "SIGINT"),
        }
    }

    async fn wait(mut self) {
        async fn recv(s: &mut Option<tokio::signal::unix::Signal>) {
            match s {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending().await,
            }
        }
        tokio::select! {
            _ = recv(&mut self.term) => {}
            _ = recv(&mut self.int) => {}
        }
    }
}
