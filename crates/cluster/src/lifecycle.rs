//! [`BrokerLifecycle`]: a broker's side of registration, heartbeats and
//! controlled shutdown, against the active controller through a
//! [`ControllerClient`].
//!
//! The broker registers with its node id, an incarnation id drawn afresh
//! at every process start, its advertised listeners, rack and cluster id;
//! then it heartbeats every `heartbeat_interval` with the metadata offset
//! it has applied. The controller unfences it once that offset has caught
//! up. An answer of BROKER_ID_NOT_REGISTERED or STALE_BROKER_EPOCH (the
//! controller lost or replaced the registration) makes it register again.
//! [`BrokerLifecycle::shutdown`] heartbeats with `want_shut_down` until the
//! controller answers `should_shut_down` (the broker then leads nothing) or
//! `shutdown_timeout` passes, then stops.
//!
//! A registration the controller will never accept ends the lifecycle in
//! the refused state ([`BrokerState::refused`], one line naming the
//! setting to fix), for the process to exit on:
//!
//! - INCONSISTENT_CLUSTER_ID at once: the quorum is another cluster (its
//!   `controller.quorum.voters`, from which the cluster id is derived, or
//!   its `cluster.id` differs from this node's);
//! - DUPLICATE_BROKER_REGISTRATION once it has persisted for twice the
//!   session timeout plus a heartbeat interval. A restarted broker gets it
//!   too, until its previous incarnation's session expires (one session
//!   timeout; a controller failover meanwhile starts that session afresh,
//!   hence twice), so only past that is another live process holding the
//!   same `node.id`.
//!
//! The state is published on a `tokio::sync::watch` channel.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use weir_metadata::Endpoint;
use weir_metadata::controller::DEFAULT_SESSION_TIMEOUT_MS;
use weir_protocol::Uuid;
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::broker_registration_request::Listener;
use weir_protocol::messages::{BrokerHeartbeatRequest, BrokerRegistrationRequest};

use crate::client::ControllerClient;

/// Kafka's `broker.heartbeat.interval.ms` default.
pub const DEFAULT_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(2000);
/// Bound on a controlled shutdown before the broker stops anyway.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(30);

/// How soon a registered but still fenced broker heartbeats again.
pub const FENCED_HEARTBEAT_INTERVAL: Duration = Duration::from_millis(100);

/// What a broker registers as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerInfo {
    /// `node.id`.
    pub node_id: i32,
    pub cluster_id: String,
    /// `advertised.listeners`.
    pub listeners: Vec<Endpoint>,
    /// `broker.rack`.
    pub rack: Option<String>,
}

/// The lifecycle's timing.
#[derive(Debug, Clone)]
pub struct LifecycleConfig {
    /// `broker.heartbeat.interval.ms`.
    pub heartbeat_interval: Duration,
    pub shutdown_timeout: Duration,
}

impl Default for LifecycleConfig {
    fn default() -> Self {
        LifecycleConfig {
            heartbeat_interval: DEFAULT_HEARTBEAT_INTERVAL,
            shutdown_timeout: DEFAULT_SHUTDOWN_TIMEOUT,
        }
    }
}

/// The broker as the controller last answered. Always: `fenced` unless
/// registered (`broker_epoch` is set).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrokerState {
    /// The epoch of the current registration.
    pub broker_epoch: Option<i64>,
    pub fenced: bool,
    /// The controller found the broker's metadata caught up.
    pub caught_up: bool,
    /// The controller agreed to a controlled shutdown.
    pub shut_down: bool,
    /// The lifecycle has stopped (no more heartbeats).
    pub stopped: bool,
    /// Why the controller refused this broker for good, as one line naming
    /// the setting to fix. Set only with `stopped`.
    pub refused: Option<String>,
}

impl Default for BrokerState {
    fn default() -> Self {
        BrokerState {
            broker_epoch: None,
            fenced: true,
            caught_up: false,
            shut_down: false,
            stopped: false,
            refused: None,
        }
    }
}

/// The metadata offset the broker has applied (the index of its image).
pub type MetadataOffset = Arc<dyn Fn() -> i64 + Send + Sync>;

/// A running broker lifecycle. Dropping it stops the heartbeats at once
/// (no controlled shutdown), as a crash would.
pub struct BrokerLifecycle {
    incarnation_id: Uuid,
    state: watch::Receiver<BrokerState>,
    want_shutdown: watch::Sender<bool>,
    shutdown_timeout: Duration,
    task: Option<JoinHandle<()>>,
}

impl BrokerLifecycle {
    /// Starts registering and heartbeating, against a controller with the
    /// default session timeout (Kafka's `broker.session.timeout.ms`).
    pub fn start(
        info: BrokerInfo,
        config: LifecycleConfig,
        client: Arc<ControllerClient>,
        offset: MetadataOffset,
    ) -> Self {
        let session_timeout = Duration::from_millis(DEFAULT_SESSION_TIMEOUT_MS);
        Self::start_with_session_timeout(info, config, client, offset, session_timeout)
    }

