//! A broker inside the test process: [`EmbeddedBroker`] starts a real weir
//! broker on 127.0.0.1 with an ephemeral port and a temporary data
//! directory, and stops it when dropped.
//!
//! The broker runs on a dedicated thread with its own tokio runtime, so
//! starting and stopping are plain blocking calls: they work from a `#[test]`
//! function without a runtime and from inside `#[tokio::test]` (current-thread
//! or multi-thread) alike, and the broker keeps serving while the caller's
//! runtime is blocked or busy. Start-up on an empty directory takes
//! milliseconds.
//!
//! Settings use Kafka's broker config names, as in `server.properties`; the
//! embedded broker differs from `weir serve`'s defaults only in where it
//! listens (`listeners=127.0.0.1:0`), where it keeps data (a fresh temporary
//! directory unless `log.dirs` is set) and in having no HTTP listener
//! (`http.listeners` empty) unless one is asked for. `WEIR_*` environment
//! variables are not read.
//!
//! ```
//! use std::io::{Read, Write};
//!
//! use bytes::BytesMut;
//! use weir_broker::EmbeddedBroker;
//! use weir_protocol::frame::{decode_response, encode_request};
//! use weir_protocol::messages::{ApiVersionsRequest, RequestBody, RequestHeader, ResponseBody};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let broker = EmbeddedBroker::builder()
//!     .set("num.partitions", "3")
//!     .start()?;
//! // Any Kafka client takes `broker.bootstrap()` ("127.0.0.1:<port>") as its
//! // bootstrap servers; here, one ApiVersions request over a plain socket.
//! let mut socket = std::net::TcpStream::connect(broker.local_addr())?;
//! let body = RequestBody::ApiVersions(ApiVersionsRequest::default());
//! let header = RequestHeader {
//!     request_api_key: body.api_key() as i16,
//!     request_api_version: 3,
//!     correlation_id: 1,
//!     client_id: Some("doc".to_string()),
//!     ..Default::default()
//! };
//! let mut frame = BytesMut::new();
//! encode_request(&mut frame, &header, &body)?;
//! socket.write_all(&frame)?;
//! let mut len = [0u8; 4];
//! socket.read_exact(&mut len)?;
//! let mut response = vec![0u8; u32::from_be_bytes(len) as usize];
//! socket.read_exact(&mut response)?;
//! let (header, body) = decode_response(response.into(), body.api_key(), 3)?;
//! assert_eq!(header.correlation_id, 1);
//! assert!(matches!(body, ResponseBody::ApiVersions(r) if r.error_code == 0));
//! broker.shutdown()?; // or drop it; the temporary data dir goes with it
//! # Ok(())
//! # }
//! ```

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use tokio::sync::oneshot;

use crate::broker::{Broker, BrokerError};
use crate::config::ConfigSources;

/// Worker threads of the embedded broker's runtime (file work runs on its
/// blocking pool, not on these).
const WORKER_THREADS: usize = 2;
/// How long dropping the runtime waits for blocking work still running
/// after the orderly shutdown has finished.
const RUNTIME_DROP_TIMEOUT: Duration = Duration::from_secs(10);

/// A running broker on its own thread. While it exists, the listener
/// accepts connections at [`EmbeddedBroker::local_addr`]; dropping it (or
/// [`EmbeddedBroker::shutdown`]) stops the broker cleanly, then removes the
/// data directory if the broker created it.
pub struct EmbeddedBroker {
    local_addr: SocketAddr,
    http_addr: Option<SocketAddr>,
    broker: Arc<Broker>,
    data_dir: PathBuf,
    /// Dropping (or sending on) it asks the broker thread to shut down.
    stop: Option<oneshot::Sender<()>>,
    /// Returns the result of the orderly shutdown.
    thread: Option<JoinHandle<Result<(), BrokerError>>>,
    /// The data directory when the broker created it; removed after the
    /// thread has been joined.
    temp_dir: Option<tempfile::TempDir>,
}

/// Settings for an [`EmbeddedBroker`], by Kafka broker config name.
#[derive(Debug, Default, Clone)]
pub struct EmbeddedBrokerBuilder {
    settings: Vec<(String, String)>,
}

impl EmbeddedBrokerBuilder {
    /// Sets broker config `name` (e.g. `num.partitions`,
    /// `group.initial.rebalance.delay.ms`); a later value for the same name
    /// wins. Values are checked by [`EmbeddedBrokerBuilder::start`].
    /// `http.listeners=127.0.0.1:0` turns the HTTP listener (`/metrics`,
    /// console) on; `log.dirs` replaces the temporary data directory with
    /// one that is kept.
    pub fn set(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }

