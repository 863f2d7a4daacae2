//! The accept loop, connection limits and orderly shutdown.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;

use crate::broker::{Broker, BrokerError, Clock, system_clock};
use crate::config::{BrokerConfig, ClientListener};
use crate::connection::{Connection, Transport};
use crate::session::{ListenerInfo, Principal, Session};
use crate::tls::ListenerTls;

/// How often time-driven storage work (flush.ms, segment.ms) runs.
const TICK_INTERVAL: Duration = Duration::from_millis(500);
/// How often recovery points and log start offsets are checkpointed.
const CHECKPOINT_INTERVAL: Duration = Duration::from_secs(60);
/// How often SSL listeners look whether their keystore or truststore
/// files changed (a stat per file).
const TLS_RELOAD_INTERVAL: Duration = Duration::from_secs(1);
/// Longest a TLS handshake may take (also bounded by
/// `connections.max.idle.ms`); a client that stalls it loses its slot.
const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Most encrypted bytes rustls holds for the socket per TLS connection.
const TLS_SEND_BUFFER: usize = 512 * 1024;

/// Counts open connections, in total and per client IP.
#[derive(Debug, Default)]
pub struct ConnectionLimits {
    /// `max.connections` and `max.connections.per.ip`; dynamic, so they
    /// change under open connections (which stay open, as in Kafka).
    max_total: AtomicU32,
    max_per_ip: AtomicU32,
    state: Mutex<(u32, HashMap<IpAddr, u32>)>,
}

/// Releases a connection slot when dropped.
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
}

impl ConnectionLimits {
    pub fn new(max_total: u32, max_per_ip: u32) -> Arc<Self> {
        Arc::new(ConnectionLimits {
            max_total: AtomicU32::new(max_total),
            max_per_ip: AtomicU32::new(max_per_ip),
            state: Mutex::new((0, HashMap::new())),
        })
    }

    /// New limits for the connections accepted from now on.
    pub fn set_limits(&self, max_total: u32, max_per_ip: u32) {
        self.max_total.store(max_total, Ordering::Relaxed);
        self.max_per_ip.store(max_per_ip, Ordering::Relaxed);
    }

    /// The limits from the configuration in effect (dynamic configs
    /// included).
    fn set_limits_from(&self, cfg: &BrokerConfig) {
        let limit = |name: &str, fallback: u32| {
            cfg.integer(name)
                .map_or(fallback, |v| u32::try_from(v).unwrap_or(u32::MAX))
        };
        self.set_limits(
            limit("max.connections", cfg.max_connections),
            limit("max.connections.per.ip", cfg.max_connections_per_ip),
        );
    }

    /// Takes a slot for a connection from `ip`, or None when a limit is hit.
    pub fn acquire(self: &Arc<Self>, ip: IpAddr) -> Option<ConnectionSlot> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let per_ip = s.1.get(&ip).copied().unwrap_or(0);
        if s.0 >= self.max_total.load(Ordering::Relaxed)
            || per_ip >= self.max_per_ip.load(Ordering::Relaxed)
        {
            return None;
        }
        s.0 += 1;
        s.1.insert(ip, per_ip + 1);
        Some(ConnectionSlot {
            limits: self.clone(),
            ip,
        })
    }

    pub fn open_connections(&self) -> u32 {
        self.state.lock().map(|s| s.0).unwrap_or(0)
    }
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut s = self.limits.state.lock().unwrap_or_else(|p| p.into_inner());
        s.0 = s.0.saturating_sub(1);
        if let Some(n) = s.1.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                s.1.remove(&self.ip);
            }
        }
    }
}

