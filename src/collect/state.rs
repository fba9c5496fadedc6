//! The collector's state in the lake (`<lake>/_state/`): a checkpoint per source and a lock
//! that stops two collectors on one lake (holder's pid; a dead holder's lock is taken over).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("another gpuledger {job} (pid {pid}) holds {path}; wait for it or remove the file if that process is gone")]
    Locked { job: String, pid: u32, path: PathBuf },
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: corrupt checkpoint: {message}")]
    Corrupt { path: PathBuf, message: String },
}

pub fn state_dir(lake_root: &Path) -> PathBuf {
    lake_root.join("_state")
}

/// Collected up to (exclusive, ms) per source.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Checkpoints {
    pub sources: BTreeMap<String, String>,
}

impl Checkpoints {
    fn path(lake_root: &Path) -> PathBuf {
        state_dir(lake_root).join("checkpoints.json")
    }

    pub fn load(lake_root: &Path) -> Result<Checkpoints, StateError> {
        let path = Self::path(lake_root);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| StateError::Corrupt { path, message: e.to_string() }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Checkpoints::default()),
            Err(source) => Err(StateError::Io { path, source }),
        }
    }

    pub fn get(&self, source: &str) -> Option<chrono::DateTime<chrono::Utc>> {
        self.sources.get(source).and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok()).map(|t| t.with_timezone(&chrono::Utc))
    }

    pub fn set(&mut self, source: &str, t: chrono::DateTime<chrono::Utc>) {
        self.sources.insert(source.to_string(), t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true));
    }

    /// Saved atomically (temp file, fsync, rename).
    pub fn save(&self, lake_root: &Path) -> Result<(), StateError> {
        let path = Self::path(lake_root);
        let text = serde_json::to_string_pretty(self).expect("json") + "\n";
        crate::report::write_atomic(&path, text.as_bytes()).map_err(|e| StateError::Io { path, source: std::io::Error::other(e.to_string()) })
    }
}

/// Held while a job (`collect`, `run`) works on the lake; removed on drop.
#[derive(Debug)]
pub struct LakeLock {
    path: PathBuf,
}

fn alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // Signal 0 checks existence; EPERM means it exists under another user.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl LakeLock {
    /// Takes `<lake>/_state/<job>.lock`, or fails with `StateError::Locked` while a live
    /// process holds it; a dead holder's lock is taken over.
    pub fn acquire(lake_root: &Path, job: &str) -> Result<LakeLock, StateError> {
        let dir = state_dir(lake_root);
        std::fs::create_dir_all(&dir).map_err(|source| StateError::Io { path: dir.clone(), source })?;
        let path = dir.join(format!("{job}.lock"));
        for _ in 0..3 {
            match std::fs::OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut f) => {
                    let io = |source| StateError::Io { path: path.clone(), source };
                    writeln!(f, "{}", std::process::id()).map_err(io)?;
                    f.sync_all().map_err(io)?;
                    return Ok(LakeLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let holder = std::fs::read_to_string(&path).ok().and_then(|s| s.trim().parse::<u32>().ok());
                    match holder {
                        Some(pid) if pid != std::process::id() && alive(pid) => return Err(StateError::Locked { job: job.to_string(), pid, path }),
                        _ => {
                            tracing::warn!("taking over a stale lock {} (holder {:?} is gone)", path.display(), holder);
                            let _ = std::fs::remove_file(&path);
                        }
                    }
                }
                Err(source) => return Err(StateError::Io { path, source }),
            }
        }
        Err(StateError::Io { path, source: std::io::Error::other("could not create the lock file") })
    }
}

impl Drop for LakeLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_excludes_a_live_holder_and_recovers_a_dead_one() {
        let dir = tempfile::tempdir().unwrap();
        let lock = LakeLock::acquire(dir.path(), "collect").unwrap();
        // A live other process (our parent shell/test runner) holding it: refused.
        std::fs::write(dir.path().join("_state/collect.lock"), format!("{}\n", std::os::unix::process::parent_id())).unwrap();
        let e = LakeLock::acquire(dir.path(), "collect").unwrap_err().to_string();
        assert!(e.contains("another gpuledger collect"), "{e}");
        // A pid that cannot exist: stale, taken over.
        std::fs::write(dir.path().join("_state/collect.lock"), "4194304\n").unwrap();
        let again = LakeLock::acquire(dir.path(), "collect").unwrap();
        drop(again);
        drop(lock);
        assert!(!dir.path().join("_state/collect.lock").exists());
    }

    #[test]
    fn checkpoints_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let mut c = Checkpoints::load(dir.path()).unwrap();
        assert!(c.get("dcgm").is_none());
        let t = chrono::DateTime::parse_from_rfc3339("2026-10-05T00:00:00Z").unwrap().with_timezone(&chrono::Utc);
        c.set("dcgm", t);
        c.save(dir.path()).unwrap();
        assert_eq!(Checkpoints::load(dir.path()).unwrap().get("dcgm"), Some(t));
    }
}
