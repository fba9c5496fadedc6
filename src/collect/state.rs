//! The collector's state in the lake (`<lake>/_state/`): a checkpoint per source and a lock
//! that stops two jobs on one lake. On a local disk the lock is the kernel's: `flock` on the
//! open lock file, so two processes can never both hold it and a holder that dies releases it
//! with its file descriptors; the pid written inside is only for the message. On object storage, where no pid can be
//! checked, it is a lease: an object created with a conditional PUT, renewed by its holder every
//! third of `lake.s3.lock_ttl_secs` and taken over (again conditionally, so only one taker wins)
//! once it has run out or its holder on this host is gone.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::lake::Lake;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("another gpuledger {job} ({holder}) holds {path}; wait for it to finish (its lock goes with the process)")]
    Locked { job: String, holder: String, path: PathBuf },
    #[error("{path}")]
    Io { path: PathBuf, source: std::io::Error },
    #[error("{path}: corrupt checkpoint: {message}")]
    Corrupt { path: PathBuf, message: String },
}

impl crate::exit::ExitStatus for StateError {
    fn exit_code(&self) -> Option<u8> {
        matches!(self, StateError::Locked { .. }).then_some(crate::exit::BUSY)
    }
}

pub fn state_dir(lake: &Lake) -> PathBuf {
    lake.state_dir()
}

/// Collected up to (exclusive, ms) per source.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct Checkpoints {
    pub sources: BTreeMap<String, String>,
}

impl Checkpoints {
    fn path(lake: &Lake) -> PathBuf {
        state_dir(lake).join("checkpoints.json")
    }

    pub fn load(lake: &Lake) -> Result<Checkpoints, StateError> {
        let path = Self::path(lake);
        match lake.read(&path) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(|e| StateError::Corrupt { path, message: e.to_string() }),
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

    /// Saved atomically (as every lake file).
    pub fn save(&self, lake: &Lake) -> Result<(), StateError> {
        let path = Self::path(lake);
        let text = serde_json::to_string_pretty(self).expect("json") + "\n";
        lake.publish(&path, |out| out.write_all(text.as_bytes())).map_err(|source| StateError::Io { path, source })
    }
}

/// Held while a job (`collect`, `run`, `rollup`) works on the lake; released on drop.
#[derive(Debug)]
pub struct LakeLock {
    held: Held,
}

#[derive(Debug)]
enum Held {
    /// The lock file and its open descriptor, which holds the `flock`.
    File(PathBuf, std::fs::File),
    #[cfg(feature = "s3")]
    Lease(lease::Lease),
}

/// Whether process `pid` exists on this host (the S3 lease's check of a holder here).
#[cfg_attr(not(feature = "s3"), allow(dead_code))]
fn alive(pid: u32) -> bool {
    if pid == 0 || pid > i32::MAX as u32 {
        return false;
    }
    // Signal 0 checks existence; EPERM means it exists under another user.
    let r = unsafe { libc::kill(pid as libc::pid_t, 0) };
    r == 0 || std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

impl LakeLock {
    /// Takes `<lake>/_state/<job>.lock`, or fails with `StateError::Locked` while another
    /// process (or another open of it in this one) holds it.
    pub fn acquire(lake: &Lake, job: &str) -> Result<LakeLock, StateError> {
        let path = state_dir(lake).join(format!("{job}.lock"));
        match lake.store() {
            crate::lake::store::Store::Local => Self::acquire_file(path, job).map(|(p, f)| LakeLock { held: Held::File(p, f) }),
            #[cfg(feature = "s3")]
            crate::lake::store::Store::S3(s3) => lease::Lease::acquire(lake, std::sync::Arc::clone(s3), path, job).map(|l| LakeLock { held: Held::Lease(l) }),
        }
    }

    /// `flock(LOCK_EX | LOCK_NB)` on the lock file, then a check that the path still names the
    /// file locked (a holder unlinks it on release, so a lock taken on an unlinked file is
    /// retried on the new one: only the file at the path counts).
    fn acquire_file(path: PathBuf, job: &str) -> Result<(PathBuf, std::fs::File), StateError> {
        use std::os::unix::fs::MetadataExt;
        use std::os::unix::io::AsRawFd;
        let dir = path.parent().expect("lock file has a folder").to_path_buf();
        std::fs::create_dir_all(&dir).map_err(|source| StateError::Io { path: dir.clone(), source })?;
        let io = |source| StateError::Io { path: path.clone(), source };
        for _ in 0..100 {
            let mut f = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
            if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
                    let pid = std::fs::read_to_string(&path).ok().and_then(|s| s.trim().parse::<u32>().ok());
                    let holder = pid.map_or_else(|| "pid not yet written".to_string(), |p| format!("pid {p}"));
                    return Err(StateError::Locked { job: job.to_string(), holder, path });
                }
                return Err(io(e));
            }
            let ours = f.metadata().map_err(io)?;
            match std::fs::metadata(&path) {
                Ok(now) if now.dev() == ours.dev() && now.ino() == ours.ino() => {
                    f.set_len(0).map_err(io)?;
                    writeln!(f, "{}", std::process::id()).map_err(io)?;
                    f.sync_all().map_err(io)?;
                    return Ok((path, f));
                }
                _ => continue, // released and unlinked between our open and our lock
            }
        }
        Err(io(std::io::Error::other("the lock file kept being replaced")))
    }
}

