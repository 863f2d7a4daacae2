//! RFC 7677's SCRAM-SHA-256 example, and full exchanges against a client
//! written here from RFC 5802 (both hashes).

use super::*;

/// A SCRAM client: client-first, then client-final from server-first, then
/// a check of server-final.
struct Client {
    hash: ScramHash,
    user: String,
    password: String,
    nonce: String,
    gs2: String,
    first_bare: String,
    auth_message: String,
    salted: Vec<u8>,
}

impl Client {
    fn new(hash: ScramHash, user: &str, password: &str, nonce: &str) -> Client {
        Client {
            hash,
            user: user.into(),
            password: password.into(),
            nonce: nonce.into(),
            gs2: "n,,".into(),
            first_bare: String::new(),
            auth_message: String::new(),
            salted: Vec::new(),
        }
    }

    fn first(&mut self) -> Vec<u8> {
        let name = self.user.replace('=', "=3D").replace(',', "=2C");
        self.first_bare = format!("n={name},r={}", self.nonce);
        format!("{}{}", self.gs2, self.first_bare).into_bytes()
    }

    fn last(&mut self, server_first: &[u8]) -> Vec<u8> {
        let sf = std::str::from_utf8(server_first).unwrap();
        let mut nonce = "";
        let mut salt = Vec::new();
        let mut iterations = 0;
        for a in sf.split(',') {
            match a.split_at(2) {
                ("r=", v) => nonce = v,
                ("s=", v) => salt = B64.decode(v).unwrap(),
                ("i=", v) => iterations = v.parse().unwrap(),
                _ => {}
            }
        }
        assert!(nonce.starts_with(&self.nonce));
        let without_proof = format!("c={},r={nonce}", B64.encode(&self.gs2));
        self.auth_message = format!("{},{sf},{without_proof}", self.first_bare);
        self.salted = self
            .hash
            .salted_password(self.password.as_bytes(), &salt, iterations);
        let client_key = self.hash.hmac(&self.salted, b"Client Key");
        let stored = self.hash.hash(&client_key);
        let signature = self.hash.hmac(&stored, self.auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&signature)
            .map(|(a, b)| a ^ b)
            .collect();
        format!("{without_proof},p={}", B64.encode(proof)).into_bytes()
    }

    fn verify(&self, server_final: &[u8]) -> bool {
        let server_key = self.hash.hmac(&self.salted, b"Server Key");
        let expect = self.hash.hmac(&server_key, self.auth_message.as_bytes());
        server_final == format!("v={}", B64.encode(expect)).as_bytes()
    }
}

fn store(hash: ScramHash, user: &str, password: &str) -> StaticScramCredentials {
    let mut s = StaticScramCredentials::default();
    s.insert(
        hash,
        user,
        ScramCredential::from_password(hash, password, b"0123456789abcdef", MIN_ITERATIONS),
    );
    s
}

#[test]
fn rfc_7677_example() {
    let mut creds = StaticScramCredentials::default();
    let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    creds.insert(
        ScramHash::Sha256,
        "user",
        ScramCredential::from_password(ScramHash::Sha256, "pencil", &salt, 4096),
    );
    let mut server = ScramServer::new(
        ScramHash::Sha256,
        "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0".into(),
        [7; 32],
    );
    let first = server
        .step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO", &creds)
        .unwrap();
    assert_eq!(
        first,
        ScramStep::Continue(
            b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
                .to_vec()
        )
    );
    let last = server
        .step(
            b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,\
              p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=",
            &creds,
        )
        .unwrap();
    assert_eq!(
        last,
        ScramStep::Done {
            user: "user".into(),
            response: b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=".to_vec(),
        }
    );
}

fn exchange(
    hash: ScramHash,
    creds: &StaticScramCredentials,
    client: &mut Client,
) -> Result<String, SaslError> {
    let mut server = ScramServer::new(hash, "snonce+/=".into(), [9; 32]);
    let ScramStep::Continue(sf) = server.step(&client.first(), creds)? else {
        panic!("server finished after client-first");
    };
    match server.step(&client.last(&sf), creds)? {
        ScramStep::Done { user, response } => {
            assert!(client.verify(&response), "server signature");
            Ok(user)
        }
        ScramStep::Continue(_) => panic!("server wants more after client-final"),
    }
}

