//! The pgwire side of `serve`: password logins, the read-only gate and the time limit in front
//! of datafusion-postgres' query service, which runs each statement on the current lake view.

use std::fmt::Debug;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use datafusion_postgres::pgwire;
use datafusion_postgres::DfSessionService;
use futures::Sink;
use pgwire::api::auth::sasl::scram::ScramAuth;
use pgwire::api::auth::sasl::SASLAuthStartupHandler;
use pgwire::api::auth::{DefaultServerParameterProvider, StartupHandler};
use pgwire::api::cancel::DefaultCancelHandler;
use pgwire::api::portal::{Format, Portal};
use pgwire::api::query::{ExtendedQueryHandler, SimpleQueryHandler};
use pgwire::api::results::{FieldInfo, Response};
use pgwire::api::stmt::QueryParser;
use pgwire::api::store::PortalStore;
use pgwire::api::{ClientInfo, ClientPortalStore, ConnectionHandle, ConnectionManager, ErrorHandler, PgWireConnectionState, PgWireServerHandlers, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use tokio::sync::{oneshot, watch};

use super::guard;
use super::lake_view::{LakeViews, ViewError};
use super::throttle::FailedLogins;
use super::users::{Login, UsersFile};
use crate::limits::{ResultLimits, ResultMeter};

/// A statement as datafusion-postgres parses it (its SQL, and the parsed statement and plan).
type Statement = <DfSessionService as ExtendedQueryHandler>::Statement;

/// The client-metadata key datafusion-postgres reads a statement's time limit from (ms).
const STATEMENT_TIMEOUT_KEY: &str = "statement_timeout_ms";

/// Every connection's handlers.
pub struct Handlers {
    pub users: UsersFile,
    pub queries: Arc<Queries>,
    /// The server certificate (PEM), for SCRAM-SHA-256-PLUS channel binding over TLS.
    pub tls_cert_pem: Option<Vec<u8>>,
    pub connections: Arc<ConnectionManager>,
    /// Set on a connection over `serve.max_connections`: it is refused at startup.
    pub over_limit: bool,
    /// `serve.tls = "required"`: a plain-text connection is refused at startup.
    pub tls_required: bool,
    pub failed_logins: Arc<FailedLogins>,
    /// Told once the connection has logged in (the login time limit ends).
    pub logged_in: Mutex<Option<oneshot::Sender<()>>>,
    /// The connection's client gone, where it can be watched.
    pub hangup: Option<Hangup>,
}

impl PgWireServerHandlers for Handlers {
    fn simple_query_handler(&self) -> Arc<impl SimpleQueryHandler> {
        self.queries.clone()
    }

    fn extended_query_handler(&self) -> Arc<impl ExtendedQueryHandler> {
        self.queries.clone()
    }

    /// One per connection: SCRAM keeps the exchange's state in it.
    fn startup_handler(&self) -> Arc<impl StartupHandler> {
        let login = |certificate: Option<&Vec<u8>>| {
            let mut scram = ScramAuth::new(Arc::new(self.users.clone()));
            if let Some(pem) = certificate {
                if let Err(e) = scram.configure_certificate(pem) {
                    tracing::warn!("SCRAM channel binding off: {e}");
                }
            }
            let mut parameters = DefaultServerParameterProvider::default();
            parameters.is_superuser = false;
            parameters.default_transaction_read_only = true;
            SASLAuthStartupHandler::new(Arc::new(parameters)).with_scram(scram).with_connection_manager(self.connections.clone())
        };
        Arc::new(Startup {
            users: self.users.clone(),
            // SCRAM-SHA-256-PLUS binds to the TLS channel: offered over TLS only (libpq
            // refuses a server that offers it over plain text).
            plain: login(None),
            secure: login(self.tls_cert_pem.as_ref()),
            over_limit: self.over_limit,
            tls_required: self.tls_required,
            failed_logins: self.failed_logins.clone(),
            logged_in: Mutex::new(self.logged_in.lock().unwrap_or_else(|e| e.into_inner()).take()),
            max_statement_time: self.queries.max_statement_time,
            hangup: self.hangup.clone(),
        })
    }

    fn error_handler(&self) -> Arc<impl ErrorHandler> {
        Arc::new(LogErrors)
    }

    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        Arc::new(DefaultCancelHandler::new(self.connections.clone()))
    }
}