impl Drop for LakeLock {
    fn drop(&mut self) {
        match &mut self.held {
            // Unlinked while still locked, then unlocked by closing: a waiter that locked the
            // unlinked file sees it is no longer at the path and retries.
            Held::File(path, _file) => {
                let _ = std::fs::remove_file(path);
            }
            #[cfg(feature = "s3")]
            Held::Lease(lease) => lease.release(),
        }
    }
}

#[cfg(feature = "s3")]
mod lease {
    use std::path::PathBuf;
    use std::sync::mpsc::{channel, RecvTimeoutError, Sender};
    use std::sync::Arc;
    use std::thread::JoinHandle;

    use chrono::{DateTime, SecondsFormat, Utc};
    use serde::{Deserialize, Serialize};

    use super::StateError;
    use crate::lake::s3::S3Store;
    use crate::lake::Lake;

    /// What the lock object says.
    #[derive(Debug, Serialize, Deserialize)]
    struct Record {
        job: String,
        host: String,
        pid: u32,
        acquired: String,
        expires: String,
    }

    fn host() -> String {
        let mut buf = [0u8; 256];
        let r = unsafe { libc::gethostname(buf.as_mut_ptr() as *mut libc::c_char, buf.len()) };
        if r != 0 {
            return "unknown".into();
        }
        let end = buf.iter().position(|b| *b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).into_owned()
    }

    #[derive(Debug)]
    pub struct Lease {
        store: Arc<S3Store>,
        rel: PathBuf,
        path: PathBuf,
        stop: Option<Sender<()>>,
        renewer: Option<JoinHandle<String>>,
    }

    impl Lease {
        pub fn acquire(lake: &Lake, store: Arc<S3Store>, path: PathBuf, job: &str) -> Result<Lease, StateError> {
            let rel = path.strip_prefix(lake.root()).expect("lock inside the lake").to_path_buf();
            let io = |source| StateError::Io { path: path.clone(), source };
            let ttl = chrono::Duration::from_std(store.lock_ttl).expect("lease fits");
            let acquired = Utc::now().to_rfc3339_opts(SecondsFormat::Millis, true);
            let job_name = job.to_string();
            let record = move |now: DateTime<Utc>| {
                let r = Record {
                    job: job_name.clone(),
                    host: host(),
                    pid: std::process::id(),
                    acquired: acquired.clone(),
                    expires: (now + ttl).to_rfc3339_opts(SecondsFormat::Millis, true),
                };
                serde_json::to_vec_pretty(&r).expect("json")
            };
            for _ in 0..5 {
                if let Some(tag) = store.create(&rel, record(Utc::now())).map_err(io)? {
                    return Ok(Lease::start(store, rel, path, tag, Box::new(record)));
                }
                let Some((bytes, tag)) = store.read_versioned(&rel).map_err(io)? else { continue };
                let held: Option<Record> = serde_json::from_slice(&bytes).ok();
                let expired = held.as_ref().is_none_or(|h| DateTime::parse_from_rfc3339(&h.expires).map_or(true, |t| t < Utc::now()));
                let gone = held.as_ref().is_some_and(|h| h.host == host() && h.pid != std::process::id() && !super::alive(h.pid));
                if !(expired || gone) {
                    let h = held.expect("a live lease parsed");
                    return Err(StateError::Locked { job: job.to_string(), holder: format!("pid {} on {}, lease until {}", h.pid, h.host, h.expires), path });
                }
                tracing::warn!("taking over the lake lock {} (its holder's lease ran out or it is gone)", path.display());
                if let Some(tag) = store.replace(&rel, &tag, record(Utc::now())).map_err(io)? {
                    return Ok(Lease::start(store, rel, path, tag, Box::new(record)));
                }
            }
            Err(StateError::Io { path, source: std::io::Error::other("the lock kept changing hands; try again") })
        }

