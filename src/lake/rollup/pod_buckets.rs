//! The `pod_buckets` rollup: `gpu_samples` summed as `gpu_buckets` sums them, one level finer:
//! per pod too. The chargeback by a key of each pod (`--by workload`, `queue`, `label:KEY`, ...)
//! prices these rows exactly as it prices a namespace's, so a namespace's pods add up to it to the
//! unit, and a grouping by any key is a join of these sums with each pod's value, not a re-read
//! of the samples. Rows without a pod (GPU time no pod held) are kept, with a null pod: summed
//! over pods the rollup is `gpu_buckets`. The same in SQL is `benches/sql/pod_buckets.sql` (the
//! tests' oracle).

use std::path::Path;
use std::sync::Mutex;

use arrow::array::RecordBatch;

use super::gpu_buckets::{self, BucketSums};
use super::kind::{DayRollup, Kind, RollupKind};
use super::sums::{columns_of, whole_day, BucketError, DaySums};
use crate::lake::intern::Interner;
use crate::lake::schema::Table;

/// The `gpu_samples` columns the sums read: `gpu_buckets`' and the pod.
pub const COLUMNS: [&str; 11] = ["ts", "step_s", "cluster", "node", "gpu_model", "mig_profile", "namespace", "pod", "share", "util_pct", "energy_j"];

pub const KIND: Kind = &RollupKind {
    name: "pod_buckets",
    source: Table::GpuSamples,
    // Bump on a change of meaning.
    version: 1,
    schema: gpu_buckets::pod_schema,
};

/// Its day: the sums over the whole day.
pub const ROLLUP: DayRollup = DayRollup { kinds: &[KIND], columns: columns_of::<BucketSums<true>>, fold: whole_day::<BucketSums<true>> };

impl DaySums for BucketSums<true> {
    const KIND: Kind = KIND;
    const COLUMNS: &'static [&'static str] = &COLUMNS;
    fn add(&mut self, strings: &Mutex<Interner>, path: &Path, b: &RecordBatch, start_ms: i64, end_ms: i64) -> Result<(), BucketError> {
        BucketSums::add(self, strings, path, b, start_ms, end_ms)
    }
    fn rows(&self) -> u64 {
        self.rows
    }
    fn finish(parts: &[Self], strings: &Interner) -> RecordBatch {
        BucketSums::finish(parts, strings)
    }
}
