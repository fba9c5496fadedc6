//! What `serve` reads: the lake as one consistent snapshot, renewed when the lake changes.
//!
//! The collector publishes a day by renaming a new file over the old one. A query that listed
//! the old file and then read the new one would fail, or mix two versions. So on local disk
//! each view of the lake is a snapshot: hard links to every published file under
//! `<lake>/.snapshots/`, made in milliseconds and taking no space. A running query keeps
//! reading its snapshot (it is removed when the last query on it ends); the next statement
//! after a change gets a new one. Where hard links cannot be made (a lake on object storage, a
//! read-only mount), the view reads the lake itself, and says so once in the log.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use datafusion::prelude::SessionContext;
use datafusion_postgres::auth::AuthManager;
use datafusion_postgres::datafusion_pg_catalog::pg_catalog::setup_pg_catalog;
use datafusion_postgres::DfSessionService;

use crate::config::Config;
use crate::engine::{EngineError, SessionBuilder};
use crate::lake::{Lake, Table};

use super::users::{Login, Scope};

/// The folder under the lake's root that holds `serve`'s snapshots.
pub const SNAPSHOTS_DIR: &str = ".snapshots";

#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("listing the lake at {dir}")]
    List { dir: String, source: std::io::Error },
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error("setting up pg_catalog: {0}")]
    Catalog(String),
    #[error("resolving a user's scope to namespaces: {0}")]
    Scope(String),
}

/// Every published file of the lake with its size, time and inode: two equal fingerprints
/// mean the same lake.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Fingerprint(Vec<(PathBuf, u64, Option<SystemTime>, u64)>);

fn fingerprint(lake: &Lake) -> Result<Fingerprint, ViewError> {
    let mut files = Vec::new();
    for table in Table::ALL {
        let list = |source| ViewError::List { dir: lake.table_dir(table).display().to_string(), source };
        for path in lake.files(table).map_err(list)? {
            let meta = if lake.is_local() { std::fs::metadata(&path).ok() } else { None };
            use std::os::unix::fs::MetadataExt;
            files.push((path, meta.as_ref().map_or(0, |m| m.len()), meta.as_ref().and_then(|m| m.modified().ok()), meta.as_ref().map_or(0, |m| m.ino())));
        }
    }
    Ok(Fingerprint(files))
}

/// Hard links to one version of every published file; removed with its last user.
#[derive(Debug)]
pub struct Snapshot {
    dir: Option<PathBuf>,
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        if let Some(dir) = &self.dir {
            if let Err(e) = std::fs::remove_dir_all(dir) {
                tracing::warn!("removing the lake snapshot {}: {e}", dir.display());
            }
        }
    }
}

/// One version of the lake with its session (tables, views, config tables, pg_catalog).
pub struct View {
    fingerprint: Fingerprint,
    ctx: SessionContext,
    /// The lake the view's sessions read (its snapshot, or the lake in place).
    lake: Lake,
    snapshot: Arc<Snapshot>,
    pub parser: Arc<datafusion_postgres::Parser>,
    /// The sessions of scoped users, per scope, built on first use.
    scoped: Mutex<std::collections::HashMap<Scope, SessionContext>>,
}

/// The lake as `serve` shows it: the current [`View`], renewed when the lake changes.
pub struct LakeViews {
    lake: Lake,
    config: Config,
    builder: SessionBuilder,
    current: Mutex<Option<Arc<View>>>,
    renew: tokio::sync::Mutex<()>,
    /// Whether snapshots can be made here; turned off (with one warning) at the first failure.
    snapshots: Mutex<bool>,
    serial: AtomicU64,
}

impl LakeViews {
    pub fn new(lake: Lake, config: Config, builder: SessionBuilder) -> Self {
        let snapshots = lake.is_local();
        if snapshots {
            remove_stale_snapshots(&lake.root().join(SNAPSHOTS_DIR));
        }
        LakeViews {
            lake,
            config,
            builder,
            current: Mutex::new(None),
            renew: tokio::sync::Mutex::new(()),
            snapshots: Mutex::new(snapshots),
            serial: AtomicU64::new(0),
        }
    }

