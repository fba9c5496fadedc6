//! Passes over the day files that compute what SQL would be slow at, each in one streaming read
//! on every core: the rollups' sums for days without a current rollup (`rolled`, `gpu_buckets`) and the idle report's per-pod runs (`idle_runs`). Their results are handed to
//! the report queries as tables.

pub mod gpu_buckets;
pub mod idle_runs;
pub mod rolled;