    /// Starts registering and heartbeating, against a controller that
    /// expires a session after `session_timeout` (which bounds how long a
    /// DUPLICATE_BROKER_REGISTRATION is retried).
    pub fn start_with_session_timeout(
        info: BrokerInfo,
        config: LifecycleConfig,
        client: Arc<ControllerClient>,
        offset: MetadataOffset,
        session_timeout: Duration,
    ) -> Self {
        let incarnation_id = random_uuid();
        let (state_tx, state) = watch::channel(BrokerState::default());
        let (want_shutdown, want_rx) = watch::channel(false);
        let shutdown_timeout = config.shutdown_timeout;
        let run = Run {
            info,
            incarnation_id,
            interval: config.heartbeat_interval,
            client,
            offset,
            state: state_tx,
            want_shutdown: want_rx,
            // An old session may outlive a restart by a session timeout, and each
            // controller failover meanwhile starts it again.
            duplicate_timeout: session_timeout * 4 + config.heartbeat_interval,
            duplicate_since: None,
        };
        BrokerLifecycle {
            incarnation_id,
            state,
            want_shutdown,
            shutdown_timeout,
            task: Some(tokio::spawn(run.run())),
        }
    }

    /// This process's incarnation id.
    pub fn incarnation_id(&self) -> Uuid {
        self.incarnation_id
    }

    /// The broker's state, as it changes.
    pub fn state(&self) -> watch::Receiver<BrokerState> {
        self.state.clone()
    }

    /// Resolves with the reason once the controller has refused this
    /// broker for good ([`BrokerState::refused`]); never otherwise.
    pub fn refused(&self) -> impl Future<Output = String> + Send + 'static {
        let mut state = self.state.clone();
        async move {
            // The value is checked before the channel's end: a lifecycle
            // that stopped refused still answers.
            let refused = match state.wait_for(|s| s.refused.is_some()).await {
                Ok(s) => s.refused.clone(),
                Err(_) => None,
            };
            match refused {
                Some(reason) => reason,
                None => std::future::pending().await,
            }
        }
    }

    /// Controlled shutdown: heartbeats with `want_shut_down` until the
    /// controller agrees or `shutdown_timeout` passes, then stops. Returns
    /// whether the controller agreed.
    pub async fn shutdown(mut self) -> bool {
        let _ = self.want_shutdown.send(true);
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(self.shutdown_timeout, &mut task)
                .await
                .is_err()
        {
            task.abort();
        }
        self.state.borrow().shut_down
    }
}

impl Drop for BrokerLifecycle {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

struct Run {
    info: BrokerInfo,
    incarnation_id: Uuid,
    interval: Duration,
    client: Arc<ControllerClient>,
    offset: MetadataOffset,
    state: watch::Sender<BrokerState>,
    want_shutdown: watch::Receiver<bool>,
    /// How long DUPLICATE_BROKER_REGISTRATION is retried.
    duplicate_timeout: Duration,
    /// When the current run of DUPLICATE_BROKER_REGISTRATION answers began.
    duplicate_since: Option<Instant>,
}

/// The outcome of one registration attempt.
enum Registered {
    Epoch(i64),
    /// Refused or unanswered for now; try again.
    Retry,
    /// Refused for good, with the reason.
    Refused(String),
}

impl Run {
    async fn run(mut self) {
        let mut epoch: Option<i64> = None;
        loop {
            let shutting_down = *self.want_shutdown.borrow();
            if shutting_down && epoch.is_none() {
                break;
            }
            match epoch {
                None => match self.register().await {
                    Registered::Epoch(e) => {
                        epoch = Some(e);
                        // Straight on to the first heartbeat.
                        continue;
                    }
                    Registered::Retry => {}
                    Registered::Refused(reason) => {
                        tracing::error!("{reason}");
                        // Stopped too, in the same change: a watcher of
                        // `refused` sees the lifecycle over.
                        self.state.send_modify(|s| {
                            s.refused = Some(reason);
                            s.stopped = true;
                        });
                        break;
                    }
                },
                Some(e) => match self.heartbeat(e, shutting_down).await {
                    Beat::Ok { should_shut_down } => {
                        if shutting_down && should_shut_down {
                            break;
                        }
                    }
                    Beat::Reregister => {
                        epoch = None;
                        self.state.send_modify(|s| {
                            s.broker_epoch = None;
                            s.fenced = true;
                        });
                        continue;
                    }
                    Beat::Failed => {}
                },
            }
            // A registered broker stays fenced until a heartbeat shows it
            // caught up with the metadata log; until then it asks again
            // soon rather than a whole interval later, so a new broker is
            // usable (and counted for replica placement) quickly.
            // So does a broker in its controlled shutdown, told to wait
            // while its leaderships move.
            let wait = if epoch.is_some() && (self.state.borrow().fenced || shutting_down) {
                self.interval.min(FENCED_HEARTBEAT_INTERVAL)
            } else {
                self.interval
            };
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = self.want_shutdown.changed() => {}
            }
        }
        self.state.send_modify(|s| s.stopped = true);
    }