/// A started broker.
pub struct RunningBroker {
    /// The bound address of the first client listener.
    pub local_addr: SocketAddr,
    /// Every client listener's name and bound address, in `listeners`
    /// order.
    pub listener_addrs: Vec<(String, SocketAddr)>,
    pub broker: Arc<Broker>,
    /// The bound HTTP listener (`/metrics`, console); None when disabled.
    http_addr: Option<SocketAddr>,
    http_task: Option<JoinHandle<()>>,
    shutdown_tx: watch::Sender<bool>,
    /// The accept loops, one per client listener, and the TLS reloader.
    tasks: Vec<JoinHandle<()>>,
    done_rx: mpsc::Receiver<()>,
    ticker: JoinHandle<()>,
    /// Retention and the cleaner.
    maintainer: JoinHandle<()>,
    /// Probes the runtime's task start delay; stops when dropped.
    _watchdog: crate::runtime_watchdog::Watchdog,
    group_timer: JoinHandle<()>,
    txn_timer: JoinHandle<()>,
}

/// Opens the data dir, binds the listener and starts serving.
pub async fn start(config: BrokerConfig) -> Result<RunningBroker, BrokerError> {
    start_with_clock(config, system_clock()).await
}

pub async fn start_with_clock(
    config: BrokerConfig,
    clock: Clock,
) -> Result<RunningBroker, BrokerError> {
    start_with_setup(config, clock, |_| {}).await
}

/// [`start_with_clock`], with `setup` run on the opened broker before the
/// group coordinator is loaded and before any client connects: a cluster
/// member installs its cluster view and topic admin here
/// ([`Broker::set_cluster`]).
pub async fn start_with_setup(
    config: BrokerConfig,
    clock: Clock,
    setup: impl FnOnce(&Arc<Broker>),
) -> Result<RunningBroker, BrokerError> {
    start_inner(config, clock, setup, None).await
}

/// [`start`] with the partition logs on `storage` ([`Broker::open_with_storage`]):
/// tests watch or fault the file operations of a serving broker.
#[doc(hidden)]
pub async fn start_with_storage(
    config: BrokerConfig,
    storage: Arc<dyn weir_storage::backend::Storage>,
) -> Result<RunningBroker, BrokerError> {
    start_inner(config, system_clock(), |_| {}, Some(storage)).await
}