    /// The view for the lake as it is now (the current one if nothing changed).
    pub async fn current(&self) -> Result<Arc<View>, ViewError> {
        let _one_at_a_time = self.renew.lock().await;
        let now = fingerprint(&self.lake)?;
        if let Some(view) = self.current.lock().unwrap().as_ref().filter(|v| v.fingerprint == now) {
            return Ok(view.clone());
        }
        let view = match self.build(now).await {
            Ok(v) => Arc::new(v),
            // A collect between two files of a day (or a file lost by hand): the last view that
            // was whole serves on, from its snapshot, until the lake is whole again.
            Err(ViewError::Engine(e @ EngineError::NotAsPublished { .. })) => match self.latest() {
                Some(old) => {
                    tracing::warn!("serving the lake as it was: {}", crate::error_chain::Chain(&e));
                    return Ok(old);
                }
                None => return Err(e.into()),
            },
            Err(e) => return Err(e),
        };
        *self.current.lock().unwrap() = Some(view.clone());
        Ok(view)
    }

    /// The last view built (for what needs no lake: a statement's parameter types).
    pub fn latest(&self) -> Option<Arc<View>> {
        self.current.lock().unwrap().clone()
    }

    /// A query service over `view` with a memory pool of its own (the engine's limit per
    /// statement) that keeps the view's snapshot while anything of it runs.
    /// A statement's session for `login` on `view`, and its parser: the view's tables (a scoped
    /// user's: only its namespaces' rows), a memory pool of its own, `current_user` the login.
    pub async fn session(&self, view: &View, login: &Login) -> Result<(DfSessionService, Arc<datafusion_postgres::Parser>), ViewError> {
        let base = match &login.scope {
            None => view.ctx.clone(),
            Some(scope) => self.scoped(view, scope).await?,
        };
        let ctx = self.builder.fresh_runtime(&base, view.snapshot.clone())?;
        ctx.register_udf(session_user_function(&login.user));
        let service = DfSessionService::new_with_hooks(Arc::new(ctx), super::savepoints::hooks());
        let parser = <DfSessionService as datafusion_postgres::pgwire::api::query::ExtendedQueryHandler>::query_parser(&service);
        Ok((service, parser))
    }

    /// The session of `scope` on `view`: the view's lake with every table that has a
    /// `namespace` column limited to the scope's namespaces (those named, and those the `teams`
    /// table maps to its teams and cost centres).
    async fn scoped(&self, view: &View, scope: &Scope) -> Result<SessionContext, ViewError> {
        if let Some(ctx) = view.scoped.lock().unwrap().get(scope) {
            return Ok(ctx.clone());
        }
        let namespaces = scope_namespaces(&view.ctx, scope).await?;
        tracing::info!("a scope of {} namespace(s): {}", namespaces.len(), namespaces.join(", "));
        let ctx = self.builder.clone().namespaces(Some(namespaces)).build(&view.lake, &self.config).await?;
        for_clients(&ctx)?;
        view.scoped.lock().unwrap().insert(scope.clone(), ctx.clone());
        Ok(ctx)
    }

    async fn build(&self, fingerprint: Fingerprint) -> Result<View, ViewError> {
        let started = std::time::Instant::now();
        // The snapshot holds no record of what was published: the lake itself is checked.
        crate::engine::check_published(&self.lake)?;
        let snapshot = self.snapshot(&fingerprint);
        let lake = match &snapshot.dir {
            Some(dir) => Lake::new(dir),
            None => self.lake.clone(),
        };
        let ctx = self.builder.build(&lake, &self.config).await?;
        for_clients(&ctx)?;
        let service = DfSessionService::new_with_hooks(Arc::new(ctx.clone()), super::savepoints::hooks());
        let parser = <DfSessionService as datafusion_postgres::pgwire::api::query::ExtendedQueryHandler>::query_parser(&service);
        tracing::info!(
            "serving the lake with {} files{} ({} ms)",
            fingerprint.0.len(),
            if snapshot.dir.is_some() { " (a snapshot)" } else { "" },
            started.elapsed().as_millis()
        );
        Ok(View { fingerprint, ctx, lake, snapshot: Arc::new(snapshot), parser, scoped: Mutex::default() })
    }

