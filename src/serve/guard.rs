//! The read-only gate of `serve`: every statement a client sends is parsed as the server will
//! run it (the Postgres dialect, with datafusion-postgres' rewrites of what BI tools send) and
//! refused with a Postgres error code unless it only reads.
//!
//! Reads are what `gpuledger query` allows (SELECT, WITH, VALUES, EXPLAIN, SHOW, DESCRIBE).
//! A session also needs what drivers and BI tools send around them: `SET` of a client setting
//! (`application_name`, `extra_float_digits`, `DateStyle`, `statement_timeout`, `TIME ZONE`,
//! ...), `BEGIN`/`COMMIT`/`ROLLBACK`, and cursors (`DECLARE` of a read, `FETCH`, `CLOSE`).
//! Refused: every write or DDL, `COPY`, `SET` of an engine option (`datafusion.*`, any dotted
//! name), and table functions other than the few that generate rows (no function that reads a
//! file or URL is registered, and none may be called).

use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{Set, Statement, TableFactor, Visit, Visitor};
use datafusion_postgres::datafusion_pg_catalog::sql::PostgresCompatibilityParser;

/// Why a statement is refused, with its SQLSTATE.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// 25006 read_only_sql_transaction.
    #[error("gpuledger serve is read-only: {0} statements are refused")]
    Write(String),
    /// 42501 insufficient_privilege.
    #[error("gpuledger serve: SET {0} is refused (engine options are the server's; client settings such as application_name or statement_timeout may be set)")]
    EngineOption(String),
    /// 42501 insufficient_privilege.
    #[error("gpuledger serve: the table function {0} is refused (allowed: {allowed})", allowed = ROW_FUNCTIONS.join(", "))]
    TableFunction(String),
    /// 42601 syntax_error.
    #[error("SQL syntax: {0}")]
    Syntax(String),
}

impl Refusal {
    pub fn sqlstate(&self) -> &'static str {
        match self {
            Refusal::Write(_) => "25006",
            Refusal::EngineOption(_) | Refusal::TableFunction(_) => "42501",
            Refusal::Syntax(_) => "42601",
        }
    }
}

/// Table functions a client may call: they generate rows and read nothing.
const ROW_FUNCTIONS: &[&str] = &["generate_series", "range", "unnest"];

/// Accepts `sql` (one statement or several) when every statement is allowed.
pub fn check(sql: &str) -> Result<(), Refusal> {
    let statements = PostgresCompatibilityParser::new().parse(sql).map_err(|e| Refusal::Syntax(e.to_string()))?;
    statements.iter().try_for_each(check_statement)
}

fn check_statement(statement: &Statement) -> Result<(), Refusal> {
    match statement {
        Statement::Set(set) => check_set(set)?,
        // Savepoints: psycopg and SQLAlchemy wrap statements in them (nothing to undo here).
        Statement::StartTransaction { .. }
        | Statement::Commit { .. }
        | Statement::Rollback { .. }
        | Statement::Savepoint { .. }
        | Statement::ReleaseSavepoint { .. } => {}
        Statement::ShowVariable { .. } | Statement::ShowStatus { .. } | Statement::ShowCatalogs { .. } => {}
        Statement::Fetch { .. } | Statement::Close { .. } => {}
        Statement::Declare { stmts } => {
            for d in stmts {
                match &d.for_query {
                    Some(q) => crate::adhoc::guard::classify_sql(&Statement::Query(q.clone())).map_err(write)?,
                    None => return Err(Refusal::Write("DECLARE".into())),
                };
            }
        }
        other => {
            crate::adhoc::guard::classify_sql(other).map_err(write)?;
        }
    }
    match statement.visit(&mut TableFunctions) {
        ControlFlow::Break(name) => Err(Refusal::TableFunction(name)),
        ControlFlow::Continue(()) => Ok(()),
    }
}

fn write(e: crate::adhoc::GuardError) -> Refusal {
    match e {
        crate::adhoc::GuardError::Refused { kind } => Refusal::Write(kind),
        other => Refusal::Write(other.to_string()),
    }
}

