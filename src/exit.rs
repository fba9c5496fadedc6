//! Exit codes, documented for cron, and the two errors that are codes rather than failures.
//! Each error type says its own code ([`ExitStatus`]); the first error of a failure's chain
//! that has one decides (`commands::exit_code_for`).
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | the job failed (Prometheus down or returning garbage, a query failed, I/O); retry after fixing the cause |
//! | 2 | usage or configuration error (bad flag, window, parameter, config key, refused SQL); retrying will not help |
//! | 3 | data incomplete: the reports were written, but a source had less than `run.min_completeness_pct` of its expected samples |
//! | 4 | busy: another gpuledger holds the lake's lock; try again later |

use std::process::ExitCode;

pub const SUCCESS: u8 = 0;
pub const FAILURE: u8 = 1;
pub const USAGE: u8 = 2;
pub const INCOMPLETE: u8 = 3;
pub const BUSY: u8 = 4;

/// A usage error raised by gpuledger itself (clap reports its own with code 2).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// The month's data fell short of `run.min_completeness_pct`; the reports were still written.
#[derive(Debug, thiserror::Error)]
#[error("data incomplete: {0}")]
pub struct IncompleteData(pub String);

/// An error that says its own exit code (the table above): `Some` where it decides one, `None`
/// where it is a plain failure; a wrapper answers for the error it carries.
pub trait ExitStatus {
    fn exit_code(&self) -> Option<u8>;
}

impl ExitStatus for UsageError {
    fn exit_code(&self) -> Option<u8> {
        Some(USAGE)
    }
}

impl ExitStatus for IncompleteData {
    fn exit_code(&self) -> Option<u8> {
        Some(INCOMPLETE)
    }
}

/// A bad `--from`/`--to`/`--month` (the domain core imports nothing of ours, so its code is
/// said here).
impl ExitStatus for crate::domain::window::WindowError {
    fn exit_code(&self) -> Option<u8> {
        Some(USAGE)
    }
}

pub fn exit_code(code: u8) -> ExitCode {
    ExitCode::from(code)
}

/// The table above, for `--help`.
pub const EXIT_CODES_HELP: &str = "Exit codes: 0 success; 1 failure (see the message); 2 usage or configuration error; \
3 data incomplete (reports written, a source under run.min_completeness_pct); 4 busy (another gpuledger holds the lake lock).";