async fn start_inner(
    config: BrokerConfig,
    clock: Clock,
    setup: impl FnOnce(&Arc<Broker>),
    storage: Option<Arc<dyn weir_storage::backend::Storage>>,
) -> Result<RunningBroker, BrokerError> {
    // TLS stores are read and ports bound first: a bad keystore or a port
    // in use fails before the data dir is touched
    let tls = load_tls(&config).await?;
    let http_protection = load_http_protection(&config).await?;
    let mut bound = Vec::with_capacity(config.listeners.len());
    for (l, tls) in config.listeners.iter().zip(tls) {
        let bind = l.address.bind_addr().map_err(BrokerError::Config)?;
        let listener = TcpListener::bind(bind)
            .await
            .map_err(|source| BrokerError::Bind {
                addr: bind.to_string(),
                source,
            })?;
        bound.push((l, listener, tls));
    }
    let http_listener = bind_http(&config).await?;
    let cfg = config.clone();
    let broker = tokio::task::spawn_blocking(move || match storage {
        Some(s) => Broker::open_with_storage(cfg, clock, s),
        None => Broker::open(cfg, clock),
    })
    .await
    .map_err(|e| BrokerError::Config(format!("startup task failed: {e}")))??;
    let broker = Arc::new(broker);
    setup(&broker);
    let b = broker.clone();
    tokio::task::spawn_blocking(move || b.set_groups(crate::groups::Groups::open(&b)))
        .await
        .map_err(|e| BrokerError::Config(format!("group load task failed: {e}")))?;
    let b = broker.clone();
    tokio::task::spawn_blocking(move || {
        b.set_transactions(crate::transactions::Transactions::open(&b))
    })
    .await
    .map_err(|e| BrokerError::Config(format!("transaction load task failed: {e}")))?;
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    // every connection task holds a clone of `done_tx`; recv() returns None
    // once all of them have finished
    let (done_tx, done_rx) = mpsc::channel::<()>(1);
    let limits = ConnectionLimits::new(config.max_connections, config.max_connections_per_ip);
    let budget = crate::connection::RequestBudget::new(
        broker.config.queued_max_request_bytes,
        broker.metrics.request_memory.clone(),
    );
    let mut tasks = Vec::new();
    let mut listener_addrs = Vec::new();
    let mut reloading = Vec::new();
    let inter_broker = config.inter_broker_listener().map(|l| l.name.clone());
    for (l, listener, tls) in bound {
        let addr = listener.local_addr()?;
        if inter_broker.as_ref() == Some(&l.name) {
            broker.set_bound_addr(addr);
        }
        let info = Arc::new(listener_info(l, addr));
        tracing::info!(%addr, listener = %l.name, protocol = l.protocol.name(), "listening");
        listener_addrs.push((l.name.clone(), addr));
        if let Some(t) = &tls {
            reloading.push(t.clone());
        }
        tasks.push(tokio::spawn(accept_loop(
            Accepting {
                listener,
                info,
                tls,
                // credentials set at run time first, then the static JAAS users
                sasl: l.sasl.clone().map(|s| {
                    let dynamic: Arc<dyn crate::sasl::scram::ScramCredentials> =
                        broker.scram.clone();
                    Arc::new(s.with_dynamic_scram(dynamic))
                }),
                limits: limits.clone(),
                budget: budget.clone(),
            },
            broker.clone(),
            shutdown_rx.clone(),
            done_tx.clone(),
        )));
    }
    drop(done_tx);
    let local_addr = listener_addrs
        .first()
        .map(|(_, a)| *a)
        .ok_or_else(|| BrokerError::Config("no client listener".into()))?;
    let mut http_addr = None;
    let mut http_task = None;
    if let Some(l) = http_listener {
        let addr = l.local_addr()?;
        let scheme = if http_protection.tls.is_some() {
            "https"
        } else {
            "http"
        };
        tracing::info!(%addr, scheme, "HTTP listening (/metrics, console)");
        if let Some(weak) = config.http_security.weakness(addr) {
            tracing::warn!(%addr, "HTTP listener {weak}");
        }
        if let Some(t) = &http_protection.tls {
            reloading.push(t.clone());
        }
        http_addr = Some(addr);
        http_task = Some(crate::http::spawn(
            l,
            broker.clone(),
            http_protection,
            shutdown_rx.clone(),
        ));
    }
    if !reloading.is_empty() {
        tasks.push(tokio::spawn(tls_reload_loop(
            reloading,
            shutdown_rx.clone(),
        )));
    }
    let group_timer = tokio::spawn(crate::groups::timer_loop(
        broker.clone(),
        shutdown_rx.clone(),
    ));
    let txn_timer = tokio::spawn(crate::transactions::run(
        broker.clone(),
        shutdown_rx.clone(),
    ));
    let maintainer = tokio::spawn(maintenance_loop(broker.clone(), shutdown_rx.clone()));
    let ticker = tokio::spawn(tick_loop(broker.clone(), shutdown_rx));
    let watchdog = crate::runtime_watchdog::Watchdog::start(
        tokio::runtime::Handle::current(),
        broker.metrics.runtime.clone(),
    );
    tracing::info!(%local_addr, "broker listening");
    Ok(RunningBroker {
        local_addr,
        listener_addrs,
        broker,
        http_addr,
        http_task,
        shutdown_tx,
        tasks,
        done_rx,
        ticker,
        maintainer,
        _watchdog: watchdog,
        group_timer,
        txn_timer,
    })
}

/// Binds `http.listeners`. A bind failure is an error when the setting was
/// given explicitly; with the default address (which several brokers on one
/// host share) the broker logs a warning and runs without HTTP.
async fn bind_http(config: &BrokerConfig) -> Result<Option<TcpListener>, BrokerError> {
    let Some(l) = &config.http_listener else {
        return Ok(None);
    };
    let addr = l.bind_addr().map_err(BrokerError::Config)?;
    match crate::http::bind(addr).await {
        Ok(listener) => Ok(Some(listener)),
        Err(e) if !config.explicit.contains_key("http.listeners") => {
            tracing::warn!(
                "HTTP listener disabled: cannot listen on {addr}: {e} (set http.listeners to another address, or to the empty string to silence this)"
            );
            Ok(None)
        }
        Err(source) => Err(BrokerError::Bind {
            addr: addr.to_string(),
            source,
        }),
    }
}

