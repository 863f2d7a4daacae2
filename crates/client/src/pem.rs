//! Reading certificate chains and private keys from PEM, and PKCS#12
//! errors in words: shared by the client's TLS settings and the broker's
//! keystores, so both say the same thing about the same file.

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

/// Every certificate of a PEM text, in order.
pub fn certs(data: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    CertificateDer::pem_slice_iter(data)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not valid PEM: {e}"))
}

/// The private key of a PEM text (PKCS#8, PKCS#1 or SEC1); an encrypted
/// one is refused with what to do instead.
pub fn key(data: &[u8]) -> Result<PrivateKeyDer<'static>, String> {
    if String::from_utf8_lossy(data).contains("-----BEGIN ENCRYPTED PRIVATE KEY") {
        return Err(
            "the private key is encrypted; store it unencrypted (PKCS#8) or use a PKCS12 \
             keystore"
                .into(),
        );
    }
    PrivateKeyDer::from_pem_slice(data).map_err(|e| match e {
        rustls_pki_types::pem::Error::NoItemsFound => "no PRIVATE KEY in it".to_string(),
        e => format!("the private key is not valid PEM: {e}"),
    })
}

/// A PKCS12 error as a reader understands it: most often the password.
pub fn pkcs12_reason(e: &p12_keystore::error::Error) -> String {
    let detail = e.to_string();
    if detail.to_ascii_lowercase().contains("mac") {
        format!("wrong password, or a damaged file ({detail})")
    } else {
        format!("not a PKCS12 store this password opens ({detail})")
    }
}
