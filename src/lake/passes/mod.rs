//! Passes over the day files that compute what SQL would be slow at, each in one streaming read
//! on every core: the chargeback's 15-minute GPU sums for days without a current rollup
//! (`gpu_buckets`) and the idle report's per-pod runs (`idle_runs`). Their results are handed to
//! the report queries as tables.

pub mod gpu_buckets;
pub mod idle_runs;
