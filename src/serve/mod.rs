//! `gpuledger serve`: the lake, its views and the config tables over the PostgreSQL wire
//! protocol, read-only, for BI tools (Excel and Power BI through psqlODBC; Tableau, DBeaver and
//! Metabase through JDBC; Grafana's PostgreSQL source; psql and every driver).
//!
//! datafusion-postgres (on pgwire) speaks the protocol and provides `pg_catalog`; gpuledger
//! adds the logins ([`users`]), the read-only gate ([`guard`]), a consistent view of a lake
//! that the collector keeps publishing ([`lake_view`]) and the limits of each statement.

pub mod guard;
mod handlers;
pub mod lake_view;
mod savepoints;
mod throttle;
pub mod users;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use datafusion_postgres::pgwire;
use pgwire::api::ConnectionManager;
use pgwire::tokio::tokio_rustls::rustls;
use pgwire::tokio::tokio_rustls::TlsAcceptor;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::config::Config;
use crate::engine::SessionBuilder;
use crate::lake::Lake;
use handlers::{Handlers, Queries};
use lake_view::LakeViews;
use users::{UsersError, UsersFile};

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("serve needs a users file: --users FILE or serve.users_file (one user:password line per user)")]
    NoUsers,
    #[error(transparent)]
    Users(#[from] UsersError),
    #[error("serve: give both a TLS certificate and key (--tls-cert and --tls-key, or serve.tls_cert and serve.tls_key), or neither")]
    HalfTls,
    #[error("serve.tls = \"required\" (or --tls-required) needs a TLS certificate and key (--tls-cert and --tls-key, or serve.tls_cert and serve.tls_key)")]
    TlsRequiredWithout,
    #[error("TLS: {path}: {message}")]
    Tls { path: PathBuf, message: String },
    #[error("listen address {addr:?}: {message}")]
    Listen { addr: String, message: String },
    #[error("listening on {addr}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

/// A server that cannot start for its configuration (users file, TLS files, listen address)
/// exits 2: retrying will not help. An address already in use is a failure (1).
impl crate::exit::ExitStatus for ServeError {
    fn exit_code(&self) -> Option<u8> {
        match self {
            ServeError::Bind { .. } => None,
            _ => Some(crate::exit::USAGE),
        }
    }
}

/// Where and how to serve.
#[derive(Debug, Clone)]
pub struct ServeOptions {
    pub listen: String,
    pub users_file: Option<PathBuf>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
    pub max_connections: usize,
    pub statement_timeout: Option<Duration>,
    /// Plain-text connections refused.
    pub tls_required: bool,
    /// How long a connection has to log in.
    pub login_timeout: Duration,
}

impl ServeOptions {
    /// `[serve]`, with a statement time limit of `engine.query_timeout_secs` where
    /// `serve.statement_timeout_secs` is 0.
    pub fn from_config(config: &Config) -> Self {
        let s = &config.serve;
        let secs = if s.statement_timeout_secs > 0 { s.statement_timeout_secs } else { config.engine.query_timeout_secs };
        ServeOptions {
            listen: s.listen.clone(),
            users_file: s.users_file.clone(),
            tls_cert: s.tls_cert.clone(),
            tls_key: s.tls_key.clone(),
            max_connections: s.max_connections.max(1),
            statement_timeout: Some(secs).filter(|s| *s > 0).map(Duration::from_secs),
            tls_required: s.tls == crate::config::TlsMode::Required,
            login_timeout: Duration::from_secs(s.login_timeout_secs.max(1)),
        }
    }
}

/// How long a SIGTERMed server waits for the statements running to end.
const DRAIN: Duration = Duration::from_secs(5);

/// Serves until SIGINT or SIGTERM, then lets the statements running end (at most [`DRAIN`]).
pub async fn serve(lake: Lake, config: Config, builder: SessionBuilder, options: ServeOptions) -> anyhow::Result<()> {
    let users = UsersFile::open(options.users_file.as_deref().ok_or(ServeError::NoUsers)?).map_err(ServeError::Users)?;
    let tls = match (&options.tls_cert, &options.tls_key) {
        (Some(cert), Some(key)) => Some((tls_acceptor(cert, key)?, std::fs::read(cert).map_err(|e| tls_error(cert, e))?)),
        (None, None) => None,
        _ => return Err(ServeError::HalfTls.into()),
    };
    if options.tls_required && tls.is_none() {
        return Err(ServeError::TlsRequiredWithout.into());
    }
    let addr: SocketAddr = tokio::net::lookup_host(&options.listen)
        .await
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| ServeError::Listen { addr: options.listen.clone(), message: "expected HOST:PORT".into() })?;
    let listener = TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })?;
    let bound = listener.local_addr()?;
    if !bound.ip().is_loopback() && tls.is_none() {
        tracing::warn!("serving {bound} without TLS: logins are SCRAM-SHA-256 (no password crosses the wire), but queries and results do, in clear");
    }
    let builder_limits = builder.result_limits();
    let views = Arc::new(LakeViews::new(lake, config, builder));
    views.current().await?;
    let queries = Arc::new(Queries::new(views, options.statement_timeout, builder_limits));
    let connections = Arc::new(ConnectionManager::new());
    let slots = Arc::new(Semaphore::new(options.max_connections));
    let (acceptor, cert_pem) = match tls {
        Some((a, pem)) => (Some(a), Some(pem)),
        None => (None, None),
    };
    tracing::info!(
        "listening on {bound} ({}), {} user(s) from {}, read-only",
        match (&acceptor, options.tls_required) {
            (Some(_), true) => "TLS required",
            (Some(_), false) => "TLS",
            (None, _) => "no TLS",
        },
        users.read()?.passwords.len(),
        users.path().display()
    );
    let logins = Arc::new(throttle::FailedLogins::default());
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    loop {
        let (socket, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    tracing::warn!("accepting a connection: {e}");
                    continue;
                }
            },
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
        };
        let slot = slots.clone().try_acquire_owned().ok();
        if slot.is_none() {
            tracing::warn!("refusing {peer}: {} connections already (serve.max_connections)", options.max_connections);
        }
        let (logged_in, login) = tokio::sync::oneshot::channel();
        let hangup = match hangup(&socket) {
            Ok(h) => Some(handlers::Hangup(h)),
            Err(e) => {
                tracing::debug!("not watching {peer} for a hang-up: {e}");
                None
            }
        };
        let handlers = Arc::new(Handlers {
            users: users.clone(),
            queries: queries.clone(),
            tls_cert_pem: cert_pem.clone(),
            connections: connections.clone(),
            over_limit: slot.is_none(),
            tls_required: options.tls_required,
            failed_logins: logins.clone(),
            logged_in: std::sync::Mutex::new(Some(logged_in)),
            hangup,
        });
        let acceptor = acceptor.clone();
        let login_timeout = options.login_timeout;
        tokio::spawn(async move {
            let _slot = slot;
            let work = pgwire::tokio::process_socket(socket, acceptor, handlers);
            tokio::pin!(work);
            // A connection has `login_timeout` to log in; one that says nothing is closed and
            // frees its slot (pgwire's own limit is a minute).
            let done = tokio::select! {
                done = &mut work => done,
                login = tokio::time::timeout(login_timeout, login) => match login {
                    Err(_) => {
                        tracing::info!("closing {peer}: no login within {} s (serve.login_timeout_secs)", login_timeout.as_secs());
                        return;
                    }
                    Ok(_) => work.await,
                },
            };
            if let Err(e) = done {
                tracing::debug!("connection from {peer}: {}", crate::error_chain::Chain(&e));
            }
        });
    }
    tracing::info!("stopping: no new connections; waiting up to {} s for the statements running", DRAIN.as_secs());
    let all = u32::try_from(options.max_connections).unwrap_or(u32::MAX);
    if tokio::time::timeout(DRAIN, slots.acquire_many(all)).await.is_err() {
        tracing::warn!("stopping with {} connection(s) still open", options.max_connections - slots.available_permits());
    }
    Ok(())
}

