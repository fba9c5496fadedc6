//! The read-only gate of ad hoc SQL: every statement is parsed and classified before anything
//! runs, and anything that could write, delete, register files or change settings is refused
//! with a message that names the statement kind.

use datafusion::sql::parser::{DFParser, Statement as DfStatement};
use datafusion::sql::sqlparser::ast::{Query, SetExpr, Statement};

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum GuardError {
    #[error("gpuledger query is read-only: {kind} statements are refused (allowed: SELECT, WITH, VALUES, EXPLAIN, SHOW, DESCRIBE)")]
    Refused { kind: String },
    #[error("give one statement at a time ({0} found)")]
    Several(usize),
    #[error("no SQL statement given")]
    Empty,
    #[error("SQL syntax: {0}")]
    Syntax(String),
}

impl crate::exit::ExitStatus for GuardError {
    fn exit_code(&self) -> Option<u8> {
        Some(crate::exit::USAGE)
    }
}

/// Accepts exactly one read-only statement; returns its kind (`SELECT`, `EXPLAIN`, ...).
pub fn check_read_only(sql: &str) -> Result<&'static str, GuardError> {
    let statements = DFParser::parse_sql(sql).map_err(|e| GuardError::Syntax(e.strip_backtrace()))?;
    match statements.len() {
        0 => Err(GuardError::Empty),
        1 => classify(&statements[0]),
        n => Err(GuardError::Several(n)),
    }
}

fn classify(statement: &DfStatement) -> Result<&'static str, GuardError> {
    match statement {
        DfStatement::Statement(s) => classify_sql(s),
        DfStatement::Explain(e) => classify(&e.statement).map(|_| "EXPLAIN"),
        DfStatement::CreateExternalTable(_) => Err(refused("CREATE EXTERNAL TABLE")),
        DfStatement::CopyTo(_) => Err(refused("COPY")),
        DfStatement::Reset(_) => Err(refused("RESET")),
    }
}

pub(crate) fn classify_sql(statement: &Statement) -> Result<&'static str, GuardError> {
    match statement {
        // A query may still write: `WITH x AS (...) INSERT ...` parses as a query whose body is
        // the INSERT, and `SELECT ... INTO t` creates a table.
        Statement::Query(q) => match query_write(q) {
            Some(kind) => Err(refused(&kind)),
            None => Ok("SELECT"),
        },
        Statement::Explain { statement, .. } => classify_sql(statement).map(|_| "EXPLAIN"),
        Statement::ExplainTable { .. } => Ok("DESCRIBE"),
        Statement::ShowTables { .. } => Ok("SHOW TABLES"),
        Statement::ShowColumns { .. } => Ok("SHOW COLUMNS"),
        Statement::ShowFunctions { .. } => Ok("SHOW FUNCTIONS"),
        Statement::ShowVariable { .. } => Ok("SHOW"),
        other => Err(refused(&statement_kind(other))),
    }
}

/// The kind of the first write inside a query (its body, its CTEs, its set operations), if any.
fn query_write(q: &Query) -> Option<String> {
    let in_ctes = q.with.as_ref().and_then(|w| w.cte_tables.iter().find_map(|cte| query_write(&cte.query)));
    in_ctes.or_else(|| set_expr_write(&q.body))
}

fn set_expr_write(e: &SetExpr) -> Option<String> {
    match e {
        SetExpr::Select(s) => s.into.as_ref().map(|_| "SELECT INTO".to_string()),
        SetExpr::Query(q) => query_write(q),
        SetExpr::SetOperation { left, right, .. } => set_expr_write(left).or_else(|| set_expr_write(right)),
        SetExpr::Values(_) | SetExpr::Table(_) => None,
        SetExpr::Insert(s) | SetExpr::Update(s) | SetExpr::Delete(s) | SetExpr::Merge(s) => Some(statement_kind(s)),
    }
}

fn refused(kind: &str) -> GuardError {
    GuardError::Refused { kind: kind.to_string() }
}

/// The leading keywords of a statement as printed: `CREATE TABLE`, `INSERT`, `SET`, ...
fn statement_kind(statement: &Statement) -> String {
    let text = statement.to_string();
    let words: Vec<&str> = text.split_whitespace().take(4).collect();
    let upper = |w: &str| w.to_ascii_uppercase();
    let take = match words.first().map(|w| upper(w)).as_deref() {
        Some("CREATE" | "DROP" | "ALTER" | "TRUNCATE") => {
            // CREATE [OR REPLACE] [EXTERNAL|TEMPORARY|UNIQUE] TABLE|VIEW|...
            let mut n = 1;
            while n < words.len() && matches!(upper(words[n]).as_str(), "OR" | "REPLACE" | "EXTERNAL" | "TEMPORARY" | "TEMP" | "UNIQUE" | "UNLOGGED") {
                n += 1;
            }
            (n + 1).min(words.len())
        }
        _ => 1,
    };
    words[..take].iter().map(|w| upper(w)).collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_pass_and_writes_are_named() {
        for sql in [
            "SELECT 1",
            "WITH x AS (SELECT 1 AS a) SELECT a FROM x",
            "VALUES (1), (2)",
            "EXPLAIN SELECT 1",
            "SHOW TABLES",
            "DESCRIBE gpu_samples",
            "select * from pods -- trailing comment",
        ] {
            assert!(check_read_only(sql).is_ok(), "{sql}: {:?}", check_read_only(sql));
        }
        for (sql, kind) in [
            ("CREATE TABLE t AS SELECT 1", "CREATE TABLE"),
            ("create or replace view v as select 1", "CREATE OR REPLACE VIEW"),
            ("CREATE EXTERNAL TABLE t STORED AS PARQUET LOCATION '/tmp/x'", "CREATE EXTERNAL TABLE"),
            ("INSERT INTO pods SELECT * FROM pods", "INSERT"),
            ("DELETE FROM pods", "DELETE"),
            ("UPDATE pods SET pod = 'x'", "UPDATE"),
            ("DROP TABLE gpu_samples", "DROP TABLE"),
            ("COPY (SELECT 1) TO '/tmp/out.csv'", "COPY"),
            ("SET datafusion.execution.batch_size = 1", "SET"),
            ("RESET datafusion.execution.batch_size", "RESET"),
            ("EXPLAIN INSERT INTO pods SELECT * FROM pods", "INSERT"),
            ("EXPLAIN COPY (SELECT 1) TO '/tmp/out.csv'", "COPY"),
            ("WITH x AS (SELECT 1 AS a) INSERT INTO pods SELECT * FROM pods", "INSERT"),
            ("WITH x AS (SELECT 1 AS a) UPDATE pods SET pod = 'x'", "UPDATE"),
            ("WITH x AS (SELECT 1 AS a) DELETE FROM pods", "DELETE"),
            ("SELECT * INTO copy_of_pods FROM pods", "SELECT INTO"),
            ("SELECT 1 UNION ALL SELECT * INTO t FROM pods", "SELECT INTO"),
            ("EXPLAIN WITH x AS (SELECT 1) INSERT INTO pods SELECT * FROM pods", "INSERT"),
        ] {
            match check_read_only(sql) {
                Err(GuardError::Refused { kind: k }) => assert_eq!(k, kind, "{sql}"),
                other => panic!("{sql}: {other:?}"),
            }
        }
        assert_eq!(check_read_only("SELECT 1; DROP TABLE pods"), Err(GuardError::Several(2)));
        assert_eq!(check_read_only("  ;"), Err(GuardError::Empty));
        assert!(matches!(check_read_only("SELEC 1"), Err(GuardError::Syntax(_))));
    }
}
