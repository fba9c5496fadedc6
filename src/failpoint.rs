//! Failpoints, for the tests that kill the process at a chosen place (after TiKV's `fail` and
//! FoundationDB's simulation): `GPULEDGER_FAILPOINT=NAME:N` kills the process with SIGKILL the
//! N-th time it passes the point `NAME`, as a power cut or the OOM killer would, with no
//! destructor or flush run. Without the variable a pass reads one initialised cell.
//!
//! Points: `publish` (a day file of any table published, before the next one is written).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The environment variable that arms a failpoint.
pub const VAR: &str = "GPULEDGER_FAILPOINT";

/// Passes the point `name`: kills the process if the armed failpoint says so.
pub fn pass(name: &str) {
    static ARMED: OnceLock<Option<(String, usize)>> = OnceLock::new();
    static PASSED: AtomicUsize = AtomicUsize::new(0);
    let armed = ARMED.get_or_init(|| {
        let spec = std::env::var(VAR).ok()?;
        let (point, n) = spec.rsplit_once(':')?;
        Some((point.to_string(), n.parse().ok()?))
    });
    if let Some((point, n)) = armed {
        if point == name && PASSED.fetch_add(1, Ordering::SeqCst) + 1 == *n {
            eprintln!("{VAR}={point}:{n}: killed");
            // SAFETY: kill(2) on our own pid has no memory effects.
            unsafe {
                libc::kill(libc::getpid(), libc::SIGKILL);
            }
        }
    }
}
