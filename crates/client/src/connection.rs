//! One connection to one broker: TCP, TLS over it for SSL and SASL_SSL,
//! ApiVersions, then SASL authentication for SASL_PLAINTEXT and SASL_SSL
//! (Kafka's order: ApiVersions, SaslHandshake v1 naming the mechanism,
//! SaslAuthenticate requests carrying its messages).

use std::collections::HashMap;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use weir_protocol::codec::{Decodable, Encodable, Message, Request};
use weir_protocol::error_code::ErrorCode;
use weir_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
    SaslAuthenticateRequest, SaslHandshakeRequest,
};

use crate::client::ClientOptions;
use crate::error::ClientError;
use crate::sasl::{SaslExchange, client_nonce};
use crate::security::{SaslSettings, Security};
use crate::stream::Stream;

/// Largest response frame the client accepts.
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// A connection to one broker (authenticated when its security says so),
/// with the API versions both sides support.
///
/// Requests are sent one at a time: each call writes a request and waits for
/// its response, so correlation ids always match in order.
pub struct Connection {
    addr: String,
    stream: Stream,
    client_id: String,
    next_correlation_id: i32,
    /// Broker-supported version ranges, by api key.
    versions: HashMap<i16, (i16, i16)>,
    request_timeout: Duration,
    buf: BytesMut,
}

impl Connection {
    /// Connects to `addr` in PLAINTEXT and negotiates API versions (30 s
    /// to connect).
    pub async fn connect(addr: &str, client_id: &str) -> Result<Connection, ClientError> {
        Self::connect_timeout(addr, client_id, Duration::from_secs(30)).await
    }

    /// Connects to `addr` in PLAINTEXT within `connect_timeout` (TCP
    /// connect and the ApiVersions exchange each get this long) and
    /// negotiates API versions.
    pub async fn connect_timeout(
        addr: &str,
        client_id: &str,
        connect_timeout: Duration,
    ) -> Result<Connection, ClientError> {
        Self::open(addr, client_id, connect_timeout, &Security::plaintext()).await
    }

    /// Connects to `addr` with `options`: TCP connect, the TLS handshake,
    /// ApiVersions and each SASL round trip get `connect_timeout`; later
    /// requests wait `request_timeout` for their response.
    pub async fn connect_with(
        addr: &str,
        client_id: &str,
        options: &ClientOptions,
    ) -> Result<Connection, ClientError> {
        let mut conn =
            Self::open(addr, client_id, options.connect_timeout, &options.security).await?;
        conn.set_request_timeout(options.request_timeout);
        Ok(conn)
    }