/// The login (SCRAM, slowed for an address that failed), or the refusal of a connection over
/// the limit or in plain text where TLS is required.
struct Startup {
    users: UsersFile,
    plain: SASLAuthStartupHandler<DefaultServerParameterProvider>,
    secure: SASLAuthStartupHandler<DefaultServerParameterProvider>,
    over_limit: bool,
    tls_required: bool,
    failed_logins: Arc<FailedLogins>,
    logged_in: Mutex<Option<oneshot::Sender<()>>>,
    max_statement_time: Option<Duration>,
    hangup: Option<Hangup>,
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(&self, client: &mut C, message: PgWireFrontendMessage) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        if self.over_limit {
            return Err(user_error("FATAL", "53300", "sorry, too many clients already (serve.max_connections)".into()));
        }
        let addr = client.socket_addr().ip();
        if matches!(message, PgWireFrontendMessage::Startup(_)) {
            if self.tls_required && !client.is_secure() {
                // 28000 invalid_authorization_specification, as Postgres' pg_hba "hostssl" says.
                return Err(user_error("FATAL", "28000", "this server requires TLS (serve.tls = \"required\"): connect with sslmode=require".into()));
            }
            let wait = self.failed_logins.turn(addr);
            if !wait.is_zero() {
                tracing::debug!("login from {addr} waits {} ms: recent failed logins", wait.as_millis());
                tokio::time::sleep(wait).await;
            }
        }
        let login = if client.is_secure() { &self.secure } else { &self.plain };
        let done = login.on_startup(client, message).await;
        if let Err(PgWireError::InvalidPassword(_)) = &done {
            let n = self.failed_logins.failed(addr);
            if n >= super::throttle::FREE {
                tracing::warn!("{n} failed logins from {addr} in the last minute: its logins are slowed");
            }
        }
        if done.is_ok() && matches!(client.state(), PgWireConnectionState::ReadyForQuery) {
            // Who logged in and what they may read, from the users file as it is now.
            let user = client.metadata().get(pgwire::api::METADATA_USER).cloned().unwrap_or_default();
            let users = self.users.read().map_err(|e| {
                tracing::error!("login refused: {}", crate::error_chain::Chain(&e));
                user_error("FATAL", "28000", "the server's users file cannot be read".into())
            })?;
            let scope = users.scopes.get(&user).cloned();
            client.session_extensions().insert(Login { user, scope });
            if let Some(h) = &self.hangup {
                client.session_extensions().insert(h.clone());
            }
            if let Some(tell) = self.logged_in.lock().unwrap_or_else(|e| e.into_inner()).take() {
                let _ = tell.send(());
            }
            // `SHOW statement_timeout` says the limit that applies from the start.
            settle_statement_timeout(client, self.max_statement_time);
        }
        done
    }
}

/// Keeps the session's `statement_timeout` what applies: the client's where it is shorter than
/// the server's limit, the server's where the client set none, 0 or more.
fn settle_statement_timeout<C: ClientInfo>(client: &mut C, max: Option<Duration>) {
    let Some(max) = max else { return };
    let asked = client.metadata().get(STATEMENT_TIMEOUT_KEY).and_then(|v| v.parse::<u64>().ok()).filter(|ms| *ms > 0).map(Duration::from_millis);
    let applies = asked.map_or(max, |a| a.min(max));
    client.metadata_mut().insert(STATEMENT_TIMEOUT_KEY.to_string(), applies.as_millis().to_string());
}

