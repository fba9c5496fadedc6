//! Every lake table's Arrow schema, defined once (the five tables with typed row builders
//! declare their columns in `rows.rs`, which builds their schemas). Readers (the engine),
//! writers (the simulator, the collector) and `gpuledger tables` all use these definitions.

use super::column_types::{cluster, label, ts};
pub use super::column_types::{label_type, ts_array, ts_field, ts_type, CLUSTER};
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef};

/// Bumped when a column changes meaning or type; written into every file's key/value metadata.
pub const SCHEMA_VERSION: u32 = 1;

/// The tables of the lake.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    /// One row per GPU (or MIG instance) per step; each row stands for `[ts, ts + step_s)`.
    GpuSamples,
    /// One row per pod (uid): its lifecycle and requests.
    Pods,
    /// One row per pending pod per step.
    PendingSamples,
    /// GPU quotas per namespace over time.
    Quotas,
    /// The pool itself: one row per GPU (or MIG instance) per day it was seen.
    Nodes,
    /// Windows in which a source returned no data (for the completeness report).
    Gaps,
    /// Allocatable GPU resources per node over time (kube_node_status_capacity).
    NodeCapacity,
    /// Kueue pending workloads per ClusterQueue over time, where Kueue runs.
    KueuePending,
    /// Team and cost-centre labels of each namespace (kube_namespace_labels), hourly.
    NamespaceLabels,
    /// One row per GPU pod (uid): its owner and top-level workload.
    PodOwners,
    /// One row per GPU pod (uid) and label or annotation.
    PodLabels,
    /// The schedulers' queues: quota and use per step (Kueue, Volcano, KAI).
    QueueQuotas,
}

impl Table {
    pub const ALL: [Table; 12] = [
        Table::GpuSamples,
        Table::Pods,
        Table::PendingSamples,
        Table::Quotas,
        Table::Nodes,
        Table::Gaps,
        Table::NodeCapacity,
        Table::KueuePending,
        Table::NamespaceLabels,
        Table::PodOwners,
        Table::PodLabels,
        Table::QueueQuotas,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Table::GpuSamples => "gpu_samples",
            Table::Pods => "pods",
            Table::PendingSamples => "pending_samples",
            Table::Quotas => "quotas",
            Table::Nodes => "nodes",
            Table::Gaps => "gaps",
            Table::NodeCapacity => "node_capacity",
            Table::KueuePending => "kueue_pending",
            Table::NamespaceLabels => "namespace_labels",
            Table::PodOwners => "pod_owners",
            Table::PodLabels => "pod_labels",
            Table::QueueQuotas => "queue_quotas",
        }
    }

    pub fn from_name(name: &str) -> Option<Table> {
        Table::ALL.into_iter().find(|t| t.name() == name)
    }

    /// The columns rows are sorted by before a file is written (declared as `sorting_columns`).
    pub fn sort_columns(self) -> &'static [&'static str] {
        match self {
            Table::GpuSamples => &["cluster", "node", "gpu_uuid", "gpu_instance_id", "ts"],
            Table::Pods => &["cluster", "namespace", "created", "pod", "uid"],
            // Pod first: a pending pod's rows (one a step) lie together, so a row group holds a
            // few pods' names and uids (a few dictionary entries, one run each) rather than every
            // pod pending at its steps. With ts first, a day of 10,000 GPUs' queue (11,400 pods,
            // 32.6 M rows) repeated all 11,400 uids in the dictionary of each of its 249 row
            // groups: 5.2 bytes a row, more than the day's GPU rows.
            Table::PendingSamples => &["cluster", "namespace", "pod", "uid", "ts"],
            Table::Quotas => &["cluster", "namespace", "resource", "ts"],
            Table::Nodes => &["cluster", "node", "gpu_uuid", "gpu_instance_id"],
            Table::Gaps => &["cluster", "source", "metric", "gap_start"],
            Table::NodeCapacity => &["cluster", "node", "resource", "ts"],
            Table::KueuePending => &["cluster", "cluster_queue", "status", "ts"],
            Table::NamespaceLabels => &["cluster", "namespace", "ts"],
            Table::PodOwners => &["cluster", "namespace", "created", "pod", "uid"],
            Table::PodLabels => &["cluster", "namespace", "created", "pod", "uid", "source", "key"],
            Table::QueueQuotas => &["cluster", "scheduler", "queue", "flavor", "resource", "ts"],
        }
    }

    /// Timestamp-like columns stored with `DELTA_BINARY_PACKED` and no dictionary.
    pub fn delta_columns(self) -> &'static [&'static str] {
        match self {
            Table::GpuSamples | Table::PendingSamples | Table::Quotas => &["ts"],
            Table::Pods => &["created", "scheduled", "started", "finished"],
            Table::Nodes => &["first_seen", "last_seen"],
            Table::Gaps => &["gap_start", "gap_end"],
            Table::NodeCapacity | Table::KueuePending | Table::NamespaceLabels | Table::QueueQuotas => &["ts"],
            Table::PodOwners | Table::PodLabels => &["created"],
        }
    }

    /// Float columns stored with `BYTE_STREAM_SPLIT` and no dictionary: each byte of the floats
    /// in its own stream, so the exponent bytes, which barely change along a GPU's rows, reach
    /// ZSTD as runs. Whole joules in a Float64 have many distinct values but zero low bytes (on
    /// a busy day of 1,024 GPUs: 1.41 bytes per row against 1.51 with a dictionary); whole
    /// degrees and utilisation percents (on a day of the simulated month: temperature 0.19
    /// bytes per row against 0.22 with a dictionary, utilisation 0.61 against 0.69).
    pub fn split_columns(self) -> &'static [&'static str] {
        match self {
            Table::GpuSamples => &["energy_j", "counter_j", "temp_c", "util_pct"],
            _ => &[],
        }
    }

    /// Float columns stored `PLAIN` (no dictionary), for ZSTD alone: framebuffer use holds a
    /// level for several scrapes and then jumps to a new one, so a dictionary fills with levels
    /// seen once or twice while ZSTD matches each repeat (on the same day: 0.58 bytes per row
    /// against 1.32 with a dictionary).
    pub fn plain_columns(self) -> &'static [&'static str] {
        match self {
            Table::GpuSamples => &["mem_used_mib"],
            _ => &[],
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Table::GpuSamples => "one row per GPU or MIG instance per step, [ts, ts + step_s)",
            Table::Pods => "one row per pod uid: lifecycle times, requests, termination",
            Table::PendingSamples => "one row per pending pod per step",
            Table::Quotas => "GPU ResourceQuota hard/used per namespace over time",
            Table::Nodes => "inventory: one row per GPU or MIG instance per day seen",
            Table::Gaps => "windows [gap_start, gap_end) in which a source returned no data",
            Table::NodeCapacity => "GPU capacity per node and resource over time",
            Table::KueuePending => "Kueue pending workloads per ClusterQueue and status over time",
            Table::NamespaceLabels => "team and cost-centre labels of each namespace (kube_namespace_labels), hourly",
            Table::PodOwners => "one row per GPU pod uid: its controller (kube_pod_owner), the chain above it and its top-level workload; `inferred` says which hop was not read from an owner series",
            Table::QueueQuotas => "a scheduler queue's quota and use per step, in GPUs: Kueue ClusterQueues (nominal quota, borrowing limit, admitted usage, pending), Volcano and KAI queues",
            Table::PodLabels => "one row per GPU pod uid and label (kube_pod_labels) or annotation (kube_pod_annotations), keys as kube-state-metrics names them",
        }
    }

    pub fn schema(self) -> SchemaRef {
        match self {
            // The tables with typed row builders: their columns are declared once, in `rows`.
            Table::GpuSamples => super::rows::GpuSampleRow::schema(),
            Table::Pods => super::rows::PodRow::schema(),
            Table::PendingSamples => super::rows::PendingRow::schema(),
            Table::Quotas => super::rows::QuotaRow::schema(),
            Table::Nodes => super::rows::NodeRow::schema(),
            Table::Gaps => gaps_schema(),
            Table::NodeCapacity => Arc::new(Schema::new(vec![
                ts("ts", false),
                label("node", false),
                label("resource", false),
                Field::new("capacity", DataType::Float64, true),
                cluster(),
            ])),
            Table::KueuePending => Arc::new(Schema::new(vec![
                ts("ts", false),
                label("cluster_queue", false),
                label("status", false),
                Field::new("workloads", DataType::Float64, true),
                cluster(),
            ])),
            Table::NamespaceLabels => {
                Arc::new(Schema::new(vec![ts("ts", false), label("namespace", false), label("team", true), label("cost_centre", true), cluster()]))
            }
            Table::PodOwners => super::rows::PodOwnerRow::schema(),
            Table::PodLabels => super::rows::PodLabelRow::schema(),
            Table::QueueQuotas => super::rows::QueueQuotaRow::schema(),
        }
    }
}

