//! `SAVEPOINT`, `RELEASE SAVEPOINT` and `ROLLBACK TO SAVEPOINT` as the no-ops they are on a
//! read-only server: psycopg and SQLAlchemy wrap statements in savepoints, and DataFusion has
//! none. (datafusion-postgres' transaction hook would take `ROLLBACK TO` for a `ROLLBACK` and
//! end the transaction, so this hook goes before it.)

use std::sync::Arc;

use async_trait::async_trait;
use datafusion::common::{DFSchema, ParamValues};
use datafusion::logical_expr::{EmptyRelation, LogicalPlan};
use datafusion::prelude::SessionContext;
use datafusion::sql::sqlparser::ast::Statement;
use datafusion_postgres::hooks::HookClient;
use datafusion_postgres::pgwire::api::results::{Response, Tag};
use datafusion_postgres::pgwire::api::ClientInfo;
use datafusion_postgres::pgwire::error::PgWireResult;
use datafusion_postgres::QueryHook;

pub struct SavepointHook;

fn tag(statement: &Statement) -> Option<&'static str> {
    match statement {
        Statement::Savepoint { .. } => Some("SAVEPOINT"),
        Statement::ReleaseSavepoint { .. } => Some("RELEASE"),
        Statement::Rollback { savepoint: Some(_), .. } => Some("ROLLBACK"),
        _ => None,
    }
}

#[async_trait]
impl QueryHook for SavepointHook {
    async fn handle_simple_query(&self, statement: &Statement, _: &SessionContext, _: &mut dyn HookClient) -> Option<PgWireResult<Response>> {
        tag(statement).map(|t| Ok(Response::Execution(Tag::new(t))))
    }

    async fn handle_extended_parse_query(
        &self,
        statement: &Statement,
        _: &SessionContext,
        _: &(dyn ClientInfo + Send + Sync),
    ) -> Option<PgWireResult<LogicalPlan>> {
        tag(statement).map(|_| Ok(LogicalPlan::EmptyRelation(EmptyRelation { produce_one_row: false, schema: Arc::new(DFSchema::empty()) })))
    }

    async fn handle_extended_query(
        &self,
        statement: &Statement,
        _: &LogicalPlan,
        _: &ParamValues,
        _: &SessionContext,
        _: &mut dyn HookClient,
    ) -> Option<PgWireResult<Response>> {
        tag(statement).map(|t| Ok(Response::Execution(Tag::new(t))))
    }
}

/// The hooks every statement goes through: savepoints, then datafusion-postgres' own
/// (cursors, `SET`/`SHOW`, transactions).
pub fn hooks() -> Vec<Arc<dyn QueryHook>> {
    use datafusion_postgres::hooks::{cursor::CursorStatementHook, set_show::SetShowHook, transactions::TransactionStatementHook};
    vec![Arc::new(SavepointHook), Arc::new(CursorStatementHook), Arc::new(SetShowHook), Arc::new(TransactionStatementHook)]
}
