//! Broker configuration, named like Kafka's broker configs.
//!
//! Sources, later ones win: embedded defaults, a `server.properties`-style
//! file, `WEIR_*` environment variables (`WEIR_LOG_DIRS` → `log.dirs`), then
//! `--set name=value` pairs and the CLI shorthands. [`BrokerConfig::from_pairs`]
//! is the single place values are parsed and validated, so every source gives
//! the same error for the same bad value.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::configdef::{self, ConfigValueError};
use crate::topic_config::ConfigSource;

/// A configuration problem. Rendered as one line for the CLI.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("invalid value {value:?} for {name}: {reason}")]
    InvalidValue {
        name: String,
        value: String,
        reason: String,
    },
    #[error("cannot read config file {path}: {source}")]
    ReadFile {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path}:{line}: expected name=value")]
    Syntax { path: PathBuf, line: usize },
    #[error("--set expects name=value, got {arg:?}")]
    BadOverride { arg: String },
    #[error(
        "{flag} {value} disagrees with {name}={setting} set in the config file, a WEIR_ variable or --set: give one of them"
    )]
    ShorthandConflict {
        flag: &'static str,
        value: String,
        name: &'static str,
        setting: String,
    },
}

/// A listener address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listener {
    pub host: String,
    pub port: u16,
}

/// The security protocols weir serves on a client listener (all four of
/// Kafka's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SecurityProtocol {
    Plaintext,
    Ssl,
    SaslPlaintext,
    SaslSsl,
}

impl SecurityProtocol {
    /// Kafka's name.
    pub fn name(self) -> &'static str {
        match self {
            SecurityProtocol::Plaintext => "PLAINTEXT",
            SecurityProtocol::Ssl => "SSL",
            SecurityProtocol::SaslPlaintext => "SASL_PLAINTEXT",
            SecurityProtocol::SaslSsl => "SASL_SSL",
        }
    }

    /// Kafka's id (`SecurityProtocol.id`), as in broker registrations.
    pub fn id(self) -> i16 {
        match self {
            SecurityProtocol::Plaintext => 0,
            SecurityProtocol::Ssl => 1,
            SecurityProtocol::SaslPlaintext => 2,
            SecurityProtocol::SaslSsl => 3,
        }
    }

    /// Whether connections start with a TLS handshake.
    pub fn uses_tls(self) -> bool {
        matches!(self, SecurityProtocol::Ssl | SecurityProtocol::SaslSsl)
    }

    /// Whether clients must authenticate with SASL before anything else.
    pub fn uses_sasl(self) -> bool {
        matches!(
            self,
            SecurityProtocol::SaslPlaintext | SecurityProtocol::SaslSsl
        )
    }
}

/// One entry of `listeners` (or `advertised.listeners`): its name (upper
/// case; a scheme-less `host:port` is `PLAINTEXT`), the security protocol
/// `listener.security.protocol.map` gives that name (the name itself when
/// the map has no entry for it) and its address.
#[derive(Debug, Clone, PartialEq, Eq)]
struct ListenerEntry {
    name: String,
    protocol: String,
    text: String,
    address: Listener,
}

/// Splits a listener list into its entries; each name at most once.
fn listener_entries(s: &str, protocol_map: &str) -> Result<Vec<ListenerEntry>, String> {
    let protocol_of = |name: &str| -> String {
        protocol_map
            .split(',')
            .filter_map(|m| m.split_once(':'))
            .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .map_or(name, |(_, p)| p.trim())
            .to_ascii_uppercase()
    };
    let mut out: Vec<ListenerEntry> = Vec::new();
    for e in s.split(',').map(str::trim).filter(|l| !l.is_empty()) {
        let (name, rest) = match e.split_once("://") {
            Some((name, rest)) => (name.trim().to_ascii_uppercase(), rest),
            None => ("PLAINTEXT".to_string(), e),
        };
        if out.iter().any(|o| o.name == name) {
            return Err(format!("listener name {name} appears twice"));
        }
        out.push(ListenerEntry {
            protocol: protocol_of(&name),
            name,
            text: e.to_string(),
            address: Listener::parse_address(rest)?,
        });
    }
    if out.is_empty() {
        return Err("empty listener".to_string());
    }
    Ok(out)
}

/// The client listeners among `entries` (those not named in `skip`, the
/// `controller.listener.names`), each with its protocol.
fn client_entries(
    entries: Vec<ListenerEntry>,
    skip: &[String],
) -> Result<Vec<(ListenerEntry, SecurityProtocol)>, String> {
    let mut out = Vec::new();
    for e in entries {
        if skip.iter().any(|n| n.eq_ignore_ascii_case(&e.name)) {
            continue;
        }
        let protocol = match e.protocol.as_str() {
            "PLAINTEXT" => SecurityProtocol::Plaintext,
            "SSL" => SecurityProtocol::Ssl,
            "SASL_PLAINTEXT" => SecurityProtocol::SaslPlaintext,
            "SASL_SSL" => SecurityProtocol::SaslSsl,
            _ => {
                return Err(format!(
                    "no security protocol for listener {} in listener.security.protocol.map",
                    e.name
                ));
            }
        };
        out.push((e, protocol));
    }
    Ok(out)
}

/// A client listener as configured: `listeners` entry, protocol,
/// `advertised.listeners` entry and, for SSL, its TLS settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientListener {
    /// Upper case, e.g. `PLAINTEXT`, `SSL`, `EXTERNAL`.
    pub name: String,
    pub protocol: SecurityProtocol,
    pub address: Listener,
    /// Its `advertised.listeners` entry; None: the bound address is
    /// advertised.
    pub advertised: Option<Listener>,
    /// Some exactly for SSL and SASL_SSL listeners.
    pub tls: Option<crate::tls::TlsSettings>,
    /// Some exactly for SASL_PLAINTEXT and SASL_SSL listeners.
    pub sasl: Option<crate::sasl::ListenerSasl>,
}

impl Listener {
    /// [`Listener::parse_with_map`] without a `listener.security.protocol.map`.
    pub fn parse(s: &str) -> Result<Listener, String> {
        Listener::parse_with_map(s, "")
    }

    /// Parses `NAME://host:port`, `host:port` or a comma-separated list of
    /// those and returns the first client listener's address. Every entry
    /// needs a security protocol (PLAINTEXT, SSL, SASL_PLAINTEXT or
    /// SASL_SSL, by scheme or through `protocol_map`, Kafka's
    /// `listener.security.protocol.map`, `NAME:PROTOCOL,…`).
    pub fn parse_with_map(s: &str, protocol_map: &str) -> Result<Listener, String> {
        Listener::parse_excluding(s, protocol_map, &[])
    }

    /// [`Listener::parse_with_map`], never choosing a listener whose name
    /// is in `skip` (the `controller.listener.names`).
    pub fn parse_excluding(
        s: &str,
        protocol_map: &str,
        skip: &[String],
    ) -> Result<Listener, String> {
        let clients = client_entries(listener_entries(s, protocol_map)?, skip)?;
        clients
            .into_iter()
            .next()
            .map(|(e, _)| e.address)
            .ok_or_else(|| "no client listener (only controller listeners)".to_string())
    }

    /// Parses `host:port` (`[v6]:port`; an empty host is all interfaces).
    fn parse_address(rest: &str) -> Result<Listener, String> {
        let (host, port) = rest
            .rsplit_once(':')
            .ok_or_else(|| format!("expected host:port, got {rest:?}"))?;
        let port: u16 = port.parse().map_err(|_| format!("invalid port {port:?}"))?;
        let host = host.trim_start_matches('[').trim_end_matches(']');
        Ok(Listener {
            host: host.to_string(),
            port,
        })
    }

    /// The address to bind: an empty host means all interfaces.
    pub fn bind_addr(&self) -> Result<SocketAddr, String> {
        let host = if self.host.is_empty() {
            "0.0.0.0"
        } else {
            &self.host
        };
        let s = if host.contains(':') {
            format!("[{host}]:{}", self.port)
        } else {
            format!("{host}:{}", self.port)
        };
        if let Ok(a) = s.parse() {
            return Ok(a);
        }
        use std::net::ToSocketAddrs;
        s.to_socket_addrs()
            .map_err(|e| format!("cannot resolve {s}: {e}"))?
            .next()
            .ok_or_else(|| format!("cannot resolve {s}"))
    }
}