/// Refused logins and statements, in the server's log (never a password: SCRAM sends none).
struct LogErrors;

impl ErrorHandler for LogErrors {
    fn on_error<C: ClientInfo>(&self, client: &C, error: &mut PgWireError) {
        let user = client.metadata().get(pgwire::api::METADATA_USER).map_or("-", String::as_str);
        tracing::info!("to {}@{}: {}", shown_user(user), client.socket_addr(), shown_error(error, user));
    }
}

/// A user name as logged: one that holds the users file's separator is likely a password typed
/// into the user field (`alice:s3cret`), and is not shown.
fn shown_user(user: &str) -> &str {
    if user.contains(':') {
        "(a user name with ':', not shown)"
    } else {
        user
    }
}

/// An error as logged, without a user name that [`shown_user`] hides (pgwire names the user in
/// a failed login's message).
fn shown_error(error: &PgWireError, user: &str) -> String {
    let text = crate::error_chain::chain(error);
    if user.contains(':') {
        text.replace(user, shown_user(user))
    } else {
        text
    }
}

/// The connection's login (set when it logged in).
fn login_of<C: ClientInfo>(client: &C) -> PgWireResult<Arc<Login>> {
    client.session_extensions().get::<Login>().ok_or_else(|| user_error("FATAL", "28000", "not logged in".into()))
}

fn user_error(severity: &str, code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(severity.into(), code.into(), message)))
}

fn refused(r: guard::Refusal) -> PgWireError {
    user_error("ERROR", r.sqlstate(), crate::error_chain::chain(&r))
}

fn view_error(e: ViewError) -> PgWireError {
    tracing::error!("{}", crate::error_chain::Chain(&e));
    // 58030 io_error: the lake could not be read.
    user_error("ERROR", "58030", crate::error_chain::chain(&e))
}

/// The gate, the time limit, the result caps and the current lake view in front of
/// datafusion-postgres.
pub struct Queries {
    pub views: Arc<LakeViews>,
    /// The longest a statement may run; a client may ask for less, never more.
    pub max_statement_time: Option<Duration>,
    /// `engine.max_result_rows` and `engine.max_result_bytes`, per statement, as `query` has them.
    pub result_limits: ResultLimits,
    pub parser: Arc<GuardedParser>,
}

impl Queries {
    pub fn new(views: Arc<LakeViews>, max_statement_time: Option<Duration>, result_limits: ResultLimits) -> Self {
        Queries { parser: Arc::new(GuardedParser { views: views.clone() }), views, max_statement_time, result_limits }
    }

    /// When the statement must have sent its last row: the client's `SET statement_timeout`
    /// where it is shorter than the server's limit.
    fn deadline<C: ClientInfo>(&self, client: &C) -> Option<tokio::time::Instant> {
        let asked = client.metadata().get(STATEMENT_TIMEOUT_KEY).and_then(|v| v.parse::<u64>().ok()).filter(|ms| *ms > 0).map(Duration::from_millis);
        let limit = match (asked, self.max_statement_time) {
            (Some(a), Some(m)) => Some(a.min(m)),
            (a, m) => a.or(m),
        };
        limit.map(|l| tokio::time::Instant::now() + l)
    }

    /// The statement's session, on the current lake view, as the client's login sees it.
    async fn service<C: ClientInfo>(&self, client: &C) -> PgWireResult<DfSessionService> {
        let login = login_of(client)?;
        let view = self.views.current().await.map_err(view_error)?;
        Ok(self.views.session(&view, &login).await.map_err(view_error)?.0)
    }
}

#[async_trait]
impl SimpleQueryHandler for Queries {
    async fn do_query<C>(&self, client: &mut C, query: &str) -> PgWireResult<Vec<Response>>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        guard::check(query).map_err(refused)?;
        let deadline = self.deadline(client);
        let service = self.service(client).await?;
        let responses = within(deadline, SimpleQueryHandler::do_query(&service, client, query)).await;
        settle_statement_timeout(client, self.max_statement_time);
        let responses = responses?;
        let cancel = rows_cancel(client).await;
        Ok(responses.into_iter().map(|r| rows_within(deadline, self.result_limits, cancel.clone(), r)).collect())
    }
}