    /// Hard links to the fingerprint's files; none (the lake read in place) where that fails.
    fn snapshot(&self, fingerprint: &Fingerprint) -> Snapshot {
        if !*self.snapshots.lock().unwrap() {
            return Snapshot { dir: None };
        }
        let name = format!("{}-{}", std::process::id(), self.serial.fetch_add(1, Ordering::Relaxed));
        let dir = self.lake.root().join(SNAPSHOTS_DIR).join(name);
        match link_all(self.lake.root(), &dir, fingerprint) {
            Ok(()) => Snapshot { dir: Some(dir) },
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                tracing::warn!(
                    "cannot snapshot the lake under {} ({}): reading it in place, so a day the collector republishes while a query reads it can fail that query",
                    dir.display(),
                    crate::error_chain::Chain(&e)
                );
                *self.snapshots.lock().unwrap() = false;
                Snapshot { dir: None }
            }
        }
    }
}

/// `version()` as Postgres words it: SQLAlchemy and other drivers parse "PostgreSQL X.Y" out of
/// it (pg_catalog's own says "Apache DataFusion ..."), and the rest names what answers.
/// What BI tools expect of a Postgres beside the tables: `pg_catalog`, `version()`, `to_regtype`.
fn for_clients(ctx: &SessionContext) -> Result<(), ViewError> {
    setup_pg_catalog(ctx, "datafusion", Arc::new(AuthManager::new())).map_err(|e| ViewError::Catalog(e.to_string()))?;
    ctx.register_udf(version_function());
    ctx.register_udf(to_regtype_function());
    Ok(())
}

/// The namespaces `scope` names, and those of its teams and cost centres in the `teams` table.
async fn scope_namespaces(ctx: &SessionContext, scope: &Scope) -> Result<Vec<String>, ViewError> {
    let list = |values: &std::collections::BTreeSet<String>| {
        let quoted: Vec<String> = values.iter().map(|v| format!("'{}'", v.replace('\'', "''"))).collect();
        if quoted.is_empty() {
            "NULL".to_string()
        } else {
            quoted.join(", ")
        }
    };
    let sql = format!(
        "SELECT DISTINCT CAST(namespace AS VARCHAR) AS namespace FROM teams WHERE team IN ({}) OR cost_centre IN ({})",
        list(&scope.teams),
        list(&scope.cost_centres)
    );
    let err = |e: datafusion::error::DataFusionError| ViewError::Scope(e.to_string());
    let batches = ctx.sql(&sql).await.map_err(err)?.collect().await.map_err(err)?;
    let mut namespaces: std::collections::BTreeSet<String> = scope.namespaces.clone();
    for b in &batches {
        let column =
            datafusion::arrow::compute::cast(b.column(0), &datafusion::arrow::datatypes::DataType::Utf8).map_err(|e| ViewError::Scope(e.to_string()))?;
        let strings =
            column.as_any().downcast_ref::<datafusion::arrow::array::StringArray>().ok_or_else(|| ViewError::Scope("namespace is not text".into()))?;
        namespaces.extend(strings.iter().flatten().map(str::to_string));
    }
    Ok(namespaces.into_iter().collect())
}

/// `current_user` (datafusion-postgres reads it as `session_user`): the login.
fn session_user_function(user: &str) -> datafusion::logical_expr::ScalarUDF {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::logical_expr::{create_udf, ColumnarValue, Volatility};
    let user = user.to_string();
    create_udf(
        "session_user",
        vec![],
        DataType::Utf8,
        Volatility::Stable,
        Arc::new(move |_| Ok(ColumnarValue::Scalar(datafusion::common::ScalarValue::Utf8(Some(user.clone()))))),
    )
}