/// The broker's configuration. Always valid: built only by
/// [`BrokerConfig::from_pairs`], which checks every value.
#[derive(Debug, Clone)]
pub struct BrokerConfig {
    pub node_id: i32,
    /// The inter-broker listener's address: `inter.broker.listener.name`,
    /// else the first PLAINTEXT client listener, else the first one. Its
    /// advertised address is where the other brokers of a cluster reach
    /// this one (replica fetchers, transaction markers: PLAINTEXT clients,
    /// so a cluster member's is always PLAINTEXT); a cluster member
    /// registers it beside its other client listeners.
    pub listener: Listener,
    /// The inter-broker listener's `advertised.listeners` entry.
    pub advertised_listener: Option<Listener>,
    /// Every client listener of `listeners` (not the controller ones), in
    /// the order given; never empty. Each is bound and serves clients.
    pub listeners: Vec<ClientListener>,
    /// The listener named in `controller.listener.names` (`CONTROLLER://…`
    /// in Kafka's server.properties), as `(name, address)`. Opened only in
    /// a cluster ([`BrokerConfig::is_cluster`]); a single node is its own
    /// controller quorum.
    pub controller_listener: Option<(String, Listener)>,
    /// `process.roles`: `broker`, `controller` or both (sorted); both by
    /// default.
    pub process_roles: Vec<String>,
    /// `controller.quorum.voters`: node id → `host:port` of its CONTROLLER
    /// listener. Empty, or only this node, for a single node.
    pub quorum_voters: BTreeMap<i32, String>,
    /// `http.listeners`: where `/metrics` and the console are served; None
    /// when set to the empty string.
    pub http_listener: Option<Listener>,
    /// `http.allowed.hosts` (weir): more `Host` names the HTTP listener
    /// answers (see `http::host`); `*` = any.
    pub http_allowed_hosts: Vec<String>,
    /// TLS (`https://`, `http.ssl.*`) and basic authentication
    /// (`http.basic.auth.*`) of the HTTP listener (weir); an address other
    /// than loopback has one of them or `http.insecure.allow`.
    pub http_security: crate::http::security::HttpSecurity,
    pub log_dirs: Vec<PathBuf>,
    pub auto_create_topics_enable: bool,
    pub num_partitions: i32,
    pub default_replication_factor: i16,
    /// `socket.request.max.bytes`: largest accepted request frame.
    pub socket_request_max_bytes: u32,
    /// `queued.max.request.bytes`: broker-wide budget of memory for request
    /// frames being received or handled; None = unbounded (-1).
    pub queued_max_request_bytes: Option<u64>,
    /// `fetch.inline.max.bytes` (weir): a fetch response carrying at most
    /// this many bytes of record data is read into memory and sent with one
    /// write; larger ones use sendfile. 0 = always sendfile.
    pub fetch_inline_max_bytes: usize,
    pub max_connections: u32,
    pub max_connections_per_ip: u32,
    pub connections_max_idle_ms: u64,
    pub num_recovery_threads_per_data_dir: usize,
    pub log_flush_scheduler_interval_ms: u64,
    /// Every broker config that was set explicitly (Kafka name → value), for
    /// DescribeConfigs sources and topic-config defaults.
    pub explicit: BTreeMap<String, String>,
    /// Dynamic broker configs set cluster-wide (`<default>` resource); they
    /// win over `explicit`. Only configs whose [`DynamicMode`] allows it,
    /// validated when set (see `dynamic_config`).
    ///
    /// [`DynamicMode`]: crate::configdef::DynamicMode
    pub dynamic_default: BTreeMap<String, String>,
    /// Dynamic configs set for this broker; they win over `dynamic_default`.
    pub dynamic_broker: BTreeMap<String, String>,
    /// Keys that were supplied but are not used by weir.
    pub unused: Vec<String>,
    /// `authorizer.class.name` naming Kafka's StandardAuthorizer turns ACLs
    /// on with these settings (`super.users`,
    /// `allow.everyone.if.no.acl.found`); None: no authorizer.
    pub authorizer: Option<weir_acl::AuthorizerConfig>,
}

impl Default for BrokerConfig {
    // The embedded defaults are constants, and
    // `defaults_match_the_documented_embedded_defaults` builds them.
    #[allow(clippy::expect_used)]
    fn default() -> Self {
        BrokerConfig::from_pairs(std::iter::empty::<(String, String)>())
            .expect("embedded defaults are valid")
    }
}

pub const DEFAULT_LISTENER: &str = "PLAINTEXT://127.0.0.1:9092";
pub const DEFAULT_LOG_DIR: &str = "./weir-data";

fn invalid(name: &str, value: &str, reason: impl Into<String>) -> ConfigError {
    ConfigError::InvalidValue {
        name: name.to_string(),
        value: value.to_string(),
        reason: reason.into(),
    }
}

impl BrokerConfig {
    /// Whether this node is one of several: `controller.quorum.voters`
    /// names other nodes too, or it has only one of the two roles.
    pub fn is_cluster(&self) -> bool {
        self.quorum_voters.keys().any(|id| *id != self.node_id) || !self.is_combined()
    }

    /// Whether `process.roles` has `broker`.
    pub fn is_broker(&self) -> bool {
        self.process_roles.iter().any(|r| r == "broker")
    }

    /// Whether `process.roles` has `controller`.
    pub fn is_controller(&self) -> bool {
        self.process_roles.iter().any(|r| r == "controller")
    }

    /// Whether this node is both broker and controller (the default).
    pub fn is_combined(&self) -> bool {
        self.is_broker() && self.is_controller()
    }