#[async_trait]
impl ExtendedQueryHandler for Queries {
    type Statement = Statement;
    type QueryParser = GuardedParser;

    fn query_parser(&self) -> Arc<GuardedParser> {
        self.parser.clone()
    }

    async fn do_query<C>(&self, client: &mut C, portal: &Portal<Statement>, max_rows: usize) -> PgWireResult<Response>
    where
        C: ClientInfo + ClientPortalStore + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::PortalStore: PortalStore<Statement = Statement>,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        // The statement passed the gate when it was parsed.
        let deadline = self.deadline(client);
        let service = self.service(client).await?;
        let response = within(deadline, ExtendedQueryHandler::do_query(&service, client, portal, max_rows)).await;
        settle_statement_timeout(client, self.max_statement_time);
        let response = response?;
        let cancel = rows_cancel(client).await;
        Ok(rows_within(deadline, self.result_limits, cancel, response))
    }
}

fn timed_out() -> PgWireError {
    user_error("ERROR", "57014", "canceling statement due to statement timeout".into())
}

fn canceled() -> PgWireError {
    user_error("ERROR", "57014", "canceling statement due to user request".into())
}

/// A client's CancelRequest, or the client gone, while the statement's rows are sent. pgwire
/// listens for a cancel while a statement is planned (`do_query`), not while its rows are
/// pulled, which is where the work is, and notices a client gone only when it next writes to
/// it: this asks for the connection's next cancel and passes it, with the connection's hang-up
/// (`Hangup`), on to the rows. It must be the last thing `do_query` awaits: it replaces the
/// cancel pgwire holds, which then resolves, and pgwire reads that as a cancel unless
/// `do_query` is done in the same poll (it polls the query first).
async fn rows_cancel<C: ClientInfo>(client: &C) -> Option<watch::Receiver<bool>> {
    let mut hangup = client.session_extensions().get::<Hangup>().map(|h| h.0.clone());
    let handle = client.session_extensions().get::<Arc<ConnectionHandle>>()?;
    let cancel = handle.start_query().await;
    let (tell, told) = watch::channel(false);
    tokio::spawn(async move {
        let hung_up = async {
            let gone = match hangup.as_mut() {
                Some(h) => h.wait_for(|gone| *gone).await.is_ok(),
                None => false,
            };
            if !gone {
                std::future::pending::<()>().await;
            }
        };
        tokio::select! {
            // Err: the connection went, or its next statement asked for its own cancel.
            canceled = cancel => if canceled.is_ok() {
                let _ = tell.send(true);
            },
            () = hung_up => {
                tracing::info!("a client went away during its statement: the statement stops");
                let _ = tell.send(true);
            }
            () = tell.closed() => {}
        }
    });
    Some(told)
}

/// Says when the connection's client has closed it (see `serve::hangup`).
#[derive(Debug, Clone)]
pub struct Hangup(pub watch::Receiver<bool>);

/// Resolves when `cancel` says so; never where there is none.
async fn canceled_by(cancel: &mut Option<watch::Receiver<bool>>) {
    match cancel {
        Some(c) => {
            if c.wait_for(|yes| *yes).await.is_err() {
                std::future::pending::<()>().await;
            }
        }
        None => std::future::pending().await,
    }
}

/// Planning, before the deadline.
async fn within<T>(deadline: Option<tokio::time::Instant>, work: impl std::future::Future<Output = PgWireResult<T>>) -> PgWireResult<T> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d, work).await.map_err(|_| timed_out())?,
        None => work.await,
    }
}

