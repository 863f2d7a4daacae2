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

mod cluster;
mod security;

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
    if config.is_cluster() && !config.is_broker() {
        return serve_controller(config, signals).await;
    }
    let mut member = None;
    let started = if config.is_cluster() {
        match start_member(config).await {
            Ok((running, m)) => {
                member = Some(m);
                Ok(running)
            }
            Err(e) => Err(e),
        }
    } else {
        weir_broker::start(config).await.map_err(|e| e.to_string())
    };
    let running = match started {
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
        match (&running.broker.config.controller_listener, &member) {
            (Some((name, _)), Some(m)) => {
                let _ = writeln!(
                    out,
                    "weir: controller listener {name}://{}, quorum {}",
                    m.controller_addr
                        .map_or_else(String::new, |a| a.to_string()),
                    m.voters_text()
                );
            }
            (None, Some(m)) => {
                let _ = writeln!(
                    out,
                    "weir: broker only (process.roles=broker), metadata from the quorum {}",
                    m.voters_text()
                );
            }
            (Some((name, l)), None) => {
                let _ = writeln!(
                    out,
                    "weir: controller listener {name}://{}:{} not opened: single node, its own controller quorum",
                    l.host, l.port
                );
            }
            _ => {}
        }
        match running.http_addr() {
            Some(http) => {
                let scheme = if running.broker.config.http_security.tls.is_some() {
                    "https"
                } else {
                    "http"
                };
                let _ = writeln!(out, "weir: metrics {scheme}://{http}/metrics");
                let _ = writeln!(out, "weir: console {scheme}://{http}/");
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
    // A cluster member the controller refused for good (another cluster's
    // voters, or its node.id held by a live process) stops with that line.
    let refused = member.as_ref().map(Member::refused);
    let mut refusal = None;
    match refused {
        Some(refused) => tokio::select! {
            _ = signals.wait() => {}
            reason = refused => refusal = Some(reason),
        },
        None => signals.wait().await,
    }
    if let Some(reason) = &refusal {
        eprintln!("weir serve: error: {reason}");
    }
    tracing::info!("shutting down");
    let member_stopped = match member {
        Some(m) => m.shutdown().await,
        None => Ok(()),
    };
    if let Err(e) = member_stopped {
        eprintln!("weir serve: stopping the cluster member failed: {e}");
    }
    match running.shutdown().await {
        Ok(()) if refusal.is_some() => ExitCode::from(1),
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

/// This process's part of a cluster: its control plane and the tasks that
/// keep the broker in line with the metadata image.
struct Member {
    /// The metadata quorum node of a combined node.
    node: Option<weir_cluster::ClusterNode>,
    /// A broker-only node's image, fetched from the quorum, and its
    /// registration.
    observer: Option<(
        weir_cluster::MetadataObserver,
        weir_cluster::BrokerLifecycle,
    )>,
    controller_addr: Option<std::net::SocketAddr>,
    voters: std::collections::BTreeMap<u64, String>,
    stop: tokio::sync::watch::Sender<bool>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// The broker side, which gives up its leaderships on shutdown.
    broker: std::sync::Arc<weir_broker::Broker>,
}

impl Member {
    fn voters_text(&self) -> String {
        voters_text(&self.voters)
    }

    /// Resolves with the reason once the controller refused this broker
    /// for good; never otherwise.
    fn refused(&self) -> std::pin::Pin<Box<dyn std::future::Future<Output = String> + Send>> {
        match (&self.node, &self.observer) {
            (Some(node), _) => Box::pin(node.refused()),
            (None, Some((_, lifecycle))) => Box::pin(lifecycle.refused()),
            (None, None) => Box::pin(std::future::pending()),
        }
    }

    /// Controlled shutdown (leadership moves away first, and the broker
    /// keeps following the image meanwhile, so it stops leading what moved
    /// and answers what waits there), then the broker gives up whatever it
    /// still leads, then the control plane stops; the broker itself is
    /// stopped by the caller afterwards.
    async fn shutdown(mut self) -> Result<(), String> {
        if let Some(node) = self.node.as_mut() {
            node.controlled_shutdown().await;
        }
        // A broker-only node's image stays current until the tasks stop.
        let observer = match self.observer.take() {
            Some((observer, lifecycle)) => {
                lifecycle.shutdown().await;
                Some(observer)
            }
            None => None,
        };
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
        // Without the metadata the broker cannot learn that a leadership
        // moved: acks=all produces waiting on it would be held to their
        // timeout, leaving their producers unsure whether they were written.
        let resigned = self.broker.resign_leaderships();
        tracing::info!(resigned, "gave up the remaining partition leaderships");
        drop(observer);
        match self.node {
            Some(node) => node.stop().await.map_err(|e| e.to_string()),
            None => Ok(()),
        }
    }
}

/// The metadata settings every cluster node reads.
struct QuorumSettings {
    voters: std::collections::BTreeMap<u64, String>,
    metadata_dir: std::path::PathBuf,
    session_timeout_ms: u64,
    heartbeat_interval_ms: u64,
}

impl QuorumSettings {
    fn of(config: &weir_broker::BrokerConfig) -> Result<QuorumSettings, String> {
        let voters = config
            .quorum_voters
            .iter()
            .map(|(id, addr)| (*id as u64, addr.clone()))
            .collect();
        let Some(first_dir) = config.log_dirs.first() else {
            return Err("log.dirs is empty".into());
        };
        // Not `<topic>-<n>`: the log manager leaves it alone.
        let metadata_dir = first_dir.join("weir-metadata");
        if !metadata_dir.exists() {
            refuse_single_node_data(&config.log_dirs)?;
        }
        Ok(QuorumSettings {
            voters,
            metadata_dir,
            session_timeout_ms: setting(
                config,
                "broker.session.timeout.ms",
                weir_metadata::controller::DEFAULT_SESSION_TIMEOUT_MS,
            ),
            heartbeat_interval_ms: setting(
                config,
                "broker.heartbeat.interval.ms",
                weir_cluster::lifecycle::DEFAULT_HEARTBEAT_INTERVAL.as_millis() as u64,
            ),
        })
    }

    fn voters_text(&self) -> String {
        voters_text(&self.voters)
    }
}

fn voters_text(voters: &std::collections::BTreeMap<u64, String>) -> String {
    voters
        .iter()
        .map(|(id, addr)| format!("{id}@{addr}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A positive integer setting. Every name read has its default in the
/// broker's config table; `fallback`, the consumer's own default, is only
/// for a name it lacks.
fn setting(config: &weir_broker::BrokerConfig, name: &str, fallback: u64) -> u64 {
    config
        .integer(name)
        .map_or(fallback, |v| u64::try_from(v.max(1)).unwrap_or(fallback))
}

/// Starts this node's part of the metadata quorum: the CONTROLLER listener,
/// raft and the controller (no broker lifecycle yet).
async fn start_quorum_node(
    config: &weir_broker::BrokerConfig,
    quorum: &QuorumSettings,
) -> Result<(weir_cluster::ClusterNode, std::net::SocketAddr), String> {
    use std::time::Duration;
    use weir_cluster::cluster_node::ClusterNodeConfig;

    let Some((_, controller_listener)) = config.controller_listener.clone() else {
        return Err("a controller needs a CONTROLLER listener".into());
    };
    let bind = controller_listener.bind_addr()?;
    let listener = tokio::net::TcpListener::bind(bind)
        .await
        .map_err(|e| format!("cannot listen on {bind} (CONTROLLER): {e}"))?;
    let controller_addr = listener.local_addr().map_err(|e| e.to_string())?;
    let mut raft = weir_raft::RaftOptions::new(
        config.node_id as u64,
        quorum.metadata_dir.clone(),
        quorum.voters.clone(),
    );
    // Kafka's controller.quorum.election.timeout.ms: a follower that hears
    // nothing from the leader for a random time between it and twice it
    // starts an election.
    let election_ms = setting(
        config,
        "controller.quorum.election.timeout.ms",
        raft.election_timeout_min_ms,
    );
    raft.election_timeout_min_ms = election_ms;
    raft.election_timeout_max_ms = election_ms * 2;
    raft.heartbeat_interval_ms = (election_ms / 10).max(1);
    let mut cfg = ClusterNodeConfig::new(raft);
    cfg.controller.controller.session_timeout_ms = quorum.session_timeout_ms;
    cfg.controller.controller.default_partitions = config.num_partitions;
    cfg.controller.controller.default_replication_factor = config.default_replication_factor;
    cfg.controller.seed = u64::from(config.node_id.unsigned_abs());
    cfg.cluster_id = config.cluster_id();
    cfg.auto_leader_rebalance_enable = config
        .value("auto.leader.rebalance.enable")
        .is_none_or(|v| v.eq_ignore_ascii_case("true"));
    cfg.leader_imbalance_check_interval = Duration::from_secs(setting(
        config,
        "leader.imbalance.check.interval.seconds",
        cfg.leader_imbalance_check_interval.as_secs(),
    ));
    let node = weir_cluster::ClusterNode::start(cfg, listener)
        .await
        .map_err(|e| format!("cannot start the metadata quorum: {e}"))?;
    Ok((node, controller_addr))
}

/// `weir serve` with `process.roles=controller`: the CONTROLLER listener
/// and the metadata quorum, no broker, until SIGTERM or SIGINT.
async fn serve_controller(config: weir_broker::BrokerConfig, signals: Signals) -> ExitCode {
    let started = match QuorumSettings::of(&config) {
        Ok(quorum) => start_quorum_node(&config, &quorum)
            .await
            .map(|(node, addr)| (node, addr, quorum)),
        Err(e) => Err(e),
    };
    let (node, addr, quorum) = match started {
        Ok(s) => s,
        Err(e) => {
            eprintln!("weir serve: {e}");
            return ExitCode::from(1);
        }
    };
    {
        let name = config
            .controller_listener
            .as_ref()
            .map_or("CONTROLLER", |(n, _)| n.as_str());
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "weir: controller listener {name}://{addr}, quorum {}",
            quorum.voters_text()
        );
        let _ = writeln!(out, "weir: data dir {}", quorum.metadata_dir.display());
        let _ = writeln!(
            out,
            "weir: cluster id {}, node id {}",
            config.cluster_id().unwrap_or_default(),
            config.node_id
        );
        let _ = writeln!(
            out,
            "weir: controller only (process.roles=controller): no client listener, metrics or console"
        );
        let _ = out.flush();
    }
    signals.wait().await;
    tracing::info!("shutting down");
    match node.shutdown().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("weir serve: stopping the metadata quorum failed: {e}");
            ExitCode::from(1)
        }
    }
}

/// The client listeners a cluster member registers, as Kafka's brokers do:
/// each by name and security protocol at its advertised address (its
/// `advertised.listeners` entry, else the address `bound` gives it), so the
/// other brokers send a client to the listener of the name it came in on.
fn registered_listeners(
    config: &weir_broker::BrokerConfig,
    bound: &[(String, std::net::SocketAddr)],
) -> Vec<weir_metadata::image::Endpoint> {
    config
        .listeners
        .iter()
        .filter_map(|l| {
            let (_, addr) = bound.iter().find(|(name, _)| *name == l.name)?;
            let info = weir_broker::server::listener_info(l, *addr);
            Some(weir_metadata::image::Endpoint {
                name: info.name,
                host: info.advertised_host,
                port: info.advertised_port,
                security_protocol: l.protocol.id(),
            })
        })
        .collect()
}

/// Starts a broker of a cluster: on a combined node the CONTROLLER listener
/// with the metadata quorum, on a broker-only node a fetch of the metadata
/// log from the quorum; then the broker answering from the metadata image,
/// then its registration and heartbeats (once its client listener's
/// address is known).
async fn start_member(
    config: weir_broker::BrokerConfig,
) -> Result<(weir_broker::RunningBroker, Member), String> {
    use std::sync::Arc;
    use std::time::Duration;
    use weir_cluster::lifecycle::{BrokerInfo, LifecycleConfig};

    let node_id = config.node_id;
    let quorum = QuorumSettings::of(&config)?;
    let voters = quorum.voters.clone();
    let (node, observer, controller_addr) = if config.is_controller() {
        let (node, addr) = start_quorum_node(&config, &quorum).await?;
        (Some(node), None, Some(addr))
    } else {
        // Marks the data dir as a cluster member's; the image itself is
        // fetched again at every start.
        std::fs::create_dir_all(&quorum.metadata_dir)
            .map_err(|e| format!("cannot create {}: {e}", quorum.metadata_dir.display()))?;
        let mut oc = weir_cluster::ObserverConfig::new(node_id);
        oc.cluster_id = config.cluster_id();
        (
            None,
            Some(weir_cluster::MetadataObserver::start(voters.clone(), oc)),
            None,
        )
    };
    let (images, leader): (weir_cluster::ImageReader, cluster::LeaderFn) = match (&node, &observer)
    {
        (Some(node), _) => {
            let controller = node.controller().clone();
            (node.images(), Arc::new(move || controller.leader()))
        }
        (None, Some(observer)) => (observer.images(), observer.leader_reader()),
        (None, None) => return Err("neither a controller nor a metadata observer".into()),
    };
    let inter_broker = config
        .inter_broker_listener()
        .map(|l| l.name.clone())
        .unwrap_or_default();
    let view = Arc::new(cluster::ImageView::new(
        images.clone(),
        leader,
        inter_broker,
    ));
    let (hosted_tx, hosted_rx) = tokio::sync::watch::channel(0u64);
    let admin = Arc::new(cluster::ForwardingAdmin::new(
        voters.clone(),
        images.clone(),
        hosted_rx,
        Duration::from_secs(30),
    ));
    let mut security_sync = None;
    let running = weir_broker::server::start_with_setup(
        config,
        weir_broker::broker::system_clock(),
        |broker| {
            // Nothing is appended or acknowledged before the metadata's
            // leadership is applied.
            broker.replicas.set_cluster_member();
            broker.set_cluster(view, admin);
            let sync = Arc::new(security::SecuritySync::new(
                broker.acls.clone(),
                broker.scram.clone(),
                broker.quotas.clone(),
            ));
            broker.set_security_admin(Arc::new(security::ForwardingSecurity::new(
                voters.clone(),
                images.clone(),
                sync.clone(),
                Duration::from_secs(30),
            )));
            security_sync = Some(sync);
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    let security_sync = security_sync.ok_or("the broker was not set up")?;
    let broker = running.broker.clone();
    if let Some(node) = &node {
        broker
            .metrics
            .set_extra_metrics(controller_metrics(node.controller().clone()));
    }
    let info = BrokerInfo {
        node_id,
        cluster_id: broker.meta.cluster_id.clone(),
        listeners: registered_listeners(&broker.config, &running.listener_addrs),
        rack: broker.config.explicit.get("broker.rack").cloned(),
    };
    let lifecycle = LifecycleConfig {
        heartbeat_interval: Duration::from_millis(quorum.heartbeat_interval_ms),
        // Past the session timeout the controller fences this broker
        // anyway; waiting longer for a lost quorum gains nothing.
        shutdown_timeout: Duration::from_millis(quorum.session_timeout_ms),
    };
    let mut node = node;
    let mut registration = None;
    let observer = match (node.as_mut(), observer) {
        (Some(node), _) => {
            node.start_broker(info, lifecycle);
            if let Some(state) = node.broker_state() {
                registration = Some(state.clone());
                set_isr_changer(&broker, &voters, state);
            }
            None
        }
        (None, Some(observer)) => {
            let client = Arc::new(weir_cluster::ControllerClient::new(
                voters.clone(),
                weir_cluster::ControllerClientConfig::default(),
            ));
            let offset_images = observer.images();
            let offset: weir_cluster::lifecycle::MetadataOffset =
                Arc::new(move || i64::try_from(offset_images.current().index).unwrap_or(i64::MAX));
            let lifecycle = weir_cluster::BrokerLifecycle::start_with_session_timeout(
                info,
                lifecycle,
                client,
                offset,
                Duration::from_millis(quorum.session_timeout_ms),
            );
            registration = Some(lifecycle.state());
            set_isr_changer(&broker, &voters, lifecycle.state());
            Some((observer, lifecycle))
        }
        (None, None) => None,
    };
    let (stop, stop_rx) = tokio::sync::watch::channel(false);
    let tasks = vec![
        tokio::spawn(security::follow_security(
            security_sync,
            images.clone(),
            registration.clone(),
            stop_rx.clone(),
        )),
        tokio::spawn(cluster::follow_image(
            broker.clone(),
            images.clone(),
            hosted_tx,
            registration,
            stop_rx.clone(),
        )),
        tokio::spawn(cluster::ensure_offsets_topic(
            broker.effective_config(),
            voters.clone(),
            images,
            stop_rx.clone(),
        )),
        tokio::spawn(weir_broker::replication::isr_shrink_loop(
            broker.clone(),
            stop_rx,
        )),
    ];
    Ok((
        running,
        Member {
            node,
            observer,
            controller_addr,
            voters,
            stop,
            tasks,
            broker,
        },
    ))
}

/// ISR changes and producer id blocks go to the active controller with the
/// broker epoch of this broker's registration.
fn set_isr_changer(
    broker: &std::sync::Arc<weir_broker::Broker>,
    voters: &std::collections::BTreeMap<u64, String>,
    state: tokio::sync::watch::Receiver<weir_cluster::BrokerState>,
) {
    let epoch: std::sync::Arc<dyn Fn() -> i64 + Send + Sync> =
        std::sync::Arc::new(move || state.borrow().broker_epoch.unwrap_or(-1));
    broker.set_isr_changer(std::sync::Arc::new(cluster::ControllerIsrChanger::new(
        voters.clone(),
        broker.config.node_id,
        epoch.clone(),
    )));
    broker.set_producer_id_source(std::sync::Arc::new(cluster::ControllerProducerIds::new(
        voters.clone(),
        broker.config.node_id,
        epoch,
    )));
}

/// The controller's gauges and counters on this node's `/metrics`
/// (`weir_controller_*`).
fn controller_metrics(
    controller: weir_cluster::QuorumController,
) -> weir_broker::metrics::ExtraMetrics {
    use weir_broker::metrics::text::{Kind, TextWriter};
    std::sync::Arc::new(move |w: &mut TextWriter| {
        let m = controller.metrics();
        let families = [
            (
                "weir_controller_active",
                Kind::Gauge,
                "1 when this node is the active controller (Kafka's ActiveControllerCount).",
                m.active_controller,
            ),
            (
                "weir_controller_fenced_brokers",
                Kind::Gauge,
                "Registered brokers that are fenced, in this node's metadata image.",
                m.fenced_brokers,
            ),
            (
                "weir_controller_offline_partitions",
                Kind::Gauge,
                "Partitions without a leader, in this node's metadata image.",
                m.offline_partitions,
            ),
            (
                "weir_controller_leader_elections_total",
                Kind::Counter,
                "Partition leaders elected in batches this node committed as the active controller.",
                m.leader_elections_total,
            ),
            (
                "weir_controller_preferred_election_runs_total",
                Kind::Counter,
                "Preferred-leader election runs (ElectLeaders and rebalance checks) made by this node as the active controller.",
                m.preferred_election_runs_total,
            ),
        ];
        for (name, kind, help, value) in families {
            w.family(name, kind, help);
            w.sample_int(name, &[], i128::from(value));
        }
    })
}

/// A cluster member hosts only what the metadata log assigns it, and deletes
/// any other topic's logs. So a data dir that holds partitions but no
/// metadata log yet (a single node's, say) is refused instead of emptied.
fn refuse_single_node_data(log_dirs: &[std::path::PathBuf]) -> Result<(), String> {
    for dir in log_dirs {
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        let partitions: Vec<String> = entries
            .filter_map(Result::ok)
            .filter(|e| e.path().is_dir())
            .filter_map(|e| e.file_name().into_string().ok())
            .filter(|n| weir_storage::TopicPartition::from_dir_name(n).is_some())
            .collect();
        if let Some(first) = partitions.first() {
            return Err(format!(
                "{} holds {} partition directories ({first}, ...) but no cluster metadata \
                 (weir-metadata/): it is not a cluster member's data dir, and joining a cluster \
                 would delete them; start this node on an empty data dir",
                dir.display(),
                partitions.len()
            ));
        }
    }
    Ok(())
}
