//! Why a session could not be built or a query did not finish, naming the table, query or file.

use datafusion::error::DataFusionError;

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error("registering table {table}")]
    Register { table: String, source: DataFusionError },
    #[error("query {query}")]
    Query { query: String, source: DataFusionError },
    #[error("engine setup: building table {table}")]
    ConfigTable { table: &'static str, source: arrow::error::ArrowError },
    #[error("engine setup: {0} is not registered")]
    NotRegistered(String),
    #[cfg(feature = "ballista")]
    #[error("engine setup")]
    Ballista(#[from] crate::distributed::ConnectError),
    #[error("engine setup: listing {dir}")]
    Listing { dir: String, source: std::io::Error },
    #[error("engine setup")]
    Published(#[from] crate::lake::published::PublishedError),
    #[error(
        "the lake is not as it was published ({record}): {findings}. A collect stopped while it wrote these days, or their files were deleted, replaced or linked by hand; a report would read them as fewer rows. Collect the days again (gpuledger collect --from {first} --to {next}: it rewrites every table of a day), or where Prometheus no longer holds them, accept their files as they are now: gpuledger collect{accept}"
    )]
    NotAsPublished { record: String, findings: String, first: String, next: String, accept: String },
    #[error("engine setup: {path}")]
    Path { path: String, source: std::io::Error },
    #[error("engine setup: writing table {table} to {path}")]
    WriteTable { table: String, path: String, source: std::io::Error },
    #[error("engine setup: limiting {table} to cluster {cluster}")]
    LimitCluster { table: &'static str, cluster: String, source: DataFusionError },
    #[error("engine setup: limiting {table} to a user's namespaces")]
    LimitNamespaces { table: String, source: DataFusionError },
    #[error("engine setup")]
    Prices(#[from] crate::pricing::PricingError),
    #[error("engine setup")]
    Runtime(#[source] DataFusionError),
    #[cfg(feature = "s3")]
    #[error("engine setup")]
    S3(#[from] crate::lake::s3::S3Error),
    #[error("query {query}: a lake file cannot be read: {file}; restore it, or re-collect its day (collect --from DAY --to NEXT_DAY)")]
    LakeFile { query: String, file: String, source: DataFusionError },
    #[error("query {query}: it spilled more than engine.spill_limit ({limit}) to disk; narrow the query (fewer rows before the sort, join or aggregate) or raise the key")]
    SpillLimit { query: String, limit: String },
    #[error("the lake's {table} holds Parquet files gpuledger did not write, which queries would read as its rows: {files}. Move them out of the lake")]
    StrayFiles { table: &'static str, files: String },
    #[error("query {query}: no result after {secs} s on {engine} (engine.query_timeout_secs){hint}")]
    Timeout { query: String, secs: u64, engine: String, hint: &'static str },
    #[error("query {query}: its task stopped before it finished")]
    Stopped { query: String, source: tokio::task::JoinError },
}

pub type Result<T, E = EngineError> = std::result::Result<T, E>;
