//! Where the SQL runs: in this process (DataFusion, the default) or on an Apache DataFusion
//! Ballista cluster (`--engine ballista://HOST:PORT`, `engine.url`; cargo feature `ballista`).
//! `ballista://standalone` starts Ballista's scheduler and executor inside this process (for
//! trying it out, and for the tests that check both engines give the same reports).
//!
//! Ballista ships each query's logical plan to its scheduler, and a plan can only name tables
//! the executors can read themselves: the lake's (external Parquet tables) and views. The tables
//! gpuledger builds in memory (price tables, the 15-minute sums, the idle runs, ...) are written
//! as Parquet under `<lake>/_scratch/<session>/` instead (`engine::register_batches`) and removed
//! when the session ends; on a remote cluster the executors must therefore reach the lake (an
//! S3 bucket, or a filesystem mounted at the same path).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::lake::Lake;

/// The engine a session runs its SQL on.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Engine {
    #[default]
    Local,
    /// Ballista's scheduler and executor inside this process.
    Standalone,
    /// A Ballista scheduler at this `host:port`.
    Remote(String),
}

impl Engine {
    /// Parses `local`, `ballista://standalone` or `ballista://HOST[:PORT]` (port 50050 when absent).
    pub fn parse(text: &str) -> Result<Engine, String> {
        let t = text.trim();
        if t.is_empty() || t == "local" {
            return Ok(Engine::Local);
        }
        let rest = t.strip_prefix("ballista://").ok_or_else(|| format!("engine {t:?}: expected `local`, `ballista://HOST:PORT` or `ballista://standalone`"))?;
        let rest = rest.trim_end_matches('/');
        if rest.is_empty() {
            return Err(format!("engine {t:?}: no scheduler host"));
        }
        let engine = if rest == "standalone" {
            Engine::Standalone
        } else {
            let (host, port) = match rest.rsplit_once(':') {
                Some((h, p)) => (h, p.parse::<u16>().map_err(|_| format!("engine {t:?}: bad port {p:?}"))?),
                None => (rest, 50050),
            };
            Engine::Remote(format!("{host}:{port}"))
        };
        if cfg!(feature = "ballista") {
            Ok(engine)
        } else {
            Err(format!("engine {t:?}: this gpuledger was built without Ballista (cargo build --release --features ballista)"))
        }
    }

    pub fn is_local(&self) -> bool {
        *self == Engine::Local
    }
}

/// The session's folder for tables made in memory, when its SQL runs on Ballista; removed with
/// the session.
#[derive(Debug)]
pub struct Scratch {
    lake: Lake,
    dir: PathBuf,
    next: AtomicUsize,
}

/// A scratch folder older than this belongs to a session that was killed before it could remove
/// it (no report runs for a day); the next Ballista session removes it.
pub const SCRATCH_MAX_AGE_MS: i64 = 24 * 3_600_000;

impl Scratch {
    pub fn new(lake: &Lake) -> Scratch {
        static SESSIONS: AtomicUsize = AtomicUsize::new(0);
        let now = chrono::Utc::now().timestamp_millis();
        remove_stale(lake, now);
        let id = format!("{}-{now}-{}", std::process::id(), SESSIONS.fetch_add(1, Ordering::Relaxed));
        Scratch { lake: lake.clone(), dir: lake.root().join("_scratch").join(id), next: AtomicUsize::new(0) }
    }

    pub fn lake(&self) -> &Lake {
        &self.lake
    }

    /// A new folder for one table's file (a table re-registered under the same name gets another).
    pub fn table_dir(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}-{}", self.next.fetch_add(1, Ordering::Relaxed)))
    }
}