/// A dotted name (`datafusion.execution.batch_size`, `ballista.job.name`) is an engine option;
/// the rest are client settings the session keeps for itself or ignores.
fn check_set(set: &Set) -> Result<(), Refusal> {
    let engine = |name: String| if name.contains('.') { Err(Refusal::EngineOption(name)) } else { Ok(()) };
    match set {
        Set::SingleAssignment { variable, .. } => engine(variable.to_string()),
        Set::ParenthesizedAssignments { variables, .. } => variables.iter().try_for_each(|v| engine(v.to_string())),
        Set::MultipleAssignments { assignments } => assignments.iter().try_for_each(|a| engine(a.name.to_string())),
        Set::SetTimeZone { .. } | Set::SetNames { .. } | Set::SetNamesDefault {} | Set::SetTransaction { .. } => Ok(()),
        other => Err(Refusal::Write(format!("SET {}", other.to_string().split_whitespace().nth(1).unwrap_or("")).trim().to_string())),
    }
}

/// The first table function outside [`ROW_FUNCTIONS`] in a statement.
struct TableFunctions;

impl Visitor for TableFunctions {
    type Break = String;

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<String> {
        let name = match factor {
            TableFactor::Table { name, args: Some(_), .. } | TableFactor::Function { name, .. } => name.to_string(),
            TableFactor::TableFunction { expr, .. } => expr.to_string(),
            _ => return ControlFlow::Continue(()),
        };
        let bare = name.split('(').next().unwrap_or("").rsplit('.').next().unwrap_or("").trim_matches('"').to_ascii_lowercase();
        if ROW_FUNCTIONS.contains(&bare.as_str()) {
            ControlFlow::Continue(())
        } else {
            ControlFlow::Break(name)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_and_session_statements_pass_writes_and_engine_options_do_not() {
        for sql in [
            "SELECT 1",
            "SELECT namespace, SUM(gpu_hours) FROM usage WHERE month = $1 GROUP BY 1",
            "SELECT c.relname FROM pg_catalog.pg_class c WHERE c.relkind = 'r'",
            "SELECT oid::regclass FROM pg_catalog.pg_class LIMIT 1",
            "SET application_name = 'PowerBI'",
            "SET extra_float_digits = 3",
            "SET statement_timeout = '5s'",
            "SET TIME ZONE 'UTC'",
            "BEGIN; SELECT 1; COMMIT",
            "ROLLBACK",
            "SAVEPOINT _pg3_1",
            "ROLLBACK TO SAVEPOINT _pg3_1",
            "RELEASE SAVEPOINT _pg3_1",
            "SHOW transaction isolation level",
            "DECLARE c CURSOR FOR SELECT * FROM pods",
            "FETCH 100 FROM c",
            "CLOSE c",
            "SELECT * FROM generate_series(1, 3)",
            "EXPLAIN SELECT * FROM gpu_samples",
        ] {
            assert_eq!(check(sql), Ok(()), "{sql}");
        }
        for (sql, code) in [
            ("INSERT INTO pods SELECT * FROM pods", "25006"),
            ("DELETE FROM gpu_samples", "25006"),
            ("UPDATE pods SET pod = 'x'", "25006"),
            ("CREATE TABLE t AS SELECT 1", "25006"),
            ("DROP VIEW usage", "25006"),
            ("COPY pods TO '/tmp/pods.csv'", "25006"),
            ("COPY pods FROM '/tmp/pods.csv'", "25006"),
            ("SELECT 1; DELETE FROM pods", "25006"),
            ("DECLARE c CURSOR FOR SELECT * INTO t FROM pods", "25006"),
            ("WITH x AS (SELECT 1) INSERT INTO pods SELECT * FROM pods", "25006"),
            ("SET datafusion.execution.batch_size = 1", "42501"),
            ("SET datafusion.runtime.memory_limit = '100G'", "42501"),
            ("SELECT * FROM read_parquet('/etc/passwd')", "42501"),
            ("SELECT * FROM read_csv('/etc/passwd')", "42501"),
            ("SELECT * FROM pods, LATERAL read_json('x')", "42501"),
            ("SELEC 1", "42601"),
        ] {
            match check(sql) {
                Err(r) => assert_eq!(r.sqlstate(), code, "{sql}: {r}"),
                Ok(()) => panic!("{sql} passed"),
            }
        }
    }
}