    /// The cluster id this node must have: `cluster.id` when set, else for
    /// a cluster member one derived from `controller.quorum.voters` (so
    /// every node of the same quorum agrees without a format step), else
    /// none (a single node makes a random one on first start).
    pub fn cluster_id(&self) -> Option<String> {
        if let Some(id) = self.explicit.get("cluster.id") {
            return Some(id.clone());
        }
        if !self.is_cluster() {
            return None;
        }
        let voters: Vec<String> = self
            .quorum_voters
            .iter()
            .map(|(id, addr)| format!("{id}@{addr}"))
            .collect();
        let text = voters.join(",");
        // Two FNV-1a hashes with different offsets: 16 stable bytes.
        let fnv = |offset: u64| {
            text.bytes().fold(offset, |h, b| {
                (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
            })
        };
        let id =
            (u128::from(fnv(0xcbf2_9ce4_8422_2325)) << 64) | u128::from(fnv(0x8422_2325_cbf2_9ce4));
        Some(weir_protocol::Uuid(id.to_be_bytes()).to_string())
    }

    /// Builds and validates a configuration from explicitly set
    /// `(name, value)` pairs (later pairs override earlier ones).
    pub fn from_pairs<K, V>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Result<BrokerConfig, ConfigError>
    where
        K: Into<String>,
        V: Into<String>,
    {
        let mut explicit = BTreeMap::new();
        for (k, v) in pairs {
            explicit.insert(k.into().trim().to_string(), v.into().trim().to_string());
        }
        // `log.dir` is Kafka's single-directory spelling.
        if let Some(d) = explicit.remove("log.dir") {
            explicit.entry("log.dirs".to_string()).or_insert(d);
        }
        let mut unused = Vec::new();
        for (k, v) in &explicit {
            // `listener.name.<name>.ssl.…` overrides `ssl.…` for a listener
            let def = configdef::broker_def(k)
                .or_else(|| listener_override(k).and_then(|(_, base)| override_def(base)));
            match def {
                Some(def) => def
                    .validate(v)
                    .map_err(|ConfigValueError(reason)| invalid(k, v, reason))?,
                None => unused.push(k.clone()),
            }
        }
        let get = |name: &str| -> String {
            explicit
                .get(name)
                .cloned()
                .or_else(|| configdef::broker_def(name).and_then(|d| d.default.map(String::from)))
                .unwrap_or_default()
        };
        let int = |name: &str| -> Result<i64, ConfigError> {
            let v = get(name);
            v.parse::<i64>()
                .map_err(|_| invalid(name, &v, "expected an integer"))
        };
        let listener_s = get("listeners");
        let node_id = int("node.id")?;
        if !(0..=i32::MAX as i64).contains(&node_id) {
            return Err(invalid(
                "node.id",
                &node_id.to_string(),
                "must be 0..2147483647",
            ));
        }
        let kraft = kraft(&explicit, &get, node_id as i32)?;
        let listeners = if kraft.roles.iter().any(|r| r == "broker") {
            client_listeners(&explicit, &get, &kraft.controller_names)?
        } else {
            Vec::new()
        };
        if let Some(l) = inter_broker(&listeners, explicit.get("inter.broker.listener.name"))
            .filter(|l| l.protocol != SecurityProtocol::Plaintext)
            && explicit.contains_key("inter.broker.listener.name")
        {
            return Err(invalid(
                "inter.broker.listener.name",
                &l.name,
                "the inter-broker listener must be PLAINTEXT: weir's broker-to-broker clients \
                 (transaction markers, replication) do not speak TLS yet",
            ));
        }
        let (listener, advertised_listener) = match (
            inter_broker(&listeners, explicit.get("inter.broker.listener.name")),
            &kraft.controller_listener,
        ) {
            (Some(l), _) => (l.address.clone(), l.advertised.clone()),
            // A controller-only node has no client listener; its CONTROLLER
            // listener stands in (nothing opens `listener` there).
            (None, Some((_, l))) => (l.clone(), None),
            (None, None) => {
                return Err(invalid("listeners", &listener_s, "no client listener"));
            }
        };
        let http_s = get("http.listeners");
        let http_parsed = crate::http::security::parse_listener(&http_s)
            .map_err(|e| invalid("http.listeners", &http_s, e))?;
        let http_security =
            crate::http::security::HttpSecurity::parse(http_parsed.as_ref(), &|name: &str| {
                explicit.get(name).cloned()
            })
            .map_err(|e| invalid(&e.name, &e.value, e.reason))?;
        let http_listener = http_parsed.map(|(l, _)| l);
        let allowed_s = get("http.allowed.hosts");
        let http_allowed_hosts: Vec<String> = allowed_s
            .split(',')
            .map(str::trim)
            .filter(|h| !h.is_empty())
            .map(|h| {
                crate::http::host::validate_allowed(h)
                    .map(|()| h.to_string())
                    .map_err(|e| invalid("http.allowed.hosts", &allowed_s, e))
            })
            .collect::<Result<_, _>>()?;
        let log_dirs: Vec<PathBuf> = get("log.dirs")
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect();
        if log_dirs.is_empty() {
            return Err(invalid("log.dirs", &get("log.dirs"), "no directory given"));
        }
        let positive = |name: &str, v: i64| -> Result<i64, ConfigError> {
            if v < 1 {
                Err(invalid(name, &v.to_string(), "must be at least 1"))
            } else {
                Ok(v)
            }
        };
        let auto_create = get("auto.create.topics.enable");
        let authorizer = authorizer_config(&get)?;
        let cfg = BrokerConfig {
            node_id: node_id as i32,
            listener,
            advertised_listener,
            listeners,
            controller_listener: kraft.controller_listener,
            process_roles: kraft.roles,
            quorum_voters: kraft.voters,
            http_listener,
            http_allowed_hosts,
            http_security,
            log_dirs,
            auto_create_topics_enable: auto_create.eq_ignore_ascii_case("true"),
            num_partitions: positive("num.partitions", int("num.partitions")?)?.min(i32::MAX as i64)
                as i32,
            default_replication_factor: positive(
                "default.replication.factor",
                int("default.replication.factor")?,
            )?
            .min(i16::MAX as i64) as i16,
            socket_request_max_bytes: positive(
                "socket.request.max.bytes",
                int("socket.request.max.bytes")?,
            )?
            .min(i32::MAX as i64) as u32,
            queued_max_request_bytes: match int("queued.max.request.bytes")? {
                -1 => None,
                n if n >= 1 => Some(n as u64),
                n => {
                    return Err(invalid(
                        "queued.max.request.bytes",
                        &n.to_string(),
                        "must be -1 (unbounded) or at least 1",
                    ));
                }
            },
            fetch_inline_max_bytes: int("fetch.inline.max.bytes")?.clamp(0, i32::MAX as i64)
                as usize,
            max_connections: positive("max.connections", int("max.connections")?)?
                .min(u32::MAX as i64) as u32,
            max_connections_per_ip: positive(
                "max.connections.per.ip",
                int("max.connections.per.ip")?,
            )?
            .min(u32::MAX as i64) as u32,
            connections_max_idle_ms: positive(
                "connections.max.idle.ms",
                int("connections.max.idle.ms")?,
            )? as u64,
            num_recovery_threads_per_data_dir: positive(
                "num.recovery.threads.per.data.dir",
                int("num.recovery.threads.per.data.dir")?,
            )?
            .min(1024) as usize,
            log_flush_scheduler_interval_ms: positive(
                "log.flush.scheduler.interval.ms",
                int("log.flush.scheduler.interval.ms")?,
            )? as u64,
            explicit,
            dynamic_default: BTreeMap::new(),
            dynamic_broker: BTreeMap::new(),
            unused,
            authorizer,
        };
        // A cluster member registers every client listener, and clients are
        // sent to the other brokers' listener of the same name; but brokers
        // reach each other (replication, transaction markers) on the
        // inter-broker listener, which must be PLAINTEXT.
        if cfg.is_cluster()
            && let Some(l) = cfg
                .inter_broker_listener()
                .filter(|l| l.protocol != SecurityProtocol::Plaintext)
        {
            return Err(invalid(
                "listeners",
                &listener_s,
                format!(
                    "a cluster member needs a PLAINTEXT listener for inter-broker traffic \
                     (replication, transaction markers), and {} is {}: add one, bound to a \
                     private address if clients should not use it (inter.broker.listener.name \
                     names it when there are several)",
                    l.name,
                    l.protocol.name()
                ),
            ));
        }
        if cfg.default_replication_factor > 1 && !cfg.is_cluster() {
            return Err(invalid(
                "default.replication.factor",
                &cfg.default_replication_factor.to_string(),
                "a single node holds one replica; replication factor must be 1",
            ));
        }
        Ok(cfg)
    }

    /// The value of a broker config: dynamic for this broker, else dynamic
    /// cluster-wide, else explicit, else its default (None when the config
    /// has no default, like Kafka's null).
    pub fn value(&self, name: &str) -> Option<String> {
        self.layers()
            .iter()
            .find_map(|(m, _)| m.get(name).cloned())
            .or_else(|| configdef::broker_def(name).and_then(|d| d.default.map(String::from)))
    }

    /// The set values, highest precedence first, with their
    /// DescribeConfigs source (Kafka's `DynamicBrokerConfig` order).
    pub fn layers(&self) -> [(&BTreeMap<String, String>, ConfigSource); 3] {
        [
            (&self.dynamic_broker, ConfigSource::DynamicBroker),
            (&self.dynamic_default, ConfigSource::DynamicDefaultBroker),
            (&self.explicit, ConfigSource::StaticBroker),
        ]
    }

    /// This configuration with the given dynamic layers in place of its own.
    pub fn with_dynamic(
        &self,
        cluster_default: &BTreeMap<String, String>,
        this_broker: &BTreeMap<String, String>,
    ) -> BrokerConfig {
        BrokerConfig {
            dynamic_default: cluster_default.clone(),
            dynamic_broker: this_broker.clone(),
            ..self.clone()
        }
    }

    /// A numeric broker config: its explicit value, else its default from
    /// the one table of defaults (`configdef`). Values were validated
    /// against their definitions when the config was built, so this is
    /// `None` only for a name without a numeric definition or default.
    pub fn number(&self, name: &str) -> Option<f64> {
        self.value(name).and_then(|v| v.trim().parse::<f64>().ok())
    }

    /// [`BrokerConfig::number`] of an integer config (Int, Long, Short).
    pub fn integer(&self, name: &str) -> Option<i64> {
        self.value(name).and_then(|v| v.trim().parse::<i64>().ok())
    }
}

/// Splits `listener.name.<name>.<config>` into the listener name (as
/// written, Kafka writes it in lower case) and the config it overrides;
/// `ssl.*` configs, `sasl.enabled.mechanisms`, `sasl.oauthbearer.*` and
/// `<mechanism>.sasl.jaas.config` (OAUTHBEARER also
/// `oauthbearer.sasl.server.callback.handler.class` and
/// `oauthbearer.sasl.oauthbearer.*`) have per-listener forms here.
fn listener_override(key: &str) -> Option<(&str, &str)> {
    let rest = key.strip_prefix("listener.name.")?;
    let (name, base) = rest.split_once('.')?;
    (!name.is_empty() && override_def(base).is_some()).then_some((name, base))
}

/// The definition a per-listener config `base` is checked against.
fn override_def(base: &str) -> Option<&'static configdef::ConfigDef> {
    if crate::tls::SSL_SETTINGS.contains(&base) || crate::sasl::SASL_SETTINGS.contains(&base) {
        return configdef::broker_def(base);
    }
    let (mechanism, setting) = base.split_once('.')?;
    let mechanism = crate::sasl::Mechanism::from_name(&mechanism.to_ascii_uppercase())?;
    if !crate::sasl::mechanism_setting(mechanism, setting) {
        return None;
    }
    match setting {
        "sasl.jaas.config" => Some(&configdef::LISTENER_SASL_JAAS_CONFIG),
        "sasl.server.callback.handler.class" => {
            Some(&configdef::LISTENER_SASL_SERVER_CALLBACK_HANDLER_CLASS)
        }
        _ => configdef::broker_def(setting),
    }
}

/// The inter-broker listener among `listeners` (see
/// [`BrokerConfig::listener`]).
fn inter_broker<'a>(
    listeners: &'a [ClientListener],
    name: Option<&String>,
) -> Option<&'a ClientListener> {
    name.and_then(|n| listeners.iter().find(|l| l.name.eq_ignore_ascii_case(n)))
        .or_else(|| {
            listeners
                .iter()
                .find(|l| l.protocol == SecurityProtocol::Plaintext)
        })
        .or_else(|| listeners.first())
}

impl BrokerConfig {
    /// The inter-broker listener (see [`BrokerConfig::listener`]); None on
    /// a controller-only node.
    pub fn inter_broker_listener(&self) -> Option<&ClientListener> {
        inter_broker(
            &self.listeners,
            self.explicit.get("inter.broker.listener.name"),
        )
    }
}

/// The client listeners of `listeners` with their advertised addresses
/// and, for SSL ones, their TLS settings.
fn client_listeners(
    explicit: &BTreeMap<String, String>,
    get: &dyn Fn(&str) -> String,
    controller_names: &[String],
) -> Result<Vec<ClientListener>, ConfigError> {
    let map = get("listener.security.protocol.map");
    let listeners_s = get("listeners");
    let entries = listener_entries(&listeners_s, &map)
        .and_then(|e| client_entries(e, controller_names))
        .map_err(|e| invalid("listeners", &listeners_s, e))?;
    if entries.is_empty() {
        return Err(invalid("listeners", &listeners_s, "no client listener"));
    }
    let mut ports = std::collections::BTreeSet::new();
    for (e, _) in &entries {
        if e.address.port != 0 && !ports.insert(e.address.port) {
            return Err(invalid(
                "listeners",
                &listeners_s,
                format!("port {} is used by two listeners", e.address.port),
            ));
        }
        e.address
            .bind_addr()
            .map_err(|reason| invalid("listeners", &listeners_s, reason))?;
    }
    let mut advertised: BTreeMap<String, Listener> = BTreeMap::new();
    if let Some(s) = explicit
        .get("advertised.listeners")
        .filter(|s| !s.is_empty())
    {
        let bad = |reason: String| invalid("advertised.listeners", s, reason);
        let adv = listener_entries(s, &map)
            .and_then(|e| client_entries(e, controller_names))
            .map_err(bad)?;
        for (a, _) in adv {
            if !entries.iter().any(|(e, _)| e.name == a.name) {
                return Err(bad(format!(
                    "listener {} is not among the listeners ({listeners_s})",
                    a.name
                )));
            }
            if a.address.host.is_empty() || a.address.port == 0 {
                return Err(bad(format!("{} needs a concrete host and port", a.text)));
            }
            advertised.insert(a.name, a.address);
        }
    }
    entries
        .into_iter()
        .map(|(e, protocol)| {
            let tls = match protocol.uses_tls() {
                false => None,
                true => Some(tls_settings(explicit, &e.name, protocol)?),
            };
            let sasl = match protocol.uses_sasl() {
                false => None,
                true => Some(sasl_settings(explicit, &e.name)?),
            };
            Ok(ClientListener {
                advertised: advertised.remove(&e.name),
                name: e.name,
                protocol,
                address: e.address,
                tls,
                sasl,
            })
        })
        .collect()
}