/// Loads the TLS stores of the SSL listeners (blocking reads, on a
/// blocking thread), one entry per client listener.
async fn load_tls(config: &BrokerConfig) -> Result<Vec<Option<Arc<ListenerTls>>>, BrokerError> {
    let settings: Vec<_> = config.listeners.iter().map(|l| l.tls.clone()).collect();
    tokio::task::spawn_blocking(move || {
        settings
            .into_iter()
            .map(|s| {
                s.map(|s| ListenerTls::load(s).map(Arc::new))
                    .transpose()
                    .map_err(|e| BrokerError::Config(e.to_string()))
            })
            .collect()
    })
    .await
    .map_err(|e| BrokerError::Config(format!("TLS load task failed: {e}")))?
}

/// Loads the HTTP listener's keystore and users file (blocking reads, on a
/// blocking thread); nothing when the listener is off.
async fn load_http_protection(
    config: &BrokerConfig,
) -> Result<crate::http::Protection, BrokerError> {
    if config.http_listener.is_none() {
        return Ok(crate::http::Protection::default());
    }
    let security = config.http_security.clone();
    tokio::task::spawn_blocking(move || crate::http::Protection::load(&security))
        .await
        .map_err(|e| BrokerError::Config(format!("HTTP TLS load task failed: {e}")))?
        .map_err(|e| BrokerError::Config(e.to_string()))
}

/// What connections of `l`, bound at `bound`, see of their listener (and
/// what a cluster member registers for it).
pub fn listener_info(l: &ClientListener, bound: SocketAddr) -> ListenerInfo {
    let (advertised_host, advertised_port) = match &l.advertised {
        Some(a) => (a.host.clone(), a.port),
        None if bound.ip().is_unspecified() => ("127.0.0.1".to_string(), bound.port()),
        None => (bound.ip().to_string(), bound.port()),
    };
    ListenerInfo {
        name: l.name.clone(),
        protocol: l.protocol,
        advertised_host,
        advertised_port,
    }
}

/// One bound client listener and what its accept loop shares.
struct Accepting {
    listener: TcpListener,
    info: Arc<ListenerInfo>,
    /// Some for an SSL or SASL_SSL listener.
    tls: Option<Arc<ListenerTls>>,
    /// Some for a SASL_PLAINTEXT or SASL_SSL listener.
    sasl: Option<Arc<crate::sasl::ListenerSasl>>,
    limits: Arc<ConnectionLimits>,
    budget: crate::connection::RequestBudget,
}

async fn accept_loop(
    a: Accepting,
    broker: Arc<Broker>,
    mut shutdown: watch::Receiver<bool>,
    done_tx: mpsc::Sender<()>,
) {
    let idle = Duration::from_millis(broker.config.connections_max_idle_ms);
    let max_request = broker.config.socket_request_max_bytes;
    while let Some((stream, peer)) = accept_next(&a.listener, &mut shutdown, "Kafka").await {
        a.limits.set_limits_from(&broker.effective_config());
        let Some(slot) = a.limits.acquire(peer.ip()) else {
            tracing::warn!(%peer, "connection refused: max.connections or max.connections.per.ip reached");
            broker
                .metrics
                .connections_rejected
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            drop(stream);
            continue;
        };
        let broker = broker.clone();
        let mut shutdown = shutdown.clone();
        let done = done_tx.clone();
        let open = OpenConnection::new(broker.clone());
        let info = a.info.clone();
        let tls = a.tls.clone();
        let budget = a.budget.clone();
        let sasl = a.sasl.clone();
        tokio::spawn(async move {
            let established = tokio::select! {
                r = establish(stream, peer, &info, tls.as_deref(), idle) => r,
                _ = shutdown.changed() => None,
            };
            if let Some((transport, principal)) = established {
                let conn = Connection::with_transport(
                    transport,
                    peer,
                    Session::new(info, principal, peer.ip().to_string()),
                    max_request,
                    idle,
                )
                .with_inline_max_bytes(broker.config.fetch_inline_max_bytes)
                .with_budget(budget);
                let conn = match sasl {
                    Some(sasl) => conn.with_sasl(sasl),
                    None => conn,
                };
                conn.run(broker, shutdown).await;
            }
            drop(open);
            drop(slot);
            drop(done);
        });
    }
}

