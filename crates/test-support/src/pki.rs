//! Test certificates made on the spot: a CA, server certificates for
//! 127.0.0.1 and localhost, client certificates, as PEM text and PKCS#12
//! stores (for SSL listener tests).
//!
//! ```
//! let pki = weir_test_support::pki::TestPki::new();
//! let server = pki.server("broker", 7);
//! assert!(server.keystore_pem().contains("PRIVATE KEY"));
//! assert!(!server.pkcs12("changeit").is_empty());
//! ```

use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};

/// A certificate authority that issues the test certificates.
pub struct TestPki {
    issuer: Issuer<'static, KeyPair>,
    ca_pem: String,
    ca_der: Vec<u8>,
}

/// A certificate signed by the test CA with its private key.
pub struct Issued {
    pub cert_pem: String,
    pub cert_der: Vec<u8>,
    /// PKCS#8.
    pub key_pem: String,
    pub key_der: Vec<u8>,
    ca_der: Vec<u8>,
    ca_pem: String,
}

impl Default for TestPki {
    fn default() -> Self {
        TestPki::new()
    }
}

impl TestPki {
    // Test set-up: a failure to make a certificate is a broken test.
    #[allow(clippy::expect_used)]
    pub fn new() -> TestPki {
        let key = KeyPair::generate().expect("CA key");
        let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "weir test CA");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).expect("CA certificate");
        TestPki {
            ca_pem: cert.pem(),
            ca_der: cert.der().to_vec(),
            issuer: Issuer::new(params, key),
        }
    }

    /// The CA certificate (a truststore's content).
    pub fn ca_pem(&self) -> &str {
        &self.ca_pem
    }

    pub fn ca_der(&self) -> &[u8] {
        &self.ca_der
    }

    /// A server certificate for `127.0.0.1` and `localhost` with subject
    /// `CN=<cn>,O=weir` and the given serial number.
    pub fn server(&self, cn: &str, serial: u64) -> Issued {
        self.issue(
            cn,
            None,
            serial,
            vec!["127.0.0.1".into(), "localhost".into()],
            ExtendedKeyUsagePurpose::ServerAuth,
        )
    }

    /// A client certificate with subject `CN=<cn>,OU=<ou>,O=weir` (OU
    /// when given).
    pub fn client(&self, cn: &str, ou: Option<&str>) -> Issued {
        self.issue(cn, ou, 1000, vec![], ExtendedKeyUsagePurpose::ClientAuth)
    }

    #[allow(clippy::expect_used)]
    fn issue(
        &self,
        cn: &str,
        ou: Option<&str>,
        serial: u64,
        names: Vec<String>,
        usage: ExtendedKeyUsagePurpose,
    ) -> Issued {
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(names).expect("params");
        // most general first, as in most certificates: the subject reads
        // `CN=<cn>,OU=<ou>,O=weir` in RFC 2253 order
        params.distinguished_name = DistinguishedName::new();
        params
            .distinguished_name
            .push(DnType::OrganizationName, "weir");
        if let Some(ou) = ou {
            params
                .distinguished_name
                .push(DnType::OrganizationalUnitName, ou);
        }
        params.distinguished_name.push(DnType::CommonName, cn);
        params.serial_number = Some(SerialNumber::from(serial));
        params.extended_key_usages = vec![usage];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        let cert = params.signed_by(&key, &self.issuer).expect("certificate");
        Issued {
            cert_pem: cert.pem(),
            cert_der: cert.der().to_vec(),
            key_pem: key.serialize_pem(),
            key_der: key.serialize_der(),
            ca_der: self.ca_der.clone(),
            ca_pem: self.ca_pem.clone(),
        }
    }
}

impl Issued {
    /// A PEM keystore: the certificate chain (leaf, then the CA) and the
    /// key in one file, as `ssl.keystore.type=PEM` reads it.
    pub fn keystore_pem(&self) -> String {
        self.chain_pem() + &self.key_pem
    }

    /// The leaf and CA certificates.
    pub fn chain_pem(&self) -> String {
        format!("{}{}", self.cert_pem, self.ca_pem)
    }

    /// A PKCS#12 keystore with the key and chain under `password`.
    #[allow(clippy::expect_used)]
    pub fn pkcs12(&self, password: &str) -> Vec<u8> {
        let key = p12_keystore::PrivateKey::from_der(&self.key_der).expect("PKCS#8 key");
        let certs = [&self.cert_der, &self.ca_der]
            .into_iter()
            .map(|d| p12_keystore::Certificate::from_der(d).expect("certificate"));
        let chain = p12_keystore::PrivateKeyChain::new(b"weir-test".as_slice(), key, certs);
        let mut store = p12_keystore::KeyStore::new();
        store.add_entry("weir", p12_keystore::KeyStoreEntry::PrivateKeyChain(chain));
        store.writer(password).write().expect("PKCS#12")
    }
}

/// A CA-only PKCS#12 truststore under `password`.
#[allow(clippy::expect_used)]
pub fn pkcs12_truststore(ca_der: &[u8], password: &str) -> Vec<u8> {
    let mut store = p12_keystore::KeyStore::new();
    store.add_entry(
        "ca",
        p12_keystore::KeyStoreEntry::Certificate(
            p12_keystore::Certificate::from_der(ca_der).expect("certificate"),
        ),
    );
    store.writer(password).write().expect("PKCS#12")
}
