//! The chargeback's first step: `gpu_samples` in a window summed per 15-minute bucket
//! (`lake::buckets`), from each day's stored rollup where it is current and covers the day's
//! part of the window, else by one pass over the day's samples on every core.
//!
//! As SQL (`benches/sql/gpu_buckets.sql`, which DuckDB runs in the benchmark and the tests check
//! this against) the pass is a hash aggregate over every row with seven keys, four of them
//! dictionary-encoded strings: on a month of 1,024 GPUs (89 M rows) DataFusion spends most of the
//! chargeback there. The pass interns the labels once per batch, and the rows, sorted by GPU and
//! time within a file, hit the same group about thirty times in a row, so it costs about what
//! decoding the columns costs; a rollup costs a hundredth of that. `queries/chargeback_grain.sql`
//! prices the result, handed in as the table `gpu_buckets`.

use crate::domain::window::Window;
pub use crate::lake::rollup::gpu_buckets::schema;
use crate::lake::rollup::BucketSums;
use crate::lake::rollup::{self};
pub use crate::lake::rollup::{BucketError, BUCKET_MS};
use crate::lake::Lake;

pub const TABLE: &str = "gpu_buckets";

/// The result: the groups (`schema()`; per day, so a group never repeats), and where they came from.
pub type GpuBuckets = super::rolled::Sums;

/// Sums `gpu_samples` rows in `window` per namespace, node, model, profile, bucket, share and step.
pub fn scan(lake: &Lake, window: &Window, threads: usize) -> Result<GpuBuckets, BucketError> {
    super::rolled::scan::<BucketSums>(lake, rollup::GPU_BUCKETS, window, threads)
}

/// The same sums per pod too (`pod_buckets`' rows: the pod after the namespace, null where no
/// pod held the GPU).
pub fn scan_pods(lake: &Lake, window: &Window, threads: usize) -> Result<GpuBuckets, BucketError> {
    super::rolled::scan::<BucketSums<true>>(lake, rollup::POD_BUCKETS, window, threads)
}