fn version_function() -> datafusion::logical_expr::ScalarUDF {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::logical_expr::{create_udf, ColumnarValue, Volatility};
    let text = format!("PostgreSQL 16.6 (gpuledger {} serve, Apache DataFusion 55) on x86_64-pc-linux-gnu", env!("CARGO_PKG_VERSION"));
    create_udf(
        "version",
        vec![],
        DataType::Utf8,
        Volatility::Immutable,
        Arc::new(move |_| Ok(ColumnarValue::Scalar(datafusion::common::ScalarValue::Utf8(Some(text.clone()))))),
    )
}

/// `to_regtype(name)`: the OID of a type by name, NULL where there is none. Drivers ask it for
/// extension types (psycopg and SQLAlchemy for hstore at connect) that the lake never has.
fn to_regtype_function() -> datafusion::logical_expr::ScalarUDF {
    use datafusion::arrow::datatypes::DataType;
    use datafusion::logical_expr::{create_udf, ColumnarValue, Volatility};
    create_udf(
        "to_regtype",
        vec![DataType::Utf8],
        DataType::Int32,
        Volatility::Immutable,
        Arc::new(|_| Ok(ColumnarValue::Scalar(datafusion::common::ScalarValue::Int32(None)))),
    )
}

fn link_all(root: &Path, dir: &Path, fingerprint: &Fingerprint) -> std::io::Result<()> {
    for (path, ..) in &fingerprint.0 {
        let rel = path.strip_prefix(root).map_err(|_| std::io::Error::other(format!("{} is outside the lake", path.display())))?;
        let to = dir.join(rel);
        std::fs::create_dir_all(to.parent().expect("a file in a table folder"))?;
        link_one(path, &to)?;
    }
    // A lake with no files yet still gets its folder.
    std::fs::create_dir_all(dir)
}

/// Hard-links `path` at `to`. A file republished at this moment (a rename over it) can make
/// Linux answer ENOENT for a path that exists: the link resolved the old inode just as the
/// rename dropped its last name. So NotFound is retried while the path is there; the snapshot
/// then holds the new version whole (its fingerprint differs, so the next statement makes a new
/// snapshot). Only a file removed for good is left out.
fn link_one(path: &Path, to: &Path) -> std::io::Result<()> {
    let mut tries = 0;
    loop {
        match std::fs::hard_link(path, to) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && std::fs::symlink_metadata(path).is_ok() && tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && std::fs::symlink_metadata(path).is_err() => return Ok(()),
            Err(e) => return Err(e),
        }
    }
}

/// Snapshots a server left behind when it was killed (a day old: no statement runs that long).
fn remove_stale_snapshots(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let day = Duration::from_secs(24 * 3600);
    for e in entries.flatten() {
        let old = e.metadata().and_then(|m| m.modified()).ok().and_then(|t| t.elapsed().ok()).is_some_and(|age| age > day);
        if old {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    /// Linux answers ENOENT to link() on a path that is being renamed over (it always exists):
    /// a snapshot made then must still hold the file, in one version or the other.
    #[test]
    fn a_file_republished_while_it_is_linked_is_still_linked() {
        let dir = std::env::temp_dir().join(format!("gpuledger-link-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (file, tmp) = (dir.join("f.parquet"), dir.join("f.parquet.tmp"));
        std::fs::write(&file, b"a").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = {
            let (stop, file, tmp) = (stop.clone(), file.clone(), tmp.clone());
            std::thread::spawn(move || {
                let mut i = 0u32;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::fs::write(&tmp, if i % 2 == 0 { b"a" } else { b"b" }).unwrap();
                    std::fs::rename(&tmp, &file).unwrap();
                    i += 1;
                }
            })
        };
        let link = dir.join("link.parquet");
        for _ in 0..3000 {
            super::link_one(&file, &link).unwrap();
            let got = std::fs::read(&link).expect("the snapshot holds the file");
            assert!(got == b"a" || got == b"b", "{got:?}");
            std::fs::remove_file(&link).unwrap();
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        writer.join().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