/// The TLS settings of SSL listener `name`: each `ssl.*` value from
/// `listener.name.<name>.ssl.*` (the name in any case), else `ssl.*`.
///
/// On a SASL_SSL listener `ssl.client.auth` counts only in its
/// per-listener form, as in Kafka (`SaslChannelBuilder`): a broker-wide
/// `ssl.client.auth=required` meant for its SSL listeners would otherwise
/// refuse every password-only client of its SASL_SSL ones.
fn tls_settings(
    explicit: &BTreeMap<String, String>,
    name: &str,
    protocol: SecurityProtocol,
) -> Result<crate::tls::TlsSettings, ConfigError> {
    let sasl = protocol == SecurityProtocol::SaslSsl;
    if sasl && explicit.get("ssl.client.auth").is_some_and(|v| v != "none") {
        tracing::warn!(
            listener = name,
            "ssl.client.auth applies to SSL listeners only; set listener.name.{}.ssl.client.auth \
             to ask this SASL_SSL listener's clients for certificates",
            name.to_ascii_lowercase()
        );
    }
    let get = |config: &str| -> Option<(String, String)> {
        let own = explicit.iter().find(|(k, _)| {
            listener_override(k)
                .is_some_and(|(l, base)| base == config && l.eq_ignore_ascii_case(name))
        });
        let broker_wide = if sasl && config == "ssl.client.auth" {
            None
        } else {
            explicit.get_key_value(config)
        };
        own.or(broker_wide)
            .map(|(k, v)| (k.clone(), v.clone()))
            .or_else(|| {
                configdef::broker_def(config)
                    .and_then(|d| d.default)
                    .map(|d| (config.to_string(), d.to_string()))
            })
    };
    crate::tls::TlsSettings::parse(name, &get).map_err(|e| invalid(&e.name, &e.value, e.reason))
}

/// The SASL settings of SASL listener `name`:
/// `listener.name.<name>.sasl.enabled.mechanisms` (the name in any case),
/// else `sasl.enabled.mechanisms`, and each mechanism's
/// `listener.name.<name>.<mechanism>.sasl.jaas.config`.
fn sasl_settings(
    explicit: &BTreeMap<String, String>,
    name: &str,
) -> Result<crate::sasl::ListenerSasl, ConfigError> {
    let own = |config: &str| {
        explicit
            .iter()
            .find(|(k, _)| {
                listener_override(k)
                    .is_some_and(|(l, base)| l.eq_ignore_ascii_case(name) && base == config)
            })
            .map(|(k, v)| (k.clone(), v.clone()))
    };
    let get = |config: &str| -> Option<String> {
        match config.strip_prefix("listener.name.") {
            Some(rest) => rest.split_once('.').and_then(|(_, base)| own(base)),
            None => own(config).or_else(|| {
                explicit
                    .get_key_value(config)
                    .map(|(k, v)| (k.clone(), v.clone()))
            }),
        }
        .map(|(_, v)| v)
    };
    crate::sasl::ListenerSasl::parse(name, &get).map_err(|reason| {
        let setting = own("sasl.enabled.mechanisms")
            .map_or_else(|| "sasl.enabled.mechanisms".to_string(), |(k, _)| k);
        let value = get("sasl.enabled.mechanisms").unwrap_or_default();
        invalid(&setting, &value, reason)
    })
}

/// What the KRaft settings say, once validated.
struct Kraft {
    roles: Vec<String>,
    /// `controller.listener.names`, never the client listener.
    controller_names: Vec<String>,
    controller_listener: Option<(String, Listener)>,
    voters: BTreeMap<i32, String>,
}

/// Validates Kafka's KRaft settings (`process.roles`, `controller.quorum.*`,
/// `controller.listener.names`, `inter.broker.listener.name`) for weir's
/// single node, which is broker and controller. With none set this accepts
/// the defaults. A setting that describes other nodes is refused.
fn kraft(
    explicit: &BTreeMap<String, String>,
    get: &dyn Fn(&str) -> String,
    node_id: i32,
) -> Result<Kraft, ConfigError> {
    let list = |name: &str| -> Vec<String> {
        get(name)
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(String::from)
            .collect()
    };
    let roles_s = get("process.roles");
    let mut roles = list("process.roles");
    for r in &mut roles {
        *r = r.to_ascii_lowercase();
        if r != "broker" && r != "controller" {
            return Err(invalid(
                "process.roles",
                &roles_s,
                format!("unknown role {r:?}: expected broker, controller or both"),
            ));
        }
    }
    roles.sort();
    roles.dedup();
    if roles.is_empty() {
        return Err(invalid(
            "process.roles",
            &roles_s,
            "expected broker, controller or both",
        ));
    }
    let voters_s = get("controller.quorum.voters");
    let mut voters = BTreeMap::new();
    for v in list("controller.quorum.voters") {
        let parsed = v.split_once('@').and_then(|(id, addr)| {
            let id = id.trim().parse::<i32>().ok().filter(|id| *id >= 0)?;
            let l = Listener::parse_address(addr.trim()).ok()?;
            (l.port != 0).then(|| (id, addr.trim().to_string()))
        });
        let Some((id, addr)) = parsed else {
            return Err(invalid(
                "controller.quorum.voters",
                &voters_s,
                format!(
                    "expected id@host:port entries with a non-negative id and a port, got {v:?}"
                ),
            ));
        };
        if voters.insert(id, addr).is_some() {
            return Err(invalid(
                "controller.quorum.voters",
                &voters_s,
                format!("names node {id} twice"),
            ));
        }
    }
    let voter_ids: Vec<i32> = voters.keys().copied().collect();
    let controller = roles.iter().any(|r| r == "controller");
    let broker = roles.iter().any(|r| r == "broker");
    if controller && !voter_ids.is_empty() && !voter_ids.contains(&node_id) {
        return Err(invalid(
            "controller.quorum.voters",
            &voters_s,
            format!(
                "node.id {node_id} must be among the voters when process.roles contains controller"
            ),
        ));
    }
    if !controller {
        // A broker-only node fetches the metadata log from the voters.
        if voter_ids.is_empty() {
            return Err(invalid(
                "controller.quorum.voters",
                &voters_s,
                "a broker-only node (process.roles=broker) needs the controller quorum's voters",
            ));
        }
        if voter_ids.contains(&node_id) {
            return Err(invalid(
                "controller.quorum.voters",
                &voters_s,
                format!(
                    "node.id {node_id} is a voter, but process.roles=broker: a voter is a controller"
                ),
            ));
        }
    }
    if !broker && voter_ids.is_empty() {
        return Err(invalid(
            "controller.quorum.voters",
            &voters_s,
            "a controller-only node (process.roles=controller) needs controller.quorum.voters",
        ));
    }
    let bootstrap_s = get("controller.quorum.bootstrap.servers");
    let bootstrap = list("controller.quorum.bootstrap.servers");
    for b in &bootstrap {
        Listener::parse_address(b)
            .map_err(|e| invalid("controller.quorum.bootstrap.servers", &bootstrap_s, e))?;
    }
    if bootstrap.len() > 1 {
        return Err(invalid(
            "controller.quorum.bootstrap.servers",
            &bootstrap_s,
            "names more than one controller: list the quorum in controller.quorum.voters \
             (dynamic quorums are not supported)",
        ));
    }

    // Listener names → addresses, and the security protocol of each name.
    let listeners_s = get("listeners");
    let named: Vec<(String, &str)> = listeners_s
        .split(',')
        .map(str::trim)
        .filter_map(|e| e.split_once("://"))
        .map(|(n, rest)| (n.to_ascii_uppercase(), rest))
        .collect();
    let map_s = get("listener.security.protocol.map");
    let map_explicit = explicit.contains_key("listener.security.protocol.map");
    let mapped = |name: &str| -> Option<String> {
        map_s
            .split(',')
            .filter_map(|m| m.split_once(':'))
            .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
            .map(|(_, p)| p.trim().to_ascii_uppercase())
    };
    let names_s = get("controller.listener.names");
    let controller_names: Vec<String> = list("controller.listener.names")
        .into_iter()
        .map(|n| n.to_ascii_uppercase())
        .collect();
    if controller_names.is_empty() && explicit.contains_key("process.roles") {
        return Err(invalid(
            "controller.listener.names",
            &names_s,
            "must name the CONTROLLER listener when process.roles contains controller",
        ));
    }
    let mut controller_listener = None;
    for name in &controller_names {
        let protocol = match mapped(name) {
            Some(p) => p,
            // Kafka maps controller listener names to PLAINTEXT when the
            // map is left at its default.
            None if !map_explicit => "PLAINTEXT".to_string(),
            None => {
                return Err(invalid(
                    "controller.listener.names",
                    &names_s,
                    format!(
                        "no security protocol for listener {name} in listener.security.protocol.map"
                    ),
                ));
            }
        };
        if protocol != "PLAINTEXT" {
            return Err(invalid(
                "listener.security.protocol.map",
                &map_s,
                format!(
                    "security protocol {protocol} of listener {name} is not supported (only PLAINTEXT)"
                ),
            ));
        }
        if !controller {
            // A broker-only node reaches the controllers at their voter
            // addresses; it opens no CONTROLLER listener of its own.
            if named.iter().any(|(n, _)| n == name) {
                return Err(invalid(
                    "listeners",
                    &listeners_s,
                    format!(
                        "has {name}, one of controller.listener.names, but process.roles=broker \
                         opens no controller listener"
                    ),
                ));
            }
            continue;
        }
        let Some((_, addr)) = named.iter().find(|(n, _)| n == name) else {
            return Err(invalid(
                "listeners",
                &listeners_s,
                format!("controller.listener.names has {name}, which is not among the listeners"),
            ));
        };
        let l = Listener::parse_address(addr).map_err(|e| invalid("listeners", &listeners_s, e))?;
        controller_listener.get_or_insert((name.clone(), l));
    }
    if let Some(ib) = explicit
        .get("inter.broker.listener.name")
        .filter(|_| broker)
    {
        let ib = ib.to_ascii_uppercase();
        if controller_names.contains(&ib) {
            return Err(invalid(
                "inter.broker.listener.name",
                &ib,
                "must not be one of controller.listener.names",
            ));
        }
        if !named.iter().any(|(n, _)| *n == ib) {
            return Err(invalid(
                "inter.broker.listener.name",
                &ib,
                format!("is not among the listeners ({listeners_s})"),
            ));
        }
    }
    if !broker && let Some((n, _)) = named.iter().find(|(n, _)| !controller_names.contains(n)) {
        return Err(invalid(
            "listeners",
            &listeners_s,
            format!(
                "has {n}, which is not one of controller.listener.names: a controller-only node \
                 (process.roles=controller) serves no clients"
            ),
        ));
    }
    if controller && (voters.len() > 1 || !broker) {
        // The others reach this node at its voter address: the CONTROLLER
        // listener must be opened there.
        let Some((name, l)) = &controller_listener else {
            return Err(invalid(
                "controller.listener.names",
                &names_s,
                "a quorum of several voters needs a CONTROLLER listener among the listeners",
            ));
        };
        let own = voters.get(&node_id).map(String::as_str).unwrap_or_default();
        let own_port = Listener::parse_address(own).map(|o| o.port).unwrap_or(0);
        if l.port != own_port {
            return Err(invalid(
                "listeners",
                &listeners_s,
                format!(
                    "listener {name} is on port {}, but controller.quorum.voters says node {node_id} is at {own}",
                    l.port
                ),
            ));
        }
    }
    Ok(Kraft {
        roles,
        controller_names,
        controller_listener,
        voters,
    })
}

