//! Exit codes, documented for cron: the first error in a failure's chain that has a code of
//! its own decides it.
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

/// The exit code for a failed command.
pub fn code_for(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if cause.is::<IncompleteData>() {
            return INCOMPLETE;
        }
        use crate::collect::state::StateError;
        use crate::collect::CollectError;
        // `#[error(transparent)]` wrappers hide their inner error from the chain: look inside.
        if matches!(cause.downcast_ref::<StateError>(), Some(StateError::Locked { .. }))
            || matches!(cause.downcast_ref::<CollectError>(), Some(CollectError::State(StateError::Locked { .. })))
        {
            return BUSY;
        }
        if cause.is::<UsageError>()
            || cause.is::<crate::config::ConfigError>()
            || cause.is::<crate::timewin::WindowError>()
            || cause.is::<crate::adhoc::GuardError>()
            || matches!(cause.downcast_ref::<crate::adhoc::AdhocError>(), Some(crate::adhoc::AdhocError::BadParam(_) | crate::adhoc::AdhocError::Guard(_)))
        {
            return USAGE;
        }
    }
    FAILURE
}

pub fn exit_code(code: u8) -> ExitCode {
    ExitCode::from(code)
}

/// The table above, for `--help`.
pub const EXIT_CODES_HELP: &str = "Exit codes: 0 success; 1 failure (see the message); 2 usage or configuration error; \
3 data incomplete (reports written, a source under run.min_completeness_pct); 4 busy (another gpuledger holds the lake lock).";