/// Sets up a new connection's transport: the TLS handshake on an SSL
/// listener, and the client's principal. None when the handshake fails or
/// the principal cannot be established (logged; the connection closes).
async fn establish(
    stream: TcpStream,
    peer: SocketAddr,
    info: &ListenerInfo,
    tls: Option<&ListenerTls>,
    idle: Duration,
) -> Option<(Transport, Principal)> {
    let Some(tls) = tls else {
        return Some((Transport::Plain(stream), Principal::anonymous()));
    };
    let handshake = tls.acceptor().accept(stream);
    let stream = match tokio::time::timeout(idle.min(TLS_HANDSHAKE_TIMEOUT), handshake).await {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::info!(%peer, listener = %info.name, "TLS handshake failed: {e}");
            return None;
        }
        Err(_) => {
            tracing::info!(%peer, listener = %info.name, "TLS handshake timed out");
            return None;
        }
    };
    let mut stream = stream;
    // Room for a whole write batch of encrypted records: fewer wake-ups
    // between encrypting and sending (rustls's default is 64 KiB).
    stream.get_mut().1.set_buffer_limit(Some(TLS_SEND_BUFFER));
    match tls.principal(stream.get_ref().1) {
        Ok(principal) => {
            tracing::debug!(%peer, listener = %info.name, %principal, "TLS connection");
            Some((Transport::Tls(Box::new(stream)), principal))
        }
        Err(reason) => {
            tracing::warn!(%peer, listener = %info.name, "TLS client refused: {reason}");
            None
        }
    }
}

/// Reloads each SSL listener's certificates when its files change.
async fn tls_reload_loop(listeners: Vec<Arc<ListenerTls>>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(TLS_RELOAD_INTERVAL);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => break,
        }
        let ls = listeners.clone();
        let _ = tokio::task::spawn_blocking(move || {
            for l in &ls {
                match l.reload_if_changed() {
                    Ok(true) => tracing::info!(
                        listener = %l.settings().listener,
                        "TLS keystore or truststore changed: new connections use the new files"
                    ),
                    Ok(false) => {}
                    Err(e) => {
                        tracing::error!("TLS reload failed, the previous certificate stays: {e}")
                    }
                }
            }
        })
        .await;
    }
}

