//! The one DataFusion session builder, used by every command and test (`session`): a bounded
//! memory pool, the lake's tables registered with their explicit schemas and `date` partitions,
//! the config's price tables (`pricing`) and the views (`register`); and the one way our
//! queries run (`run`): parameters bound, read-only, under the session's time limit.

mod error;
mod preempt;
mod register;
mod run;
mod session;

pub use error::{EngineError, Result};
pub use register::{register_batches, register_streams, register_view};
pub use run::{query_error, run_query, run_query_schema, run_query_with, str_param, stream_query, timeout_error, ts_param, QueryTask, Spawned};
pub use session::{check_published, session_cluster, session_lake, session_result_limits, SessionBuilder};