/// Kafka's names for its ACL authorizer: `StandardAuthorizer` (KRaft,
/// Kafka 3+) and the ZooKeeper-era `AclAuthorizer` some configurations
/// still carry; both mean weir's ACLs.
pub const AUTHORIZER_CLASS_NAMES: &[&str] = &[
    "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "kafka.security.authorizer.AclAuthorizer",
];

/// `authorizer.class.name`, `super.users`, `allow.everyone.if.no.acl.found`.
fn authorizer_config(
    get: &dyn Fn(&str) -> String,
) -> Result<Option<weir_acl::AuthorizerConfig>, ConfigError> {
    let class = get("authorizer.class.name");
    let class = class.trim();
    if class.is_empty() {
        return Ok(None);
    }
    if !AUTHORIZER_CLASS_NAMES.contains(&class) {
        return Err(invalid(
            "authorizer.class.name",
            class,
            "weir serves Kafka's ACL authorizer only: set \
             org.apache.kafka.metadata.authorizer.StandardAuthorizer, or leave it empty",
        ));
    }
    let super_users_s = get("super.users");
    let super_users = weir_acl::AuthorizerConfig::parse_super_users(&super_users_s)
        .map_err(|e| invalid("super.users", &super_users_s, e))?;
    Ok(Some(weir_acl::AuthorizerConfig {
        super_users,
        allow_everyone_if_no_acl_found: get("allow.everyone.if.no.acl.found")
            .eq_ignore_ascii_case("true"),
    }))
}

/// Collects explicitly set pairs from the configuration sources, in order of
/// increasing precedence, ready for [`BrokerConfig::from_pairs`].
#[derive(Debug, Default, Clone)]
pub struct ConfigSources {
    pub pairs: Vec<(String, String)>,
}