/// Waits for the next connection on `listener`; `None` once `shutdown`
/// changes. A failed accept (e.g. EMFILE) is logged and retried after a
/// short back-off instead of spinning.
pub(crate) async fn accept_next(
    listener: &TcpListener,
    shutdown: &mut watch::Receiver<bool>,
    what: &str,
) -> Option<(TcpStream, SocketAddr)> {
    loop {
        tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => return Some(x),
                Err(e) => {
                    tracing::warn!("{what} accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = shutdown.changed() => return None,
        }
    }
}

/// Counts a connection in `weir_connections_open` while it lives (also
/// when its task unwinds).
struct OpenConnection(Arc<Broker>);

impl OpenConnection {
    fn new(broker: Arc<Broker>) -> Self {
        broker.metrics.connection_opened();
        OpenConnection(broker)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.metrics.connection_closed();
    }
}

/// The broker's clock for the log cleaner (throttling sleeps for real).
struct CleanerClock(Arc<Broker>);

impl weir_storage::cleaner::Clock for CleanerClock {
    fn now_ms(&self) -> i64 {
        self.0.now_ms()
    }
    fn sleep_ms(&self, ms: u64) {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// Retention and log-cleaner schedules (`log.retention.check.interval.ms`,
/// `log.cleaner.backoff.ms`), in broker time.
struct Maintenance {
    retention: weir_storage::retention::Retention,
    cleaner: Option<Arc<weir_storage::cleaner::LogCleaner>>,
    retention_interval_ms: i64,
    cleaner_backoff_ms: i64,
    last_retention_ms: i64,
    last_clean_ms: i64,
}

impl Maintenance {
    fn new(b: &Broker) -> Maintenance {
        // Defaults come from the config table; 0 is never reached (every
        // name below has a numeric default there, checked by a test).
        let num = |name: &str| b.config.number(name).unwrap_or(0.0);
        let enabled = b
            .config
            .value("log.cleaner.enable")
            .is_none_or(|v| v.trim().eq_ignore_ascii_case("true"));
        let threads = num("log.cleaner.threads") as usize;
        let cfg = cleaner_config(&b.effective_config());
        let cleaner = if enabled && threads > 0 {
            match weir_storage::cleaner::LogCleaner::open(cfg, b.replicas.logs()) {
                Ok(c) => {
                    let c = Arc::new(c);
                    b.metrics.set_cleaner(c.clone());
                    b.replicas.set_cleaner(c.clone());
                    Some(c)
                }
                Err(e) => {
                    tracing::error!("log cleaner disabled: {e}");
                    None
                }
            }
        } else {
            None
        };
        let now = b.now_ms();
        Maintenance {
            retention: weir_storage::retention::Retention::new(),
            cleaner,
            retention_interval_ms: num("log.retention.check.interval.ms") as i64,
            cleaner_backoff_ms: num("log.cleaner.backoff.ms") as i64,
            last_retention_ms: now,
            last_clean_ms: now,
        }
    }

    /// Runs whatever is due (blocking).
    fn run(&mut self, b: &Arc<Broker>) {
        use std::sync::atomic::Ordering::Relaxed;
        let now = b.now_ms();
        if now.saturating_sub(self.last_retention_ms) >= self.retention_interval_ms {
            self.last_retention_ms = now;
            match self.retention.run(b.replicas.logs(), now) {
                Ok(report) => b.metrics.record_retention(&report),
                Err(e) => {
                    b.metrics.retention.failures.fetch_add(1, Relaxed);
                    tracing::warn!("retention failed: {e}");
                }
            }
        } else {
            match self.retention.unlink_due(b.replicas.logs(), now) {
                Ok(n) => b.metrics.record_unlinked(n),
                Err(e) => {
                    b.metrics.retention.failures.fetch_add(1, Relaxed);
                    tracing::warn!("removing deleted segments failed: {e}");
                }
            }
        }
        let Some(cleaner) = &self.cleaner else { return };
        // The log.cleaner.* settings are dynamic: each round uses the
        // configuration in effect.
        let effective = b.effective_config();
        self.cleaner_backoff_ms = effective
            .integer("log.cleaner.backoff.ms")
            .unwrap_or(self.cleaner_backoff_ms);
        if now.saturating_sub(self.last_clean_ms) < self.cleaner_backoff_ms {
            return;
        }
        cleaner.reconfigure(cleaner_config(&effective));
        self.last_clean_ms = now;
        let clock = CleanerClock(b.clone());
        std::thread::scope(|s| {
            for _ in 0..cleaner.config().threads {
                s.spawn(|| {
                    if let Err(e) = cleaner.run_once(b.replicas.logs(), &clock) {
                        tracing::warn!("log cleaning failed: {e}");
                    }
                });
            }
        });
    }
}

/// The cleaner's settings from a broker configuration (`log.cleaner.threads`
/// of at least 1 here: 0 disables the cleaner at start).
fn cleaner_config(cfg: &BrokerConfig) -> weir_storage::cleaner::CleanerConfig {
    // Every name has a numeric default in the config table (checked by a
    // test), so the fallbacks are never used.
    let num = |name: &str| cfg.number(name).unwrap_or(0.0);
    weir_storage::cleaner::CleanerConfig {
        threads: (num("log.cleaner.threads") as usize).max(1),
        dedupe_buffer_size: num("log.cleaner.dedupe.buffer.size") as usize,
        io_max_bytes_per_second: num("log.cleaner.io.max.bytes.per.second"),
    }
}

/// Every `TICK_INTERVAL`: segment rolls by `segment.ms`, flushes by
/// `flush.ms`/`flush.messages` and checkpoints. Retention and the cleaner
/// run in [`maintenance_loop`], so a long cleaning never delays them.
async fn tick_loop(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(TICK_INTERVAL);
    let mut last_checkpoint = tokio::time::Instant::now();
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => break,
        }
        let b = broker.clone();
        let checkpoint = last_checkpoint.elapsed() >= CHECKPOINT_INTERVAL;
        if checkpoint {
            last_checkpoint = tokio::time::Instant::now();
        }
        let r = tokio::task::spawn_blocking(move || {
            b.replicas.tick(b.now_ms())?;
            if checkpoint {
                b.replicas.checkpoint()?;
            }
            Ok::<_, weir_storage::StorageError>(())
        })
        .await;
        if let Ok(Err(e)) = r {
            tracing::warn!("periodic storage work failed: {e}");
        }
    }
}

/// Retention and the log cleaner on their own schedule (checked every
/// `TICK_INTERVAL`, each round on a blocking thread), beside [`tick_loop`].
async fn maintenance_loop(broker: Arc<Broker>, mut shutdown: watch::Receiver<bool>) {
    let mut tick = tokio::time::interval(TICK_INTERVAL);
    let maintenance = Arc::new(std::sync::Mutex::new(Maintenance::new(&broker)));
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = shutdown.changed() => break,
        }
        let b = broker.clone();
        let m = maintenance.clone();
        let _ = tokio::task::spawn_blocking(move || {
            m.lock().unwrap_or_else(|e| e.into_inner()).run(&b);
        })
        .await;
    }
}

