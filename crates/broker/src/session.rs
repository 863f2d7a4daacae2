//! What a connection knows about its client once it is set up: the
//! listener it came in on and the authenticated principal. Handlers see it
//! through [`crate::handler::RequestContext::session`]; it never changes
//! during the connection (re-authentication would make a new one).

use std::sync::Arc;

use crate::config::SecurityProtocol;

/// Kafka's `KafkaPrincipal`: a type and a name (`User:alice`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Principal {
    pub principal_type: String,
    pub name: String,
}

impl Principal {
    /// `User:<name>`, the type every Kafka authenticator gives.
    pub fn user(name: impl Into<String>) -> Principal {
        Principal {
            principal_type: "User".to_string(),
            name: name.into(),
        }
    }

    /// `User:ANONYMOUS`: an unauthenticated client (PLAINTEXT, or SSL
    /// without a client certificate), as Kafka names it.
    pub fn anonymous() -> Principal {
        Principal::user("ANONYMOUS")
    }
}

impl std::fmt::Display for Principal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}:{}", self.principal_type, self.name)
    }
}

/// A bound client listener as its connections see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerInfo {
    /// The listener name (upper case), e.g. `PLAINTEXT`, `SSL`, `CLIENT`.
    pub name: String,
    pub protocol: SecurityProtocol,
    /// What Metadata announces for this broker to clients of this listener:
    /// its `advertised.listeners` entry, else the bound address.
    pub advertised_host: String,
    pub advertised_port: u16,
}

/// One connection's client: listener, principal and address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub listener: Arc<ListenerInfo>,
    pub principal: Principal,
    /// The client's IP address as ACLs name hosts (`10.0.0.7`, `::1`),
    /// formatted once per connection.
    pub host: String,
    /// The broker itself (its own transaction markers written to its own
    /// partitions without a connection): never refused by ACLs, as Kafka's
    /// inter-broker principal is a super user. No client connection ever
    /// has it.
    pub broker_itself: bool,
}

impl Session {
    pub fn new(listener: Arc<ListenerInfo>, principal: Principal, host: String) -> Arc<Session> {
        Arc::new(Session {
            listener,
            principal,
            host,
            broker_itself: false,
        })
    }

    /// The broker acting on its own behalf (see [`Session::broker_itself`]),
    /// as if on the PLAINTEXT listener at `host:port`.
    pub fn broker_itself(host: &str, port: u16, node_id: i32) -> Arc<Session> {
        let mut s = Session::internal(host, port);
        let me = Arc::make_mut(&mut s);
        me.principal = Principal {
            principal_type: "Broker".to_string(),
            name: node_id.to_string(),
        };
        me.broker_itself = true;
        s
    }

    /// The authorizer's view of this client.
    pub fn requestor(&self) -> weir_acl::Requestor<'_> {
        weir_acl::Requestor {
            principal_type: &self.principal.principal_type,
            principal_name: &self.principal.name,
            host: &self.host,
        }
    }

    /// A session for requests that come from no client connection (an
    /// internal request such as an auto-creation, or a test): the
    /// PLAINTEXT listener at `host:port`, anonymous.
    pub fn internal(host: &str, port: u16) -> Arc<Session> {
        Session::new(
            Arc::new(ListenerInfo {
                name: "PLAINTEXT".to_string(),
                protocol: SecurityProtocol::Plaintext,
                advertised_host: host.to_string(),
                advertised_port: port,
            }),
            Principal::anonymous(),
            host.to_string(),
        )
    }
}