impl ConfigSources {
    /// Reads a `server.properties` file: `name=value` (or `name: value`)
    /// lines, `#`/`!` comments, blank lines ignored.
    pub fn add_file(&mut self, path: &std::path::Path) -> Result<(), ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::ReadFile {
            path: path.to_path_buf(),
            source,
        })?;
        self.add_properties_text(&text)
            .map_err(|line| ConfigError::Syntax {
                path: path.to_path_buf(),
                line,
            })
    }

    /// Parses properties text as Java's `Properties::load` does (escapes,
    /// continuation lines; see [`crate::properties`]), requiring `=` or `:`
    /// after each key; on a syntax error returns the 1-based line.
    pub fn add_properties_text(&mut self, text: &str) -> Result<(), usize> {
        let pairs = crate::properties::parse_properties_strict(text).map_err(|e| e.line)?;
        self.pairs.extend(
            pairs
                .into_iter()
                .map(|(k, v)| (k.trim().to_string(), v.trim().to_string())),
        );
        Ok(())
    }

    /// Adds `WEIR_*` variables: `WEIR_LOG_DIRS=/x` → `log.dirs=/x`.
    pub fn add_env(&mut self, vars: impl IntoIterator<Item = (String, String)>) {
        let mut found: Vec<(String, String)> = vars
            .into_iter()
            .filter_map(|(k, v)| {
                let rest = k.strip_prefix("WEIR_")?;
                if rest.is_empty() {
                    return None;
                }
                Some((rest.to_ascii_lowercase().replace('_', "."), v))
            })
            .collect();
        found.sort();
        self.pairs.extend(found);
    }

    /// Adds one `name=value` override.
    pub fn add_override(&mut self, arg: &str) -> Result<(), ConfigError> {
        let (k, v) = arg
            .split_once('=')
            .ok_or_else(|| ConfigError::BadOverride {
                arg: arg.to_string(),
            })?;
        if k.trim().is_empty() {
            return Err(ConfigError::BadOverride {
                arg: arg.to_string(),
            });
        }
        self.pairs
            .push((k.trim().to_string(), v.trim().to_string()));
        Ok(())
    }

    /// Applies a CLI shorthand for a listener setting (`--listen` →
    /// `listeners`, `--advertised-listener` → `advertised.listeners`): the
    /// value must be a valid PLAINTEXT listener, and a value of `name`
    /// given by an earlier source must be valid and name the same address,
    /// so a shorthand never hides a setting.
    pub fn listener_shorthand(
        &mut self,
        flag: &'static str,
        name: &'static str,
        value: &str,
    ) -> Result<(), ConfigError> {
        let map = self
            .last("listener.security.protocol.map")
            .unwrap_or_default();
        let skip: Vec<String> = self
            .last("controller.listener.names")
            .unwrap_or_default()
            .split(',')
            .map(str::trim)
            .filter(|n| !n.is_empty())
            .map(str::to_ascii_uppercase)
            .collect();
        let wanted = Listener::parse_excluding(value, &map, &skip)
            .map_err(|reason| invalid(flag, value, reason))?;
        if let Some(setting) = self.last(name) {
            let same = Listener::parse_excluding(&setting, &map, &skip)
                .map_err(|reason| invalid(name, &setting, reason))?;
            if same != wanted {
                return Err(ConfigError::ShorthandConflict {
                    flag,
                    value: value.to_string(),
                    name,
                    setting,
                });
            }
            // Agreed: keep the setting, which may also name a CONTROLLER listener.
            return Ok(());
        }
        self.set(name, value);
        Ok(())
    }

    /// The value of `name` given by the sources so far (the last one).
    fn last(&self, name: &str) -> Option<String> {
        self.pairs
            .iter()
            .rev()
            .find(|(k, _)| k.trim() == name)
            .map(|(_, v)| v.trim().to_string())
    }

    pub fn set(&mut self, name: &str, value: &str) {
        self.pairs.push((name.to_string(), value.to_string()));
    }

    pub fn build(self) -> Result<BrokerConfig, ConfigError> {
        BrokerConfig::from_pairs(self.pairs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_documented_embedded_defaults() {
        let c = BrokerConfig::default();
        assert_eq!(
            c.listener,
            Listener {
                host: "127.0.0.1".into(),
                port: 9092
            }
        );
        assert_eq!(c.log_dirs, vec![PathBuf::from("./weir-data")]);
        assert_eq!(c.node_id, 1);
        assert!(c.auto_create_topics_enable);
        assert_eq!(c.socket_request_max_bytes, 104_857_600);
        assert!(c.advertised_listener.is_none());
    }

    #[test]
    fn later_sources_win_and_env_names_map_to_kafka_names() {
        let mut s = ConfigSources::default();
        s.add_properties_text("# c\nnum.partitions=3\nnode.id: 7\n\nlog.dirs=/a\n")
            .unwrap();
        s.add_env(vec![
            ("WEIR_NUM_PARTITIONS".to_string(), "5".to_string()),
            ("PATH".to_string(), "/bin".to_string()),
        ]);
        s.add_override("log.dirs=/b,/c").unwrap();
        let c = s.build().unwrap();
        assert_eq!(c.num_partitions, 5);
        assert_eq!(c.node_id, 7);
        assert_eq!(c.log_dirs, vec![PathBuf::from("/b"), PathBuf::from("/c")]);
    }

    #[test]
    fn invalid_values_are_one_line_errors() {
        for (k, v) in [
            ("num.partitions", "zero"),
            ("num.partitions", "0"),
            ("listeners", "SSL://h:1"),
            ("listeners", "localhost"),
            ("auto.create.topics.enable", "maybe"),
            ("default.replication.factor", "3"),
            ("socket.request.max.bytes", "-5"),
            ("log.message.timestamp.type", "Wallclock"),
        ] {
            let e = BrokerConfig::from_pairs([(k, v)]).unwrap_err().to_string();
            assert!(e.contains(k) && !e.contains('\n'), "{e}");
        }
        let mut s = ConfigSources::default();
        assert!(s.add_override("novalue").is_err());
        assert_eq!(s.add_properties_text("a=1\njunk\n"), Err(2));
    }

    #[test]
    fn queued_max_request_bytes_is_bounded_by_default() {
        assert_eq!(
            BrokerConfig::default().queued_max_request_bytes,
            Some(256 << 20)
        );
        let with = |v: &str| BrokerConfig::from_pairs([("queued.max.request.bytes", v)]);
        assert_eq!(with("-1").unwrap().queued_max_request_bytes, None);
        assert_eq!(with("1024").unwrap().queued_max_request_bytes, Some(1024));
        for bad in ["0", "-2", "lots"] {
            let e = with(bad).unwrap_err().to_string();
            assert!(e.contains("queued.max.request.bytes"), "{e}");
        }
    }

    #[test]
    fn unknown_security_protocols_are_refused_not_skipped() {
        for v in [
            "KERBEROS://127.0.0.1:9093",
            "PLAINTEXT://127.0.0.1:9092,KERBEROS://127.0.0.1:9093",
        ] {
            let e = BrokerConfig::from_pairs([("listeners", v)])
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("listeners") && e.contains("no security protocol for listener KERBEROS"),
                "{e}"
            );
        }
        // a listener name mapped to an unknown protocol
        let e = BrokerConfig::from_pairs([
            ("listeners", "PLAINTEXT://127.0.0.1:1,CLIENT://127.0.0.1:2"),
            ("listener.security.protocol.map", "CLIENT:KERBEROS"),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("CLIENT"), "{e}");
        // an advertised listener that is not among the listeners
        let e = BrokerConfig::from_pairs([("advertised.listeners", "SSL://h:1")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("advertised.listeners") && e.contains("not among the listeners"),
            "{e}"
        );
        // a name the protocol map does not know
        let e = BrokerConfig::from_pairs([("listeners", "CLIENT://127.0.0.1:1")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("no security protocol for listener CLIENT"),
            "{e}"
        );
    }

    fn ssl_pairs() -> Vec<(&'static str, &'static str)> {
        vec![
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,INTERNAL://127.0.0.1:0",
            ),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,SSL:SSL,INTERNAL:SSL",
            ),
            ("ssl.keystore.location", "/etc/weir/broker.pem"),
            (
                "listener.name.internal.ssl.keystore.location",
                "/etc/weir/internal.p12",
            ),
            ("listener.name.internal.ssl.keystore.type", "PKCS12"),
            ("listener.name.internal.ssl.keystore.password", "secret"),
            (
                "listener.name.internal.ssl.truststore.location",
                "/etc/weir/ca.pem",
            ),
            ("listener.name.internal.ssl.client.auth", "required"),
            ("advertised.listeners", "SSL://broker.example:9093"),
        ]
    }

    #[test]
    fn several_listeners_with_protocols_advertised_addresses_and_overrides() {
        use crate::tls::{ClientAuth, KeyStoreSource, StoreType, TrustStoreSource};
        let c = BrokerConfig::from_pairs(ssl_pairs()).unwrap();
        let names: Vec<(&str, SecurityProtocol)> = c
            .listeners
            .iter()
            .map(|l| (l.name.as_str(), l.protocol))
            .collect();
        assert_eq!(
            names,
            [
                ("PLAINTEXT", SecurityProtocol::Plaintext),
                ("SSL", SecurityProtocol::Ssl),
                ("INTERNAL", SecurityProtocol::Ssl),
            ]
        );
        let [plain, ssl, internal] = &c.listeners[..] else {
            panic!("three listeners")
        };
        assert!(plain.tls.is_none() && plain.advertised.is_none());
        assert_eq!(c.listener, plain.address);
        assert_eq!(
            ssl.advertised,
            Some(Listener {
                host: "broker.example".into(),
                port: 9093
            })
        );
        let ssl_tls = ssl.tls.as_ref().unwrap();
        assert_eq!(
            ssl_tls.keystore,
            KeyStoreSource::File {
                path: "/etc/weir/broker.pem".into(),
                kind: None,
                password: None
            }
        );
        assert_eq!(ssl_tls.client_auth, ClientAuth::None);
        assert!(ssl_tls.truststore.is_none());
        // listener.name.internal.ssl.* wins for INTERNAL only
        let int_tls = internal.tls.as_ref().unwrap();
        assert!(matches!(
            &int_tls.keystore,
            KeyStoreSource::File { path, kind: Some(StoreType::Pkcs12), password: Some(p) }
                if path.ends_with("internal.p12") && p.0 == "secret"
        ));
        assert!(matches!(
            &int_tls.truststore,
            Some(TrustStoreSource::File { path, .. }) if path.ends_with("ca.pem")
        ));
        assert_eq!(int_tls.client_auth, ClientAuth::Required);
        // per-listener keys are known, not reported unused
        assert!(c.unused.is_empty(), "{:?}", c.unused);
    }

    #[test]
    fn bad_listener_and_ssl_settings_name_the_setting() {
        let with = |change: (&'static str, &'static str)| {
            let mut pairs = ssl_pairs();
            pairs.retain(|(k, _)| *k != change.0);
            pairs.push(change);
            BrokerConfig::from_pairs(pairs)
                .map(|_| ())
                .unwrap_err()
                .to_string()
        };
        for (change, words) in [
            (
                ("listener.name.internal.ssl.client.auth", "always"),
                "listener.name.internal.ssl.client.auth",
            ),
            (("ssl.keystore.location", ""), "needs a keystore"),
            (("ssl.keystore.type", "JKS"), "JKS stores are not supported"),
            (
                ("listener.name.internal.ssl.truststore.location", ""),
                "truststore",
            ),
            (
                (
                    "listeners",
                    "PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9092",
                ),
                "port 9092 is used by two listeners",
            ),
            (
                (
                    "listeners",
                    "PLAINTEXT://127.0.0.1:1,PLAINTEXT://127.0.0.1:2",
                ),
                "appears twice",
            ),
            (
                ("advertised.listeners", "SSL://:9093"),
                "needs a concrete host and port",
            ),
            (
                ("ssl.principal.mapping.rules", "RULE:x/y"),
                "ssl.principal.mapping.rules",
            ),
        ] {
            let e = with(change);
            assert!(e.contains(words) && !e.contains('\n'), "{change:?}: {e}");
        }
        // a password is never echoed in an error
        let e = with(("ssl.key.password", "hunter2"));
        assert!(
            e.contains("ssl.key.password") && !e.contains("hunter2"),
            "{e}"
        );
    }

    #[test]
    fn the_inter_broker_listener_is_the_first_plaintext_one() {
        let mut pairs = ssl_pairs();
        pairs[0] = (
            "listeners",
            "SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:7,INTERNAL://127.0.0.1:0",
        );
        let c = BrokerConfig::from_pairs(pairs.clone()).unwrap();
        assert_eq!(c.listeners[0].name, "SSL");
        assert_eq!(c.inter_broker_listener().unwrap().name, "PLAINTEXT");
        assert_eq!(c.listener.port, 7);
        assert_eq!(c.advertised_listener, None);
        pairs.push(("inter.broker.listener.name", "INTERNAL"));
        let e = BrokerConfig::from_pairs(pairs).unwrap_err().to_string();
        assert!(
            e.contains("inter.broker.listener.name") && e.contains("must be PLAINTEXT"),
            "{e}"
        );
        // with SSL listeners only, the first is announced
        let c = BrokerConfig::from_pairs([
            ("listeners", "SSL://127.0.0.1:9"),
            ("ssl.keystore.location", "/k.pem"),
        ])
        .unwrap();
        assert_eq!(c.listener.port, 9);
    }

    /// A cluster member serves SSL and SASL client listeners beside the
    /// PLAINTEXT one its brokers reach each other on; without a PLAINTEXT
    /// inter-broker listener it is refused.
    #[test]
    fn a_cluster_member_needs_a_plaintext_inter_broker_listener() {
        let member = |listeners: &str| {
            BrokerConfig::from_pairs([
                ("node.id", "1"),
                ("listeners", listeners),
                ("controller.listener.names", "CONTROLLER"),
                (
                    "controller.quorum.voters",
                    "1@127.0.0.1:19093,2@127.0.0.1:19094",
                ),
                ("ssl.keystore.location", "/k.pem"),
                ("sasl.enabled.mechanisms", "PLAIN"),
                (
                    "listener.name.sasl_ssl.plain.sasl.jaas.config",
                    "org.apache.kafka.common.security.plain.PlainLoginModule required \
                     user_alice=\"s\";",
                ),
            ])
        };
        let c = member(
            "SASL_SSL://127.0.0.1:0,SSL://127.0.0.1:0,PLAINTEXT://127.0.0.1:0,\
             CONTROLLER://127.0.0.1:19093",
        )
        .unwrap();
        assert_eq!(c.listeners.len(), 3);
        assert_eq!(c.inter_broker_listener().unwrap().name, "PLAINTEXT");
        for listeners in [
            "SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:19093",
            "SASL_SSL://127.0.0.1:0,CONTROLLER://127.0.0.1:19093",
        ] {
            let e = member(listeners).unwrap_err().to_string();
            assert!(
                e.contains("needs a PLAINTEXT listener for inter-broker traffic"),
                "{e}"
            );
        }
    }

    #[test]
    fn broker_wide_ssl_client_auth_is_for_ssl_listeners_only() {
        use crate::tls::ClientAuth;
        let auth = |pairs: &[(&str, &str)]| -> Vec<(String, ClientAuth)> {
            let mut all = vec![
                (
                    "listeners",
                    "SSL://127.0.0.1:1,SASL_SSL://127.0.0.1:2,CLIENT://127.0.0.1:3",
                ),
                (
                    "listener.security.protocol.map",
                    "SSL:SSL,SASL_SSL:SASL_SSL,CLIENT:SASL_SSL",
                ),
                ("ssl.keystore.location", "/k.pem"),
                ("ssl.truststore.location", "/ca.pem"),
                ("sasl.enabled.mechanisms", "PLAIN"),
                (
                    "listener.name.sasl_ssl.plain.sasl.jaas.config",
                    "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";",
                ),
                (
                    "listener.name.client.plain.sasl.jaas.config",
                    "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"b\";",
                ),
            ];
            all.extend_from_slice(pairs);
            BrokerConfig::from_pairs(all)
                .unwrap()
                .listeners
                .iter()
                .map(|l| {
                    let tls = l.tls.as_ref().expect("a TLS listener");
                    (l.name.clone(), tls.client_auth)
                })
                .collect()
        };
        assert_eq!(
            auth(&[("ssl.client.auth", "required")]),
            [
                ("SSL".to_string(), ClientAuth::Required),
                ("SASL_SSL".to_string(), ClientAuth::None),
                ("CLIENT".to_string(), ClientAuth::None),
            ]
        );
        // the per-listener form counts on SASL_SSL, as in Kafka
        assert_eq!(
            auth(&[("listener.name.client.ssl.client.auth", "requested")]),
            [
                ("SSL".to_string(), ClientAuth::None),
                ("SASL_SSL".to_string(), ClientAuth::None),
                ("CLIENT".to_string(), ClientAuth::Requested),
            ]
        );
    }

    #[test]
    fn listen_shorthand_is_validated_and_never_hides_a_setting() {
        let listen = |earlier: Option<&str>, value: &str| {
            let mut s = ConfigSources::default();
            if let Some(v) = earlier {
                s.set("listeners", v);
            }
            s.listener_shorthand("--listen", "listeners", value)?;
            s.build()
        };
        let c = listen(None, "127.0.0.1:0").unwrap();
        assert_eq!(c.listener.port, 0);
        // the same address in another spelling agrees
        assert!(listen(Some("PLAINTEXT://127.0.0.1:0"), "127.0.0.1:0").is_ok());
        let e = listen(Some("KERBEROS://127.0.0.1:9093"), "127.0.0.1:0")
            .unwrap_err()
            .to_string();
        assert!(e.contains("listeners") && e.contains("KERBEROS"), "{e}");
        let e = listen(Some("PLAINTEXT://127.0.0.1:9092"), "127.0.0.1:0").unwrap_err();
        assert!(
            matches!(
                e,
                ConfigError::ShorthandConflict {
                    flag: "--listen",
                    ..
                }
            ),
            "{e}"
        );
        let e = listen(None, "KERBEROS://127.0.0.1:1")
            .unwrap_err()
            .to_string();
        assert!(e.contains("--listen") && e.contains("KERBEROS"), "{e}");
    }

    /// OAUTHBEARER's settings: global, per listener and per listener and
    /// mechanism, all known (not reported unused) and read.
    #[test]
    fn oauthbearer_settings_per_listener_and_mechanism() {
        let base = [
            ("listeners", "CLIENT://127.0.0.1:0"),
            ("listener.security.protocol.map", "CLIENT:SASL_PLAINTEXT"),
            ("sasl.enabled.mechanisms", "OAUTHBEARER"),
            (
                "listener.name.client.oauthbearer.sasl.jaas.config",
                "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required ;",
            ),
            ("sasl.oauthbearer.expected.audience", "kafka"),
        ];
        let with = |extra: &[(&'static str, &'static str)]| {
            BrokerConfig::from_pairs(base.iter().chain(extra).copied())
        };
        let c = with(&[(
            "listener.name.client.oauthbearer.sasl.server.callback.handler.class",
            crate::sasl::oauthbearer::UNSECURED_VALIDATOR_CLASS,
        )])
        .unwrap();
        assert!(c.unused.is_empty(), "{:?}", c.unused);
        assert_eq!(
            c.listeners[0].sasl.as_ref().unwrap().mechanisms,
            [crate::sasl::Mechanism::OAuthBearer]
        );
        // the per-listener URL is the one read
        let e = with(&[
            (
                "sasl.oauthbearer.jwks.endpoint.url",
                "file:///nonexistent/j.json",
            ),
            (
                "listener.name.client.sasl.oauthbearer.jwks.endpoint.url",
                "https://idp/jwks",
            ),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("only file:// URLs are served"), "{e}");
        // the per-mechanism one wins over both
        let e = with(&[
            ("sasl.oauthbearer.jwks.endpoint.url", "https://idp/jwks"),
            (
                "listener.name.client.oauthbearer.sasl.oauthbearer.jwks.endpoint.url",
                "file:///nonexistent/j.json",
            ),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("cannot read"), "{e}");
        // values are checked against the config table
        let e = with(&[(
            "listener.name.client.oauthbearer.sasl.oauthbearer.clock.skew.seconds",
            "-1",
        )])
        .unwrap_err()
        .to_string();
        assert!(e.contains("clock.skew.seconds"), "{e}");
        // a per-mechanism setting of another mechanism is not OAUTHBEARER's
        let c = with(&[
            (
                "listener.name.client.oauthbearer.sasl.server.callback.handler.class",
                crate::sasl::oauthbearer::UNSECURED_VALIDATOR_CLASS,
            ),
            (
                "listener.name.client.plain.sasl.server.callback.handler.class",
                "x",
            ),
        ])
        .unwrap();
        assert_eq!(
            c.unused,
            ["listener.name.client.plain.sasl.server.callback.handler.class"]
        );
    }

    #[test]
    fn sasl_listeners_take_mechanisms_and_jaas_per_listener() {
        let jaas = "org.apache.kafka.common.security.plain.PlainLoginModule required \
                    user_alice=\"alice-secret\";";
        let c = BrokerConfig::from_pairs([
            (
                "listeners",
                "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,CLIENT://127.0.0.1:0",
            ),
            (
                "listener.security.protocol.map",
                "PLAINTEXT:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT,CLIENT:SASL_PLAINTEXT",
            ),
            ("sasl.enabled.mechanisms", "PLAIN"),
            ("listener.name.sasl_plaintext.plain.sasl.jaas.config", jaas),
            (
                "listener.name.client.sasl.enabled.mechanisms",
                "SCRAM-SHA-256",
            ),
            (
                "listener.name.client.scram-sha-256.sasl.jaas.config",
                "org.apache.kafka.common.security.scram.ScramLoginModule required user_bob=\"b\";",
            ),
        ])
        .unwrap();
        assert!(c.unused.is_empty(), "{:?}", c.unused);
        let mechanisms: Vec<Option<Vec<crate::sasl::Mechanism>>> = c
            .listeners
            .iter()
            .map(|l| l.sasl.as_ref().map(|s| s.mechanisms.clone()))
            .collect();
        use crate::sasl::Mechanism::{Plain, ScramSha256};
        assert_eq!(
            mechanisms,
            [None, Some(vec![Plain]), Some(vec![ScramSha256])]
        );
        assert_eq!(c.listeners[1].protocol, SecurityProtocol::SaslPlaintext);
        assert!(c.listeners.iter().all(|l| l.tls.is_none()));

        // a SASL listener without mechanisms, and one whose mechanism has
        // no login module, are start errors naming the setting
        let e = BrokerConfig::from_pairs([("listeners", "SASL_PLAINTEXT://127.0.0.1:0")])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("sasl.enabled.mechanisms") && e.contains("GSSAPI"),
            "{e}"
        );
        let e = BrokerConfig::from_pairs([
            ("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
            ("sasl.enabled.mechanisms", "PLAIN"),
        ])
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("listener.name.sasl_plaintext.plain.sasl.jaas.config"),
            "{e}"
        );
        // SASL_SSL needs a keystore as SSL does
        let e = BrokerConfig::from_pairs([
            ("listeners", "SASL_SSL://127.0.0.1:0"),
            ("sasl.enabled.mechanisms", "PLAIN"),
            ("listener.name.sasl_ssl.plain.sasl.jaas.config", jaas),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("ssl.keystore.location"), "{e}");
        // a bad JAAS text is refused without printing it
        let e = BrokerConfig::from_pairs([
            ("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
            ("sasl.enabled.mechanisms", "PLAIN"),
            (
                "listener.name.sasl_plaintext.plain.sasl.jaas.config",
                "org.apache.kafka.common.security.plain.PlainLoginModule required user_a=\"hunter2",
            ),
        ])
        .unwrap_err()
        .to_string();
        assert!(e.contains("unterminated") && !e.contains("hunter2"), "{e}");
    }

    #[test]
    fn unknown_keys_are_reported_as_unused() {
        let c = BrokerConfig::from_pairs([("zookeeper.connect", "zk:2181"), ("log.dir", "/x")])
            .unwrap();
        assert_eq!(c.unused, vec!["zookeeper.connect".to_string()]);
        assert_eq!(c.log_dirs, vec![PathBuf::from("/x")]);
    }

    #[test]
    fn listener_forms() {
        assert_eq!(
            Listener::parse_excluding(
                "CONTROLLER://:9093,PLAINTEXT://h:1",
                "",
                &["CONTROLLER".into()]
            )
            .unwrap(),
            Listener {
                host: "h".into(),
                port: 1
            }
        );
        assert_eq!(
            Listener::parse("SSL://h:2,PLAINTEXT://h:1").unwrap().port,
            2
        );
        assert_eq!(
            Listener::parse("PLAINTEXT://:9093").unwrap(),
            Listener {
                host: String::new(),
                port: 9093
            }
        );
        assert_eq!(
            Listener::parse(":0").unwrap().bind_addr().unwrap().port(),
            0
        );
        assert_eq!(
            Listener::parse("[::1]:5")
                .unwrap()
                .bind_addr()
                .unwrap()
                .to_string(),
            "[::1]:5"
        );
    }

    #[test]
    fn http_listener_defaults_parses_and_can_be_disabled() {
        let c = BrokerConfig::default();
        assert_eq!(
            c.http_listener,
            Some(Listener {
                host: "127.0.0.1".into(),
                port: 9644
            })
        );
        let with = |v: &str| {
            let mut s = ConfigSources::default();
            s.add_override(&format!("http.listeners={v}")).unwrap();
            s.build()
        };
        assert_eq!(with("").unwrap().http_listener, None);
        let l = with("http://127.0.0.2:0").unwrap().http_listener.unwrap();
        assert_eq!((l.host.as_str(), l.port), ("127.0.0.2", 0));
        let l = with("[::1]:8080").unwrap().http_listener.unwrap();
        assert_eq!(l.bind_addr().unwrap().to_string(), "[::1]:8080");
        for bad in [
            "9644",
            "ftp://127.0.0.1:1",
            // not loopback, neither TLS nor authentication
            "http://0.0.0.0:0",
            "127.0.0.1:x",
            "127.0.0.1:70000",
        ] {
            assert!(
                matches!(with(bad), Err(ConfigError::InvalidValue { ref name, .. }) if name == "http.listeners"),
                "{bad}"
            );
        }
    }

    /// The KRaft settings of Kafka 4's combined-mode quickstart file.
    fn quickstart() -> Vec<(&'static str, &'static str)> {
        vec![
            ("process.roles", "broker,controller"),
            ("node.id", "1"),
            ("controller.quorum.bootstrap.servers", "localhost:9093"),
            ("listeners", "PLAINTEXT://:9092,CONTROLLER://:9093"),
            ("inter.broker.listener.name", "PLAINTEXT"),
            (
                "advertised.listeners",
                "PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093",
            ),
            ("controller.listener.names", "CONTROLLER"),
            (
                "listener.security.protocol.map",
                "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL",
            ),
        ]
    }

    fn with(changes: &[(&'static str, &'static str)]) -> Result<BrokerConfig, String> {
        let mut pairs = quickstart();
        for (k, v) in changes {
            pairs.retain(|(n, _)| n != k);
            pairs.push((k, v));
        }
        BrokerConfig::from_pairs(pairs).map_err(|e| e.to_string())
    }

    #[test]
    fn kafka_quickstart_kraft_settings_make_one_combined_node() {
        let c = with(&[]).unwrap();
        assert_eq!(c.node_id, 1);
        assert_eq!(c.process_roles, ["broker", "controller"]);
        assert_eq!(
            c.listener,
            Listener::parse("0.0.0.0:9092")
                .map(|l| Listener {
                    host: String::new(),
                    ..l
                })
                .unwrap()
        );
        assert_eq!(
            c.advertised_listener,
            Some(Listener::parse("localhost:9092").unwrap())
        );
        let (name, l) = c.controller_listener.unwrap();
        assert_eq!((name.as_str(), l.port), ("CONTROLLER", 9093));
        assert!(c.unused.is_empty(), "{:?}", c.unused);
        // the CONTROLLER listener is never the client one, even listed first
        let c = with(&[
            (
                "listeners",
                "CONTROLLER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9092",
            ),
            (
                "advertised.listeners",
                "CONTROLLER://h:9093,PLAINTEXT://h:9092",
            ),
            ("controller.quorum.voters", "1@localhost:9093"),
        ])
        .unwrap();
        assert_eq!(c.listener.port, 9092);
        assert_eq!(c.advertised_listener.clone().unwrap().port, 9092);
        assert!(!c.is_cluster());
        let q = with(&[(
            "controller.quorum.voters",
            "1@127.0.0.1:9093,2@127.0.0.1:19093,3@127.0.0.1:29093",
        )])
        .unwrap();
        assert!(q.is_cluster());
        assert_eq!(q.quorum_voters.len(), 3);
        assert_eq!(q.quorum_voters[&2], "127.0.0.1:19093");
        // a broker-only node: not a voter, no CONTROLLER listener
        let b = with(&[
            ("process.roles", "broker"),
            ("node.id", "4"),
            ("controller.quorum.voters", "1@h:9093,2@h:9094,3@h:9095"),
            ("listeners", "PLAINTEXT://:9092"),
            ("advertised.listeners", "PLAINTEXT://localhost:9092"),
        ])
        .unwrap();
        assert!(b.is_cluster() && b.is_broker() && !b.is_controller());
        assert!(b.controller_listener.is_none());
        assert_eq!(b.cluster_id(), q_with_same_voters_cluster_id());
        // a controller-only node: a voter with only its CONTROLLER listener
        let c = with(&[
            ("process.roles", "controller"),
            ("controller.quorum.voters", "1@h:9093"),
            ("listeners", "CONTROLLER://:9093"),
            ("advertised.listeners", ""),
        ])
        .unwrap();
        assert!(c.is_cluster() && c.is_controller() && !c.is_broker());
        assert_eq!(c.controller_listener.as_ref().unwrap().1.port, 9093);
        // with none of them set, one node that is broker and controller
        let d = BrokerConfig::default();
        assert_eq!(d.process_roles, ["broker", "controller"]);
        assert!(d.controller_listener.is_none());
    }

    /// The cluster id of combined node 1 with the voters the broker-only
    /// node above names: every node of one quorum derives the same.
    fn q_with_same_voters_cluster_id() -> Option<String> {
        with(&[("controller.quorum.voters", "1@h:9093,2@h:9094,3@h:9095")])
            .unwrap()
            .cluster_id()
    }

    #[test]
    fn kraft_settings_are_validated_naming_the_setting() {
        for (changes, setting, words) in [
            (
                vec![("process.roles", "broker,zookeeper")],
                "process.roles",
                "unknown role",
            ),
            (
                vec![("process.roles", "broker")],
                "controller.quorum.voters",
                "process.roles=broker",
            ),
            (
                vec![
                    ("process.roles", "broker"),
                    ("controller.quorum.voters", "1@h:9093"),
                ],
                "controller.quorum.voters",
                "node.id 1 is a voter, but process.roles=broker",
            ),
            (
                vec![
                    ("process.roles", "broker"),
                    ("node.id", "4"),
                    ("controller.quorum.voters", "1@h:9093"),
                ],
                "listeners",
                "opens no controller listener",
            ),
            (
                vec![("process.roles", "controller")],
                "controller.quorum.voters",
                "process.roles=controller",
            ),
            (
                vec![
                    ("process.roles", "controller"),
                    ("controller.quorum.voters", "1@h:9093"),
                ],
                "listeners",
                "serves no clients",
            ),
            (
                vec![("controller.quorum.voters", "1@h:9093,1@h2:9093")],
                "controller.quorum.voters",
                "names node 1 twice",
            ),
            (
                vec![("controller.quorum.voters", "1@h:9094,2@h2:9093")],
                "listeners",
                "says node 1 is at h:9094",
            ),
            (
                vec![("controller.quorum.voters", "1@h:0")],
                "controller.quorum.voters",
                "with a non-negative id and a port",
            ),
            (
                vec![("controller.quorum.voters", "2@h:9093")],
                "controller.quorum.voters",
                "node.id 1 must be among the voters",
            ),
            (
                vec![("controller.quorum.voters", "h:9093")],
                "controller.quorum.voters",
                "id@host:port",
            ),
            (
                vec![("controller.quorum.bootstrap.servers", "a:9093,b:9093")],
                "controller.quorum.bootstrap.servers",
                "dynamic quorums are not supported",
            ),
            (
                vec![("listeners", "PLAINTEXT://:9092")],
                "listeners",
                "CONTROLLER, which is not among the listeners",
            ),
            (
                vec![("listener.security.protocol.map", "PLAINTEXT:PLAINTEXT")],
                "controller.listener.names",
                "no security protocol for listener CONTROLLER",
            ),
            (
                vec![(
                    "listener.security.protocol.map",
                    "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
                )],
                "listener.security.protocol.map",
                "SSL of listener CONTROLLER is not supported",
            ),
            (
                vec![(
                    "listeners",
                    "PLAINTEXT://:9092,KERBEROS://:9094,CONTROLLER://:9093",
                )],
                "listeners",
                "no security protocol for listener KERBEROS",
            ),
            (
                vec![("inter.broker.listener.name", "CONTROLLER")],
                "inter.broker.listener.name",
                "controller.listener.names",
            ),
            (
                vec![("inter.broker.listener.name", "INTERNAL")],
                "inter.broker.listener.name",
                "not among the listeners",
            ),
            (
                vec![("controller.listener.names", "")],
                "controller.listener.names",
                "must name the CONTROLLER listener",
            ),
        ] {
            let e = with(&changes).unwrap_err();
            assert!(
                e.contains(&format!(" for {setting}: ")) && e.contains(words),
                "{changes:?}: {e}"
            );
        }
    }
}
