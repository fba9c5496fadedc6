//! The pgwire side of `serve`: password logins, the read-only gate and the time limit in front
//! of datafusion-postgres' query service, which runs each statement on the current lake view.

use std::fmt::Debug;
use std::sync::Arc;
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
use pgwire::api::{ClientInfo, ClientPortalStore, ConnectionManager, ErrorHandler, PgWireServerHandlers, Type};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use super::guard;
use super::lake_view::{LakeViews, ViewError};
use super::users::UsersFile;

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
        let mut scram = ScramAuth::new(Arc::new(self.users.clone()));
        if let Some(pem) = &self.tls_cert_pem {
            if let Err(e) = scram.configure_certificate(pem) {
                tracing::warn!("SCRAM channel binding off: {e}");
            }
        }
        let mut parameters = DefaultServerParameterProvider::default();
        parameters.is_superuser = false;
        parameters.default_transaction_read_only = true;
        let login = SASLAuthStartupHandler::new(Arc::new(parameters)).with_scram(scram).with_connection_manager(self.connections.clone());
        Arc::new(Startup { login, over_limit: self.over_limit })
    }

    fn error_handler(&self) -> Arc<impl ErrorHandler> {
        Arc::new(LogErrors)
    }

    fn cancel_handler(&self) -> Arc<impl pgwire::api::cancel::CancelHandler> {
        Arc::new(DefaultCancelHandler::new(self.connections.clone()))
    }
}

/// The login, or the refusal of a connection over the limit.
struct Startup {
    login: SASLAuthStartupHandler<DefaultServerParameterProvider>,
    over_limit: bool,
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
        self.login.on_startup(client, message).await
    }
}

/// Refused logins and statements, in the server's log (never a password: SCRAM sends none).
struct LogErrors;

impl ErrorHandler for LogErrors {
    fn on_error<C: ClientInfo>(&self, client: &C, error: &mut PgWireError) {
        let user = client.metadata().get(pgwire::api::METADATA_USER).map_or("-", String::as_str);
        tracing::info!("to {user}@{}: {error}", client.socket_addr());
    }
}

fn user_error(severity: &str, code: &str, message: String) -> PgWireError {
    PgWireError::UserError(Box::new(ErrorInfo::new(severity.into(), code.into(), message)))
}

fn refused(r: guard::Refusal) -> PgWireError {
    user_error("ERROR", r.sqlstate(), r.to_string())
}

fn view_error(e: ViewError) -> PgWireError {
    tracing::error!("{e}");
    // 58030 io_error: the lake could not be read.
    user_error("ERROR", "58030", e.to_string())
}

/// The gate, the time limit and the current lake view in front of datafusion-postgres.
pub struct Queries {
    pub views: Arc<LakeViews>,
    /// The longest a statement may run; a client may ask for less, never more.
    pub max_statement_time: Option<Duration>,
    pub parser: Arc<GuardedParser>,
}

impl Queries {
    pub fn new(views: Arc<LakeViews>, max_statement_time: Option<Duration>) -> Self {
        Queries { parser: Arc::new(GuardedParser { views: views.clone() }), views, max_statement_time }
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

    async fn service(&self) -> PgWireResult<DfSessionService> {
        let view = self.views.current().await.map_err(view_error)?;
        self.views.service(&view).map_err(view_error)
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
        let service = self.service().await?;
        let responses = within(deadline, SimpleQueryHandler::do_query(&service, client, query)).await?;
        Ok(responses.into_iter().map(|r| rows_within(deadline, r)).collect())
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
        let service = self.service().await?;
        let response = within(deadline, ExtendedQueryHandler::do_query(&service, client, portal, max_rows)).await?;
        Ok(rows_within(deadline, response))
    }
}

fn timed_out() -> PgWireError {
    user_error("ERROR", "57014", "canceling statement due to statement timeout".into())
}

/// Planning, before the deadline.
async fn within<T>(deadline: Option<tokio::time::Instant>, work: impl std::future::Future<Output = PgWireResult<T>>) -> PgWireResult<T> {
    match deadline {
        Some(d) => tokio::time::timeout_at(d, work).await.map_err(|_| timed_out())?,
        None => work.await,
    }
}

/// The rows, before the deadline. DataFusion runs the plan as the rows are pulled, so this is
/// where a long statement spends its time. They are pulled by a task of their own while this
/// stream waits for them with the deadline: a plan busy for seconds between two rows cannot
/// hold the client's 57014 back. Past the deadline (or when the client goes) the task is
/// aborted, and the plan stops at its next yield.
fn rows_within(deadline: Option<tokio::time::Instant>, response: Response) -> Response {
    use futures::StreamExt;
    let (deadline, mut query) = match (deadline, response) {
        (Some(d), Response::Query(q)) => (d, q),
        (_, other) => return other,
    };
    let mut rows = std::mem::replace(&mut query.data_rows, Box::pin(futures::stream::empty()));
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    let puller = tokio::spawn(async move {
        while let Some(row) = rows.next().await {
            if tx.send(row).await.is_err() {
                break;
            }
        }
    });
    let guard = AbortOnDrop(puller.abort_handle());
    query.data_rows = Box::pin(futures::stream::unfold(Some((rx, puller, guard)), move |state| async move {
        let (mut rx, puller, guard) = state?;
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(row)) => Some((row, Some((rx, puller, guard)))),
            // The channel closed: the puller ended. Only a puller that ran to the end means the
            // rows are all here; one that panicked is an error, never a short result.
            Ok(None) => match puller.await {
                Ok(()) => None,
                Err(e) => {
                    tracing::error!("a statement's rows stopped: {e}");
                    Some((Err(user_error("ERROR", "XX000", format!("the statement stopped before its last row: {e}"))), None))
                }
            },
            Err(_) => Some((Err(timed_out()), None)),
        }
    }));
    Response::Query(query)
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
        let view = self.views.current().await.map_err(view_error)?;
        view.parser.parse_sql(client, sql, types).await
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
