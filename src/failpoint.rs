//! Failpoints, for the tests that kill the process at a chosen place (after TiKV's `fail` and
//! FoundationDB's simulation): `GPULEDGER_FAILPOINT=NAME:N` kills the process with SIGKILL the
//! N-th time it passes the point `NAME`, as a power cut or the OOM killer would, with no
//! destructor or flush run. Without the variable a pass reads one initialised cell.
//!
//! `GPULEDGER_FAILPOINT=NAME-enospc:N` instead makes the N-th write at `NAME` fail with "No
//! space left on device", as a full disk does when the file's last bytes are flushed.
//!
//! Points: `publish` (a day file of any table published, before the next one is written);
//! `write` (a day file's bytes written, before the file is in place: `write-enospc:N` only).

use std::io::Write;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// The environment variable that arms a failpoint.
pub const VAR: &str = "GPULEDGER_FAILPOINT";

/// Whether this pass of the point `point` (a name, or a name with its action) is the armed one.
fn hit(point: &str) -> bool {
    static ARMED: OnceLock<Option<(String, usize)>> = OnceLock::new();
    static PASSED: AtomicUsize = AtomicUsize::new(0);
    let armed = ARMED.get_or_init(|| {
        let spec = std::env::var(VAR).ok()?;
        let (point, n) = spec.rsplit_once(':')?;
        Some((point.to_string(), n.parse().ok()?))
    });
    armed.as_ref().is_some_and(|(p, n)| p == point && PASSED.fetch_add(1, Ordering::SeqCst) + 1 == *n)
}

/// Passes the point `name`: kills the process if the armed failpoint says so.
pub fn pass(name: &str) {
    if hit(name) {
        let _ = writeln!(std::io::stderr(), "{VAR}={name}: killed");
        // SAFETY: kill(2) on our own pid has no memory effects.
        unsafe {
            libc::kill(libc::getpid(), libc::SIGKILL);
        }
    }
}

/// Passes the write point `name`: fails with ENOSPC if `NAME-enospc` is armed for this pass.
pub fn write(name: &str) -> std::io::Result<()> {
    if hit(&format!("{name}-enospc")) {
        return Err(std::io::Error::from_raw_os_error(libc::ENOSPC));
    }
    Ok(())
}