#[test]
fn round_trip_both_hashes() {
    for hash in [ScramHash::Sha256, ScramHash::Sha512] {
        let creds = store(hash, "al,i=ce", "secret");
        let mut c = Client::new(hash, "al,i=ce", "secret", "cnonce");
        assert_eq!(exchange(hash, &creds, &mut c).unwrap(), "al,i=ce");
        // the same user with an authzid naming itself
        let mut c = Client::new(hash, "al,i=ce", "secret", "cnonce");
        c.gs2 = "n,a=al=2Ci=3Dce,".into();
        assert_eq!(exchange(hash, &creds, &mut c).unwrap(), "al,i=ce");
    }
}

#[test]
fn wrong_password_unknown_user_and_other_hash_fail() {
    let creds = store(ScramHash::Sha256, "alice", "secret");
    let mut c = Client::new(ScramHash::Sha256, "alice", "wrong", "n1");
    let e = exchange(ScramHash::Sha256, &creds, &mut c).unwrap_err();
    assert!(e.to_string().contains("wrong password"), "{e}");
    let mut c = Client::new(ScramHash::Sha256, "bob", "secret", "n1");
    let e = exchange(ScramHash::Sha256, &creds, &mut c).unwrap_err();
    assert!(e.to_string().contains("unknown user"), "{e}");
    // a SHA-256 credential does not serve SCRAM-SHA-512
    let mut c = Client::new(ScramHash::Sha512, "alice", "secret", "n1");
    assert!(exchange(ScramHash::Sha512, &creds, &mut c).is_err());
}

#[test]
fn unknown_user_gets_a_stable_plausible_salt() {
    let creds = store(ScramHash::Sha256, "alice", "secret");
    let first = |user: &str| {
        let mut s = ScramServer::new(ScramHash::Sha256, "sn".into(), [1; 32]);
        match s
            .step(format!("n,,n={user},r=c").as_bytes(), &creds)
            .unwrap()
        {
            ScramStep::Continue(sf) => String::from_utf8(sf).unwrap(),
            other => panic!("{other:?}"),
        }
    };
    let bob = first("bob");
    assert_eq!(bob, first("bob"));
    assert_ne!(bob, first("carol"));
    assert!(bob.ends_with(",i=4096"), "{bob}");
    assert_eq!(first("alice").len(), bob.len());
}

#[test]
fn malformed_and_refused_messages() {
    let creds = store(ScramHash::Sha256, "alice", "secret");
    for (msg, why) in [
        ("p=tls-unique,,n=alice,r=x", "channel binding"),
        ("y,,n=alice,r=x", "channel binding"),
        ("n,,r=x", "no user name"),
        ("n,,n=alice", "no nonce"),
        ("n,,n=alice,r=", "no nonce"),
        ("n,,n=al=ice,r=x", "escape"),
        ("n,a=bob,n=alice,r=x", "authorization id differs"),
        ("n,,n=alice,r=x,tokenauth=true", "delegation tokens"),
        ("n,n=alice,r=x", "no user name"),
        ("garbage", "GS2 header"),
    ] {
        let mut s = ScramServer::new(ScramHash::Sha256, "sn".into(), [1; 32]);
        let e = s.step(msg.as_bytes(), &creds).unwrap_err();
        assert!(e.to_string().contains(why), "{msg}: {e}");
    }
    // other extensions are ignored
    let mut s = ScramServer::new(ScramHash::Sha256, "sn".into(), [1; 32]);
    assert!(s.step(b"n,,n=alice,r=x,ext=1", &creds).is_ok());

    // client-final checks, after a good client-first
    let cases = [
        ("c=biws,r=xsn", "no proof"),
        ("c=eSws,r=xsn,p=AAAA", "channel binding"),
        ("c=biws,r=xother,p=AAAA", "nonce does not match"),
        ("c=biws,r=xsn,p=!!", "not base64"),
        ("c=biws,r=xsn,p=AAAA", "wrong length"),
    ];
    for (msg, why) in cases {
        let mut s = ScramServer::new(ScramHash::Sha256, "sn".into(), [1; 32]);
        s.step(b"n,,n=alice,r=x", &creds).unwrap();
        let e = s.step(msg.as_bytes(), &creds).unwrap_err();
        assert!(e.to_string().contains(why), "{msg}: {e}");
        // after a failure the exchange is over
        assert!(s.step(msg.as_bytes(), &creds).is_err());
    }
}

#[test]
fn too_few_iterations_are_refused() {
    let mut creds = StaticScramCredentials::default();
    creds.insert(
        ScramHash::Sha256,
        "alice",
        ScramCredential::from_password(ScramHash::Sha256, "secret", b"salt", 4095),
    );
    let mut s = ScramServer::new(ScramHash::Sha256, "sn".into(), [1; 32]);
    let e = s.step(b"n,,n=alice,r=x", &creds).unwrap_err();
    assert!(e.to_string().contains("iterations"), "{e}");
}