    async fn register(&mut self) -> Registered {
        let req = BrokerRegistrationRequest {
            broker_id: self.info.node_id,
            cluster_id: self.info.cluster_id.clone(),
            incarnation_id: self.incarnation_id,
            listeners: self
                .info
                .listeners
                .iter()
                .map(|e| Listener {
                    name: e.name.clone(),
                    host: e.host.clone(),
                    port: e.port,
                    security_protocol: e.security_protocol,
                    ..Default::default()
                })
                .collect(),
            rack: self.info.rack.clone(),
            ..Default::default()
        };
        match self.client.send(&req).await {
            Ok(resp) if resp.error_code == 0 => {
                tracing::info!(
                    broker = self.info.node_id,
                    epoch = resp.broker_epoch,
                    "registered"
                );
                self.duplicate_since = None;
                self.state.send_modify(|s| {
                    s.broker_epoch = Some(resp.broker_epoch);
                    s.fenced = true;
                    s.caught_up = false;
                });
                Registered::Epoch(resp.broker_epoch)
            }
            Ok(resp) => {
                let code = ErrorCode::from_code_lossy(resp.error_code);
                tracing::warn!(
                    broker = self.info.node_id,
                    error = code.name(),
                    "registration refused"
                );
                self.refusal(code).await
            }
            Err(e) => {
                tracing::warn!(broker = self.info.node_id, error = %e, "registration failed");
                Registered::Retry
            }
        }
    }

    /// Whether a registration refused with `code` is refused for good.
    async fn refusal(&mut self, code: ErrorCode) -> Registered {
        let node = self.info.node_id;
        let controller = match self.client.known_controller().await {
            Some(id) => format!("active controller: node {id}"),
            None => "no active controller known".to_string(),
        };
        match code {
            ErrorCode::InconsistentClusterId => Registered::Refused(format!(
                "the metadata quorum ({controller}) refused node {node}: its cluster id {} is \
                 not the quorum's (INCONSISTENT_CLUSTER_ID): controller.quorum.voters must list \
                 the same voters on every node (and cluster.id, if set, must be the same)",
                self.info.cluster_id
            )),
            ErrorCode::DuplicateBrokerRegistration => {
                let since = *self.duplicate_since.get_or_insert_with(Instant::now);
                let refused_for = since.elapsed();
                if refused_for < self.duplicate_timeout {
                    return Registered::Retry;
                }
                Registered::Refused(format!(
                    "the metadata quorum ({controller}) refused node {node} for {:.1} s, past \
                     the broker session timeout (DUPLICATE_BROKER_REGISTRATION): another live \
                     process is node {node}; node.id must be unique in the cluster",
                    refused_for.as_secs_f64()
                ))
            }
            _ => Registered::Retry,
        }
    }

    async fn heartbeat(&self, epoch: i64, want_shut_down: bool) -> Beat {
        let req = BrokerHeartbeatRequest {
            broker_id: self.info.node_id,
            broker_epoch: epoch,
            current_metadata_offset: (self.offset)(),
            want_fence: false,
            want_shut_down,
            ..Default::default()
        };
        match self.client.send(&req).await {
            Ok(resp) => match ErrorCode::from_code_lossy(resp.error_code) {
                ErrorCode::None => {
                    self.state.send_if_modified(|s| {
                        let next = BrokerState {
                            broker_epoch: Some(epoch),
                            fenced: resp.is_fenced,
                            caught_up: resp.is_caught_up,
                            shut_down: want_shut_down && resp.should_shut_down,
                            stopped: false,
                            refused: None,
                        };
                        let changed = *s != next;
                        *s = next;
                        changed
                    });
                    Beat::Ok {
                        should_shut_down: resp.should_shut_down,
                    }
                }
                ErrorCode::BrokerIdNotRegistered | ErrorCode::StaleBrokerEpoch => {
                    tracing::info!(
                        broker = self.info.node_id,
                        "registration lost; registering again"
                    );
                    Beat::Reregister
                }
                code => {
                    tracing::warn!(
                        broker = self.info.node_id,
                        error = code.name(),
                        "heartbeat refused"
                    );
                    Beat::Failed
                }
            },
            Err(e) => {
                tracing::warn!(broker = self.info.node_id, error = %e, "heartbeat failed");
                Beat::Failed
            }
        }
    }
}

enum Beat {
    Ok { should_shut_down: bool },
    Reregister,
    Failed,
}

/// A random version-4 UUID from the standard library's per-process random
/// hasher keys, the time and the process id.
fn random_uuid() -> Uuid {
    let mut bytes = [0u8; 16];
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    for (i, chunk) in bytes.chunks_mut(8).enumerate() {
        let mut h = RandomState::new().build_hasher();
        h.write_u128(now);
        h.write_u32(std::process::id());
        h.write_usize(i);
        chunk.copy_from_slice(&h.finish().to_be_bytes());
    }
    if let Some(b) = bytes.get_mut(6) {
        *b = (*b & 0x0f) | 0x40;
    }
    if let Some(b) = bytes.get_mut(8) {
        *b = (*b & 0x3f) | 0x80;
    }
    Uuid(bytes)
}