impl RunningBroker {
    /// The bound address of the HTTP listener (`/metrics` and the
    /// console), None when `http.listeners` is empty or the default address
    /// was taken.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The bound address of the client listener `name` (case-insensitive).
    pub fn listener_addr(&self, name: &str) -> Option<SocketAddr> {
        self.listener_addrs
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, a)| *a)
    }

    /// Stops accepting, closes connections after their current request,
    /// then flushes, checkpoints and writes the clean-shutdown marker.
    pub async fn shutdown(mut self) -> Result<(), BrokerError> {
        let _ = self.shutdown_tx.send(true);
        for t in self.tasks.drain(..) {
            let _ = t.await;
        }
        if let Some(t) = self.http_task.take() {
            let _ = t.await;
        }
        let _ = self.ticker.await;
        let _ = self.maintainer.await;
        let _ = self.group_timer.await;
        let _ = self.txn_timer.await;
        // wait for connection tasks (each finishes its in-flight request)
        while self.done_rx.recv().await.is_some() {}
        let b = self.broker.clone();
        tokio::task::spawn_blocking(move || b.replicas.shutdown())
            .await
            .map_err(|e| BrokerError::Config(format!("shutdown task failed: {e}")))??;
        tracing::info!("broker stopped cleanly");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_count_total_and_per_ip_and_release_on_drop() {
        let l = ConnectionLimits::new(3, 2);
        let a: IpAddr = "10.0.0.1".parse().unwrap();
        let b: IpAddr = "10.0.0.2".parse().unwrap();
        let s1 = l.acquire(a).unwrap();
        let _s2 = l.acquire(a).unwrap();
        assert!(l.acquire(a).is_none(), "per-ip limit");
        let _s3 = l.acquire(b).unwrap();
        assert!(l.acquire(b).is_none(), "total limit");
        drop(s1);
        assert!(l.acquire(a).is_some());
        assert_eq!(l.open_connections(), 2);
    }
}
