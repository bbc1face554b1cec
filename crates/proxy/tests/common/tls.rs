//! Test certificates, made fresh by each test with rcgen (no key is ever committed): a CA,
//! and leaf certificates signed by it for the nodes, the proxy and its clients, written
//! as PEM files into a directory the test owns.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::BytesMut;

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    SanType,
};

/// A CA that signs leaves into `dir`.
pub struct Pki {
    pub dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
    /// The CA certificate's PEM file.
    pub ca: PathBuf,
}

/// One leaf's files.
#[derive(Clone, Debug)]
pub struct Leaf {
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl Pki {
    /// A new CA named `name`, its certificate written to `dir/<name>-ca.crt`.
    pub fn new(dir: &Path, name: &str) -> Pki {
        std::fs::create_dir_all(dir).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        let cert = params.self_signed(&key).unwrap();
        let ca = dir.join(format!("{name}-ca.crt"));
        std::fs::write(&ca, cert.pem()).unwrap();
        Pki {
            dir: dir.to_path_buf(),
            issuer: Issuer::new(params, key),
            ca,
        }
    }

    /// A leaf for 127.0.0.1 and `dns_names`, good for servers and clients alike, valid
    /// for `days` from now less half a day (so it has `days - 1` whole days left).
    pub fn leaf(&self, name: &str, dns_names: &[&str], days: i64) -> Leaf {
        let names: Vec<String> = dns_names.iter().map(|s| s.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .subject_alt_names
            .push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let now = time::OffsetDateTime::now_utc();
        params.not_before = now - time::Duration::days(1);
        // Half a day short, so "whole days left" reads days - 1 however fast a test runs
        // (expiring exactly `days` from now read `days` when the test ran within a second).
        params.not_after = now + time::Duration::days(days) - time::Duration::hours(12);
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let leaf = Leaf {
            cert: self.dir.join(format!("{name}.crt")),
            key: self.dir.join(format!("{name}.key")),
        };
        std::fs::write(&leaf.cert, cert.pem()).unwrap();
        std::fs::write(&leaf.key, key.serialize_pem()).unwrap();
        leaf
    }

    /// Files for a devcluster whose nodes use `leaf`.
    pub fn node_files(&self, leaf: &Leaf, auth_clients: bool) -> devcluster::TlsFiles {
        devcluster::TlsFiles {
            cert: leaf.cert.clone(),
            key: leaf.key.clone(),
            ca: self.ca.clone(),
            auth_clients,
        }
    }
}

/// A path as the config's string.
pub fn s(path: &Path) -> String {
    path.display().to_string()
}

/// A minimal blocking TLS RESP client (rustls), reading raw reply frames.
pub struct TlsClient {
    pub tls: rustls::StreamOwned<rustls::ClientConnection, TcpStream>,
    buf: BytesMut,
}

impl TlsClient {
    /// Connect to `addr`, expecting a certificate for `proxy.test` from `ca`.
    pub fn connect(addr: SocketAddr, ca: &Path) -> TlsClient {
        use rustls_pki_types::pem::PemObject;
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
            roots.add(cert.unwrap()).unwrap();
        }
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let name = rustls_pki_types::ServerName::try_from("proxy.test").unwrap();
        let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
        let tcp = TcpStream::connect(addr).unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        TlsClient {
            tls: rustls::StreamOwned::new(conn, tcp),
            buf: BytesMut::new(),
        }
    }

    pub fn send(&mut self, args: &[&[u8]]) {
        let mut out = BytesMut::new();
        resp::encode_command(&mut out, args);
        self.tls.write_all(&out).unwrap();
        self.tls.flush().unwrap();
    }

    pub fn read(&mut self) -> Vec<u8> {
        let mut framer = resp::ReplyFramer::new();
        loop {
            if let Some(len) = framer.next_frame(&self.buf).expect("valid reply") {
                return self.buf.split_to(len).to_vec();
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.tls.read(&mut chunk) {
                Ok(0) => panic!("proxy closed the connection"),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => panic!("read failed: {e}"),
            }
        }
    }

    /// The certificate the server presented.
    pub fn peer_certificate(&self) -> Vec<u8> {
        let certs = self
            .tls
            .conn
            .peer_certificates()
            .expect("a server certificate");
        certs[0].as_ref().to_vec()
    }
}