/// Tells when the client of `socket` closes the connection (its FIN: a read would give 0 bytes),
/// watched on a second descriptor of the socket by peeking, so nothing pgwire reads is taken.
/// A client killed mid-statement sends no cancel; without this its statement would run on
/// until it sent a row or reached the time limit. Ends with the connection's handlers.
fn hangup(socket: &tokio::net::TcpStream) -> std::io::Result<tokio::sync::watch::Receiver<bool>> {
    use std::os::fd::AsFd;
    let second = std::net::TcpStream::from(socket.as_fd().try_clone_to_owned()?);
    second.set_nonblocking(true)?;
    let second = tokio::net::TcpStream::from_std(second)?;
    let (tell, told) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        let mut byte = [0u8; 1];
        loop {
            tokio::select! {
                peeked = second.peek(&mut byte) => match peeked {
                    // End of stream: the client closed (or was killed).
                    Ok(0) => {
                        let _ = tell.send(true);
                        return;
                    }
                    // Bytes pgwire has not read yet: look again in a while.
                    Ok(_) => tokio::time::sleep(Duration::from_millis(100)).await,
                    Err(_) => {
                        let _ = tell.send(true);
                        return;
                    }
                },
                () = tell.closed() => return,
            }
        }
    });
    Ok(told)
}

fn tls_error(path: &Path, e: impl std::fmt::Display) -> ServeError {
    ServeError::Tls { path: path.to_path_buf(), message: e.to_string() }
}

/// A TLS acceptor from PEM files: the certificate chain and its private key.
fn tls_acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor, ServeError> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = CertificateDer::pem_file_iter(cert).map_err(|e| tls_error(cert, e))?.collect::<Result<Vec<_>, _>>().map_err(|e| tls_error(cert, e))?;
    if certs.is_empty() {
        return Err(tls_error(cert, "no certificate in the file"));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| tls_error(key, e))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(cert, e))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| tls_error(key, e))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}