    async fn open(
        addr: &str,
        client_id: &str,
        connect_timeout: Duration,
        security: &Security,
    ) -> Result<Connection, ClientError> {
        let timeout = |what| ClientError::Timeout {
            addr: addr.to_string(),
            what,
        };
        let tcp = tokio::time::timeout(connect_timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| timeout("connection"))?
            .map_err(|source| ClientError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        tcp.set_nodelay(true).ok();
        let stream = match &security.tls {
            None => Stream::Plain(tcp),
            Some(config) => {
                let tls =
                    tokio::time::timeout(connect_timeout, crate::tls::handshake(config, addr, tcp))
                        .await
                        .map_err(|_| timeout("TLS handshake"))?
                        .map_err(|e| ClientError::Tls {
                            addr: addr.to_string(),
                            reason: crate::tls::explain(&e),
                        })?;
                Stream::Tls(Box::new(tls))
            }
        };
        let mut conn = Connection {
            addr: addr.to_string(),
            stream,
            client_id: client_id.to_string(),
            next_correlation_id: 0,
            versions: HashMap::new(),
            request_timeout: connect_timeout,
            buf: BytesMut::with_capacity(64 * 1024),
        };
        conn.negotiate().await?;
        if let Some(sasl) = &security.sasl {
            conn.authenticate(sasl).await?;
        }
        Ok(conn)
    }

    /// The address this connection was opened to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    /// Sets how long a request may wait for its response.
    pub fn set_request_timeout(&mut self, timeout: Duration) {
        self.request_timeout = timeout;
    }

    async fn negotiate(&mut self) -> Result<(), ClientError> {
        let (_, max) = ApiVersionsRequest::VALID_VERSIONS;
        let req = ApiVersionsRequest {
            client_software_name: "weir".into(),
            client_software_version: env!("CARGO_PKG_VERSION").into(),
            ..Default::default()
        };
        let mut version = max;
        loop {
            let resp: ApiVersionsResponse =
                self.round_trip(ApiKey::ApiVersions, version, &req).await?;
            // UNSUPPORTED_VERSION: the broker answers in v0 with its own range.
            if resp.error_code == ErrorCode::UnsupportedVersion.code() {
                let theirs = resp
                    .api_keys
                    .iter()
                    .find(|k| k.api_key == ApiKey::ApiVersions as i16)
                    .map(|k| k.max_version)
                    .unwrap_or(0);
                if theirs >= version || theirs < 0 {
                    return Err(ClientError::UnsupportedApi {
                        addr: self.addr.clone(),
                        api: "ApiVersions",
                        min: 0,
                        max,
                    });
                }
                version = theirs;
                continue;
            }
            ClientError::check(resp.error_code, || "ApiVersions".into(), None)?;
            self.versions = resp
                .api_keys
                .iter()
                .map(|k| (k.api_key, (k.min_version, k.max_version)))
                .collect();
            return Ok(());
        }
    }

    /// Authenticates with `sasl`. A refusal is
    /// [`ClientError::Authentication`] with the broker's message (the
    /// broker then closes the connection).
    async fn authenticate(&mut self, sasl: &SaslSettings) -> Result<(), ClientError> {
        let mechanism = sasl.mechanism.name();
        // v1: the mechanism's messages then travel in SaslAuthenticate
        // requests (v0 sent them as raw frames, which weir does not speak).
        let version = self.version_for(ApiKey::SaslHandshake, (1, 1))?;
        let req = SaslHandshakeRequest {
            mechanism: mechanism.to_string(),
            ..Default::default()
        };
        let resp = self.send_version(&req, version).await?;
        if resp.error_code == ErrorCode::UnsupportedSaslMechanism.code() {
            return Err(ClientError::SaslMechanism {
                addr: self.addr.clone(),
                mechanism,
                enabled: resp.mechanisms,
            });
        }
        ClientError::check(
            resp.error_code,
            || format!("SaslHandshake with {mechanism} at {}", self.addr),
            None,
        )?;
        let version = self.version_for(
            ApiKey::SaslAuthenticate,
            SaslAuthenticateRequest::VALID_VERSIONS,
        )?;
        let failed = |addr: &str, message: String| ClientError::Authentication {
            addr: addr.to_string(),
            mechanism,
            message,
        };
        let (mut exchange, mut message) = SaslExchange::start(sasl, client_nonce());
        loop {
            let req = SaslAuthenticateRequest {
                auth_bytes: Bytes::from(message),
                ..Default::default()
            };
            let resp = self.send_version(&req, version).await?;
            if resp.error_code != 0 {
                let code = ErrorCode::from_code_lossy(resp.error_code);
                let text = resp
                    .error_message
                    .unwrap_or_else(|| code.name().to_string());
                return Err(failed(&self.addr, text));
            }
            match exchange.step(&resp.auth_bytes) {
                Ok(Some(next)) => message = next,
                Ok(None) => return Ok(()),
                Err(e) => return Err(failed(&self.addr, e.to_string())),
            }
        }
    }

    /// The highest version of `api` that both the client and the broker
    /// support.
    pub fn version_for(&self, api: ApiKey, ours: (i16, i16)) -> Result<i16, ClientError> {
        let unsupported = || ClientError::UnsupportedApi {
            addr: self.addr.clone(),
            api: api.name(),
            min: ours.0,
            max: ours.1,
        };
        let &(min, max) = self.versions.get(&(api as i16)).ok_or_else(unsupported)?;
        let v = max.min(ours.1);
        if v < min.max(ours.0) {
            return Err(unsupported());
        }
        Ok(v)
    }

    /// Sends `req` at the highest common version and waits for its response.
    pub async fn send<R: Request>(&mut self, req: &R) -> Result<R::Response, ClientError> {
        let version = self.version_for(R::API_KEY, R::VALID_VERSIONS)?;
        self.send_version(req, version).await
    }

    /// Sends `req` at `version` and waits for its response.
    pub async fn send_version<R: Request>(
        &mut self,
        req: &R,
        version: i16,
    ) -> Result<R::Response, ClientError> {
        self.round_trip(R::API_KEY, version, req).await
    }

    /// Sends a request that gets no response (Produce with acks=0).
    pub async fn send_no_response<R: Request>(&mut self, req: &R) -> Result<(), ClientError> {
        let version = self.version_for(R::API_KEY, R::VALID_VERSIONS)?;
        self.write_request(R::API_KEY, version, req).await?;
        Ok(())
    }

    async fn write_request<B: Encodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        body: &B,
    ) -> Result<i32, ClientError> {
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id = self.next_correlation_id.wrapping_add(1);
        let header = RequestHeader {
            request_api_key: api as i16,
            request_api_version: version,
            correlation_id,
            client_id: Some(self.client_id.clone()),
            ..Default::default()
        };
        let header_version = api.request_header_version(version);
        self.buf.clear();
        self.buf.put_i32(0);
        header.encode(&mut self.buf, header_version)?;
        body.encode(&mut self.buf, version)?;
        let len = (self.buf.len() - 4) as i32;
        self.buf[..4].copy_from_slice(&len.to_be_bytes());
        let io = |source| io_error(&self.addr, source);
        self.stream.write_all(&self.buf).await.map_err(io)?;
        // TLS may hold the last record back until flushed (a no-op on TCP).
        self.stream.flush().await.map_err(io)?;
        Ok(correlation_id)
    }