    /// Starts the broker and returns once it accepts connections. An
    /// invalid setting is a [`BrokerError::Config`] naming it.
    pub fn start(self) -> Result<EmbeddedBroker, BrokerError> {
        let user_sets_dirs = self.settings.iter().any(|(k, _)| k.trim() == "log.dirs");
        let temp_dir = if user_sets_dirs {
            None
        } else {
            Some(
                tempfile::Builder::new()
                    .prefix("weir-embedded-")
                    .tempdir()?,
            )
        };
        let mut sources = ConfigSources::default();
        sources.set("listeners", "127.0.0.1:0");
        sources.set("http.listeners", "");
        if let Some(t) = &temp_dir {
            sources.set("log.dirs", &t.path().display().to_string());
        }
        for (k, v) in &self.settings {
            sources.set(k, v);
        }
        let config = sources
            .build()
            .map_err(|e| BrokerError::Config(e.to_string()))?;
        for k in &config.unused {
            tracing::warn!(
                "embedded broker: configuration {k} was supplied but is not used by weir"
            );
        }
        let data_dir = config
            .log_dirs
            .first()
            .cloned()
            .ok_or_else(|| BrokerError::Config("log.dirs is empty".to_string()))?;

        let (started_tx, started_rx) = mpsc::channel();
        let (stop_tx, stop_rx) = oneshot::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("weir-embedded-broker".to_string())
            .spawn(move || {
                let rt = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(WORKER_THREADS)
                    .thread_name("weir-embedded-broker-rt")
                    .enable_all()
                    .build()?;
                let running = match rt.block_on(crate::server::start(config)) {
                    Ok(r) => r,
                    Err(e) => {
                        let _ = started_tx.send(Err(e));
                        return Ok(());
                    }
                };
                let started = (
                    running.local_addr,
                    running.http_addr(),
                    running.broker.clone(),
                );
                if started_tx.send(Ok(started)).is_ok() {
                    // Err means the handle was dropped without a send: stop too
                    let _ = rt.block_on(stop_rx);
                }
                let result = rt.block_on(running.shutdown());
                rt.shutdown_timeout(RUNTIME_DROP_TIMEOUT);
                result
            })?;
        let started = started_rx.recv();
        match started {
            Ok(Ok((local_addr, http_addr, broker))) => Ok(EmbeddedBroker {
                local_addr,
                http_addr,
                broker,
                data_dir,
                stop: Some(stop_tx),
                thread: Some(thread),
                temp_dir,
            }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            // the thread ended without reporting: runtime creation failed or
            // it panicked
            Err(_) => Err(match thread.join() {
                Ok(Err(e)) => e,
                _ => thread_panicked(),
            }),
        }
    }
}

impl EmbeddedBroker {
    /// Starts a broker with the defaults (see the module doc).
    pub fn start() -> Result<EmbeddedBroker, BrokerError> {
        EmbeddedBroker::builder().start()
    }

    /// Settings for a broker to start.
    pub fn builder() -> EmbeddedBrokerBuilder {
        EmbeddedBrokerBuilder::default()
    }

    /// `host:port` for a client's `bootstrap.servers`.
    pub fn bootstrap(&self) -> String {
        self.local_addr.to_string()
    }

    /// The bound Kafka listener.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// The bound HTTP listener (`/metrics`, console), when `http.listeners`
    /// was set.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The data directory (the first `log.dirs` entry).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The broker's shared state, for looking inside in tests (metrics,
    /// topics, groups).
    pub fn broker(&self) -> &Arc<Broker> {
        &self.broker
    }

    /// Stops the broker as `weir serve` does on SIGTERM (connections finish
    /// their current request; logs are flushed and checkpointed), then
    /// removes the temporary data directory. Returns what the shutdown
    /// reported.
    pub fn shutdown(mut self) -> Result<(), BrokerError> {
        self.stop()
    }

    fn stop(&mut self) -> Result<(), BrokerError> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        let stopped = thread.join().unwrap_or_else(|_| Err(thread_panicked()));
        // every file is closed now
        let removed = match self.temp_dir.take() {
            Some(dir) => dir.close(),
            None => Ok(()),
        };
        stopped?;
        Ok(removed?)
    }
}

fn thread_panicked() -> BrokerError {
    BrokerError::Config("the embedded broker thread panicked".to_string())
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::warn!(
                "embedded broker on {}: shutdown failed: {e}",
                self.local_addr
            );
        }
    }
}

impl std::fmt::Debug for EmbeddedBroker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddedBroker")
            .field("local_addr", &self.local_addr)
            .field("http_addr", &self.http_addr)
            .field("data_dir", &self.data_dir)
            .finish()
    }
}