/// The rows, before the deadline and within the result caps. DataFusion runs the plan as the
/// rows are pulled, so this is where a long statement spends its time. They are pulled by a
/// task of their own while this stream waits for them with the deadline: a plan busy for
/// seconds between two rows cannot hold the client's 57014 back. Past the deadline or a cap, on
/// the client's CancelRequest (or when the client goes) the task is aborted, and the plan stops
/// at its next yield.
fn rows_within(deadline: Option<tokio::time::Instant>, limits: ResultLimits, cancel: Option<watch::Receiver<bool>>, response: Response) -> Response {
    use futures::StreamExt;
    let mut query = match response {
        Response::Query(q) => q,
        other => return other,
    };
    let mut rows = std::mem::replace(&mut query.data_rows, Box::pin(futures::stream::empty()));
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let puller = tokio::spawn(async move {
        let mut meter = ResultMeter::default();
        while let Some(row) = rows.next().await {
            // 54000 program_limit_exceeded: the statement asked for more than a result may hold.
            let row = row.and_then(|r| meter.add(&limits, 1, r.data.len()).map(|()| r).map_err(|m| user_error("ERROR", "54000", m)));
            let last = row.is_err();
            if tx.send(row).await.is_err() || last {
                break;
            }
        }
    });
    let guard = AbortOnDrop(puller.abort_handle());
    query.data_rows = Box::pin(futures::stream::unfold(Some((rx, puller, guard, cancel)), move |state| async move {
        let (mut rx, puller, guard, mut cancel) = state?;
        let next = tokio::select! {
            row = rx.recv() => Ok(row),
            () = until(deadline) => Err(timed_out()),
            () = canceled_by(&mut cancel) => Err(canceled()),
        };
        match next {
            // An error (a cap) is the last row.
            Ok(Some(Err(e))) => Some((Err(e), None)),
            Ok(Some(row)) => Some((row, Some((rx, puller, guard, cancel)))),
            // The channel closed: the puller ended. Only a puller that ran to the end means the
            // rows are all here; one that panicked is an error, never a short result.
            Ok(None) => match puller.await {
                Ok(()) => None,
                Err(e) => {
                    tracing::error!("a statement's rows stopped: {e}");
                    Some((Err(user_error("ERROR", "XX000", format!("the statement stopped before its last row: {e}"))), None))
                }
            },
            Err(stopped) => Some((Err(stopped), None)),
        }
    }));
    Response::Query(query)
}

/// Resolves at `deadline`; never where there is none.
async fn until(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// Stops a statement's work when its rows are no longer wanted.
struct AbortOnDrop(tokio::task::AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// datafusion-postgres' parser on the current view, behind the gate.
pub struct GuardedParser {
    views: Arc<LakeViews>,
}

#[async_trait]
impl QueryParser for GuardedParser {
    type Statement = Statement;

    async fn parse_sql<C>(&self, client: &C, sql: &str, types: &[Option<Type>]) -> PgWireResult<Option<Statement>>
    where
        C: ClientInfo + Unpin + Send + Sync,
    {
        guard::check(sql).map_err(refused)?;
        let login = login_of(client)?;
        let view = self.views.current().await.map_err(view_error)?;
        let (_, parser) = self.views.session(&view, &login).await.map_err(view_error)?;
        parser.parse_sql(client, sql, types).await
    }

    fn get_parameter_types(&self, stmt: &Statement) -> PgWireResult<Vec<Type>> {
        self.latest_parser()?.get_parameter_types(stmt)
    }

    fn get_result_schema(&self, stmt: &Statement, column_format: Option<&Format>) -> PgWireResult<Vec<FieldInfo>> {
        self.latest_parser()?.get_result_schema(stmt, column_format)
    }
}

impl GuardedParser {
    fn latest_parser(&self) -> PgWireResult<Arc<datafusion_postgres::Parser>> {
        self.views.latest().map(|v| v.parser.clone()).ok_or_else(|| user_error("ERROR", "XX000", "no statement was parsed yet".into()))
    }
}