/// Removes the scratch folders (`<pid>-<created ms>-<n>`) of sessions that were killed more than
/// `SCRATCH_MAX_AGE_MS` ago; a failure here is only a warning (the folder is tried again next time).
fn remove_stale(lake: &Lake, now_ms: i64) {
    let root = lake.root().join("_scratch");
    let names = match lake.list(&root) {
        Ok(names) => names,
        Err(e) => {
            tracing::warn!("listing the engine's scratch tables {}: {e}", root.display());
            return;
        }
    };
    for name in names {
        let created = name.split('-').nth(1).and_then(|t| t.parse::<i64>().ok());
        if created.is_some_and(|t| now_ms - t > SCRATCH_MAX_AGE_MS) {
            let dir = root.join(&name);
            match lake.remove_tree(&dir) {
                Ok(()) => tracing::warn!("removed {}, left by an engine session that was killed", dir.display()),
                Err(e) => tracing::warn!("removing stale scratch tables {}: {e}", dir.display()),
            }
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = self.lake.remove_tree(&self.dir) {
            tracing::warn!("removing the engine's scratch tables {}: {e}", self.dir.display());
        }
    }
}

/// Task slots of the in-process executor. Ballista's default (one per core) deadlocks the
/// chargeback's plan on a 2-core machine: its joins hold slots while waiting for stages that then
/// find none free (measured here: never finishes with 2, 2.6 s with 16). A remote cluster needs
/// the same headroom: executors started with `--concurrent-tasks` of 16 or more in all.
#[cfg(feature = "ballista")]
const STANDALONE_TASK_SLOTS: usize = 16;

/// Ballista 55's adaptive planner (on by default) re-plans a stage while its tasks run: a stage
/// re-planned between the launch of its first and its second task (after an upstream stage
/// came back empty) has tasks with different operator counts, the scheduler rejects the second
/// task's status ("task metrics array size 6 does not equal with the stage metrics array size
/// 7") and waits for it forever. Seen in about 1 of 45 chargebacks on the in-process cluster;
/// never with the static planner, which plans every stage once (tests/it/ballista.rs loops it).
#[cfg(feature = "ballista")]
const ADAPTIVE_PLANNER: &str = "ballista.planner.adaptive.enabled";

/// Why the session could not reach its Ballista cluster.
#[cfg(feature = "ballista")]
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("starting the in-process Ballista cluster")]
    Standalone(#[source] datafusion::error::DataFusionError),
    #[error("connecting to the Ballista scheduler at {addr}")]
    Remote { addr: String, source: datafusion::error::DataFusionError },
}

/// `ctx` upgraded to run its SQL on the Ballista cluster `engine` names.
#[cfg(feature = "ballista")]
pub async fn connect(ctx: datafusion::prelude::SessionContext, engine: &Engine) -> Result<datafusion::prelude::SessionContext, ConnectError> {
    use ballista::prelude::SessionContextExt;
    use datafusion::prelude::SessionContext;
    let state = ctx.state();
    let config = ballista::prelude::SessionConfigExt::upgrade_for_ballista(state.config().clone())
        .set_usize("ballista.standalone.parallelism", STANDALONE_TASK_SLOTS)
        .set_bool(ADAPTIVE_PLANNER, false)
        .set_bool("datafusion.optimizer.prefer_hash_join", true);
    let state = datafusion::execution::SessionStateBuilder::new_from_existing(state).with_config(config).build();
    match engine {
        Engine::Local => Ok(ctx),
        Engine::Standalone => SessionContext::standalone_with_state(state).await.map_err(ConnectError::Standalone),
        Engine::Remote(addr) => {
            SessionContext::remote_with_state(&format!("df://{addr}"), state).await.map_err(|source| ConnectError::Remote { addr: addr.clone(), source })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_urls() {
        assert_eq!(Engine::parse("local").unwrap(), Engine::Local);
        assert_eq!(Engine::parse("").unwrap(), Engine::Local);
        assert!(Engine::parse("spark://x").unwrap_err().contains("expected"));
        assert!(Engine::parse("ballista://").is_err());
        if cfg!(feature = "ballista") {
            assert_eq!(Engine::parse("ballista://standalone").unwrap(), Engine::Standalone);
            assert_eq!(Engine::parse("ballista://sched.ballista.svc:50050").unwrap(), Engine::Remote("sched.ballista.svc:50050".into()));
            assert_eq!(Engine::parse("ballista://sched").unwrap(), Engine::Remote("sched:50050".into()));
            assert!(Engine::parse("ballista://sched:x").unwrap_err().contains("bad port"));
        } else {
            assert!(Engine::parse("ballista://standalone").unwrap_err().contains("without Ballista"));
        }
    }
}