        /// Starts the thread that renews the lease every third of its length.
        fn start(store: Arc<S3Store>, rel: PathBuf, path: PathBuf, mut tag: String, record: Box<dyn Fn(DateTime<Utc>) -> Vec<u8> + Send>) -> Lease {
            let (stop, stopped) = channel::<()>();
            let every = store.lock_ttl / 3;
            let (s, r, p) = (Arc::clone(&store), rel.clone(), path.clone());
            let renewer = std::thread::Builder::new()
                .name("lake-lock".into())
                .spawn(move || loop {
                    match stopped.recv_timeout(every) {
                        Err(RecvTimeoutError::Timeout) => match s.replace(&r, &tag, record(Utc::now())) {
                            Ok(Some(new)) => tag = new,
                            Ok(None) => {
                                tracing::error!("lost the lake lock {}: another job took it over; this job's writes may now race with it", p.display());
                                return String::new();
                            }
                            Err(e) => tracing::warn!("renewing the lake lock {}: {e} (will retry)", p.display()),
                        },
                        _ => return tag,
                    }
                })
                .ok();
            Lease { store, rel, path, stop: Some(stop), renewer }
        }

        /// Stops renewing and deletes the lock object if it is still ours.
        pub fn release(&mut self) {
            drop(self.stop.take());
            let tag = self.renewer.take().and_then(|h| h.join().ok()).unwrap_or_default();
            if tag.is_empty() {
                return;
            }
            match self.store.read_versioned(&self.rel) {
                Ok(Some((_, now))) if now == tag => {
                    if let Err(e) = self.store.remove(&self.rel) {
                        tracing::warn!("releasing the lake lock {}: {e}", self.path.display());
                    }
                }
                _ => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_excludes_a_holder_and_is_free_once_released() {
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::new(dir.path());
        let lock = LakeLock::acquire(&lake, "collect").unwrap();
        let e = LakeLock::acquire(&lake, "collect").unwrap_err().to_string();
        assert!(e.contains("another gpuledger collect") && e.contains(&format!("pid {}", std::process::id())), "{e}");
        // Another job's lock is another file.
        drop(LakeLock::acquire(&lake, "rollup").unwrap());
        drop(lock);
        assert!(!dir.path().join("_state/collect.lock").exists());
        // A file left behind with a pid in it (a holder killed by SIGKILL) holds nothing.
        std::fs::write(dir.path().join("_state/collect.lock"), format!("{}\n", std::os::unix::process::parent_id())).unwrap();
        drop(LakeLock::acquire(&lake, "collect").unwrap());
    }

    /// 200 pairs started together on one lake, each holder releasing at once: never two holders
    /// at the same moment, though the release unlinks the file the other may be locking.
    #[test]
    fn simultaneous_pairs_never_both_hold() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::new(dir.path());
        let holding = AtomicUsize::new(0);
        let (mut won, mut both) = (0, 0);
        for _ in 0..200 {
            let barrier = std::sync::Barrier::new(2);
            let got: Vec<bool> = std::thread::scope(|s| {
                let hs: Vec<_> = (0..2)
                    .map(|_| {
                        s.spawn(|| {
                            barrier.wait();
                            let Ok(lock) = LakeLock::acquire(&lake, "collect") else { return false };
                            assert_eq!(holding.fetch_add(1, Ordering::SeqCst), 0, "two holders at once");
                            std::thread::sleep(std::time::Duration::from_micros(200));
                            holding.fetch_sub(1, Ordering::SeqCst);
                            drop(lock);
                            true
                        })
                    })
                    .collect();
                hs.into_iter().map(|h| h.join().unwrap()).collect()
            });
            won += got.iter().filter(|g| **g).count();
            both += usize::from(got.iter().all(|g| *g));
        }
        assert!(won >= 200, "every pair has a holder: {won}");
        eprintln!("200 pairs: {won} acquisitions, {both} pairs where the second came after the first released");
    }

    #[test]
    fn checkpoints_round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let lake = Lake::new(dir.path());
        let mut c = Checkpoints::load(&lake).unwrap();
        assert!(c.get("dcgm").is_none());
        let t = chrono::DateTime::parse_from_rfc3339("2026-10-05T00:00:00Z").unwrap().with_timezone(&chrono::Utc);
        c.set("dcgm", t);
        c.save(&lake).unwrap();
        assert_eq!(Checkpoints::load(&lake).unwrap().get("dcgm"), Some(t));
    }
}