    async fn round_trip<B: Encodable, Resp: Decodable>(
        &mut self,
        api: ApiKey,
        version: i16,
        body: &B,
    ) -> Result<Resp, ClientError> {
        let correlation_id = self.write_request(api, version, body).await?;
        let timeout = self.request_timeout;
        let mut frame = tokio::time::timeout(timeout, self.read_frame())
            .await
            .map_err(|_| ClientError::Timeout {
                addr: self.addr.clone(),
                what: api.name(),
            })??;
        let decode = |source| ClientError::Decode {
            addr: self.addr.clone(),
            source,
        };
        let header = ResponseHeader::decode(&mut frame, api.response_header_version(version))
            .map_err(decode)?;
        if header.correlation_id != correlation_id {
            return Err(ClientError::CorrelationMismatch {
                expected: correlation_id,
                got: header.correlation_id,
            });
        }
        Resp::decode(&mut frame, version).map_err(decode)
    }

    async fn read_frame(&mut self) -> Result<Bytes, ClientError> {
        let io = |source| io_error(&self.addr, source);
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len).await.map_err(io)?;
        let size = i32::from_be_bytes(len);
        if size < 0 || size as usize > MAX_RESPONSE_BYTES {
            // A TLS record (alert or handshake, version 3.x) where a frame
            // length should be: the listener speaks TLS and this client
            // does not.
            if matches!(len, [0x15 | 0x16, 0x03, ..]) {
                return Err(ClientError::TlsExpected {
                    addr: self.addr.clone(),
                });
            }
            return Err(ClientError::FrameTooLarge {
                addr: self.addr.clone(),
                size: size.max(0) as usize,
                limit: MAX_RESPONSE_BYTES,
            });
        }
        // Read into uninitialised capacity: a replica fetch answer is up to
        // `replica.fetch.response.max.bytes`, and zeroing it first costs a
        // pass over every byte.
        let size = size as usize;
        let mut frame = BytesMut::with_capacity(size);
        while frame.len() < size {
            let want = size - frame.len();
            let mut rest = (&mut frame).limit(want);
            if self.stream.read_buf(&mut rest).await.map_err(io)? == 0 {
                return Err(io(std::io::ErrorKind::UnexpectedEof.into()));
            }
        }
        Ok(frame.freeze())
    }
}

/// An i/o error on the connection; a TLS failure (an alert from the
/// broker, such as one refusing the client's certificate after a TLS 1.3
/// handshake) is told as one.
fn io_error(addr: &str, source: std::io::Error) -> ClientError {
    let tls = source
        .get_ref()
        .is_some_and(|inner| inner.is::<rustls::Error>());
    if tls {
        ClientError::Tls {
            addr: addr.to_string(),
            reason: crate::tls::explain(&source),
        }
    } else {
        ClientError::Io {
            addr: addr.to_string(),
            source,
        }
    }
}