/// Columns added to the tables after their first version, read as null from older files.
pub const LATER_COLUMNS: [&str; 6] = [CLUSTER, GPU_SHARE_PCT, COUNTER_J, ROWS_ENERGY_J, COUNTER_ENERGY_J, COUNTER_DELTA_J];

/// `gpu_samples.counter_j` and the `nodes` energy columns (issue 43: energy's conservation
/// against the counters).
pub const COUNTER_J: &str = "counter_j";
const ROWS_ENERGY_J: &str = "rows_energy_j";
const COUNTER_ENERGY_J: &str = "counter_energy_j";
const COUNTER_DELTA_J: &str = "counter_delta_j";

/// `pods.gpu_share_pct` and `pending_samples.gpu_share_pct`: a HAMi vGPU's share of its GPU
/// (issue 44; the same field in both).
pub const GPU_SHARE_PCT: &str = "gpu_share_pct";

/// The field of `name` where it is one of [`LATER_COLUMNS`] (what an older file's missing
/// column reads as: nulls of this type); None for a column every file has.
pub fn later_column(name: &str) -> Option<Field> {
    match name {
        CLUSTER => Some(cluster()),
        GPU_SHARE_PCT => super::rows::PodRow::schema().field_with_name(GPU_SHARE_PCT).ok().cloned(),
        COUNTER_J => super::rows::GpuSampleRow::schema().field_with_name(COUNTER_J).ok().cloned(),
        ROWS_ENERGY_J | COUNTER_ENERGY_J | COUNTER_DELTA_J => super::rows::NodeRow::schema().field_with_name(name).ok().cloned(),
        _ => None,
    }
}

fn gaps_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![label("source", false), label("metric", false), ts("gap_start", false), ts("gap_end", false), label("reason", true), cluster()]))
}
