//! Units and the names the lake and the reports reserve. Quantities are integers in small
//! units (GPU-microseconds, millijoules) so that sums are exact; these are the conversions.

/// GPU-microseconds in a GPU-hour.
pub const US_PER_HOUR: i128 = 3_600_000_000;
/// Millijoules in a kWh.
pub const MJ_PER_KWH: i128 = 3_600_000_000;
/// Milliseconds in an hour.
pub const MS_PER_HOUR: i64 = 3_600_000;
/// The rollups' and the tariff grid's bucket: 15 minutes. Every tariff band boundary (local, at
/// a 15-minute multiple, in a zone whose offset is a multiple of 15 minutes) falls on an edge.
pub const BUCKET_MS: i64 = 15 * 60 * 1000;

/// The namespace of GPU time no pod held (the idle pool).
pub const UNALLOCATED: &str = "__unallocated__";
/// The `namespace` of `gpu_samples` rows for GPU time of the pool that no sample covers, even
/// after Prometheus' lookback (an exporter down, a node without one): the GPU existed (DCGM saw
/// it before and after, or kube-state-metrics reports the node's GPUs) but nobody measured it.
/// Not a Kubernetes name (those have no `_`), so it never collides with a real namespace.
pub const UNMEASURED: &str = "__unmeasured__";

/// The row, in a chargeback by a key of each pod (`--by workload`, `label:KEY`, ...), of the
/// GPU time, energy and money of pods with no value for the key: never dropped, never merged
/// into `__unallocated__`.
pub const UNATTRIBUTED: &str = "__unattributed__";
/// The `gpu_model` of a GPU only kube-state-metrics reports (its node runs no DCGM exporter).
pub const UNKNOWN_MODEL: &str = "unknown";
/// The cluster a row with a null `cluster` belongs to (files from before the column): the
/// default `prometheus.cluster_name`.
pub const DEFAULT_CLUSTER: &str = "default";
