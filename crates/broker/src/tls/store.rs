//! Reading keystores and truststores (PEM, PKCS#12) into rustls types, and
//! the file stamps that tell when they changed.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use rustls::RootCertStore;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use super::{KeyStoreSource, StoreType, TlsError, TlsSettings, TrustStoreSource};

/// What identifies a version of a file: modification time, size and inode
/// (a file replaced by rename has a new inode even within one clock tick).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileStamp {
    path: PathBuf,
    /// None when the file cannot be read (then any later state differs).
    seen: Option<(i64, i64, u64, u64)>,
}

/// The stamps of the files `s` loads from.
pub fn stamps(s: &TlsSettings) -> Vec<FileStamp> {
    let mut paths = Vec::new();
    if let KeyStoreSource::File { path, .. } = &s.keystore {
        paths.push(path.clone());
    }
    if let Some(TrustStoreSource::File { path, .. }) = &s.truststore {
        paths.push(path.clone());
    }
    paths.iter().map(|p| FileStamp::of(p)).collect()
}

impl FileStamp {
    /// The stamp of the file at `path` as it is now.
    pub fn of(path: &Path) -> FileStamp {
        let seen = std::fs::metadata(path)
            .ok()
            .map(|m| (m.mtime(), m.mtime_nsec(), m.len(), m.ino()));
        FileStamp {
            path: path.to_path_buf(),
            seen,
        }
    }
}

type Chain = Vec<CertificateDer<'static>>;

/// The certificate chain (leaf first) and private key of the keystore.
pub fn load_keystore(s: &TlsSettings) -> Result<(Chain, PrivateKeyDer<'static>), TlsError> {
    let err = |what: String, reason: String| TlsError {
        listener: s.listener.clone(),
        what,
        reason,
    };
    match &s.keystore {
        KeyStoreSource::Inline { chain, key } => {
            let what = "ssl.keystore.certificate.chain".to_string();
            let certs =
                weir_client::pem::certs(chain.0.as_bytes()).map_err(|e| err(what.clone(), e))?;
            if certs.is_empty() {
                return Err(err(what, "no CERTIFICATE in it".into()));
            }
            let key = weir_client::pem::key(key.0.as_bytes())
                .map_err(|e| err("ssl.keystore.key".into(), e))?;
            Ok((certs, key))
        }
        KeyStoreSource::File {
            path,
            kind,
            password,
        } => {
            let what = format!("ssl.keystore.location {}", path.display());
            let data = read(path).map_err(|e| err(what.clone(), e))?;
            match kind.unwrap_or_else(|| sniff(&data)) {
                StoreType::Pem => {
                    let certs = weir_client::pem::certs(&data).map_err(|e| err(what.clone(), e))?;
                    if certs.is_empty() {
                        return Err(err(what, "no CERTIFICATE in the PEM file".into()));
                    }
                    let key = weir_client::pem::key(&data).map_err(|e| err(what, e))?;
                    Ok((certs, key))
                }
                StoreType::Pkcs12 => {
                    let password = password.as_ref().map_or("", |p| p.0.as_str());
                    let store = p12_keystore::KeyStore::from_pkcs12(
                        &data,
                        password,
                        p12_keystore::Pkcs12ImportPolicy::Strict,
                    )
                    .map_err(|e| err(what.clone(), weir_client::pem::pkcs12_reason(&e)))?;
                    let (_, entry) = store.private_key_chain().ok_or_else(|| {
                        err(
                            what,
                            "no private key with its certificate chain in it".into(),
                        )
                    })?;
                    let certs = entry
                        .certs()
                        .iter()
                        .map(|c| CertificateDer::from(c.as_der().to_vec()))
                        .collect();
                    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
                        entry.key().as_der().to_vec(),
                    ));
                    Ok((certs, key))
                }
            }
        }
    }
}

/// The trust anchors of the truststore.
pub fn load_truststore(
    s: &TlsSettings,
    trust: &TrustStoreSource,
) -> Result<RootCertStore, TlsError> {
    let err = |what: String, reason: String| TlsError {
        listener: s.listener.clone(),
        what,
        reason,
    };
    let (what, certs) = match trust {
        TrustStoreSource::Inline(pem) => {
            let what = "ssl.truststore.certificates".to_string();
            let certs =
                weir_client::pem::certs(pem.0.as_bytes()).map_err(|e| err(what.clone(), e))?;
            (what, certs)
        }
        TrustStoreSource::File {
            path,
            kind,
            password,
        } => {
            let what = format!("ssl.truststore.location {}", path.display());
            let data = read(path).map_err(|e| err(what.clone(), e))?;
            let certs = match kind.unwrap_or_else(|| sniff(&data)) {
                StoreType::Pem => {
                    weir_client::pem::certs(&data).map_err(|e| err(what.clone(), e))?
                }
                StoreType::Pkcs12 => {
                    let password = password.as_ref().map_or("", |p| p.0.as_str());
                    p12_keystore::Pkcs12Archive::from_pkcs12(&data, password)
                        .map_err(|e| err(what.clone(), weir_client::pem::pkcs12_reason(&e)))?
                        .certs
                        .iter()
                        .map(|bag| CertificateDer::from(bag.cert.as_der().to_vec()))
                        .collect()
                }
            };
            (what, certs)
        }
    };
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(err(
            what,
            format!("no usable CA certificate in it ({ignored} could not be used)"),
        ));
    }
    Ok(roots)
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("cannot read it: {e}"))
}

/// PEM text starts with `-----BEGIN` (after blank lines or comments);
/// anything else is taken as PKCS#12 DER.
fn sniff(data: &[u8]) -> StoreType {
    let text = String::from_utf8_lossy(data.get(..data.len().min(64 * 1024)).unwrap_or(data));
    if text.contains("-----BEGIN ") {
        StoreType::Pem
    } else {
        StoreType::Pkcs12
    }
}
