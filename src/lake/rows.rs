//! Typed row builders for the lake tables, so every writer (the simulator, the collector)
//! fills the same columns the same way and the schema stays defined once (`schema.rs`).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float32Builder, Float64Builder, Int16Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder,
    StringDictionaryBuilder, TimestampMillisecondBuilder,
};
use arrow::datatypes::Int32Type;

use super::Table;

type Labels = StringDictionaryBuilder<Int32Type>;

fn ts() -> TimestampMillisecondBuilder {
    TimestampMillisecondBuilder::new().with_timezone("UTC")
}

fn finish(table: Table, columns: Vec<ArrayRef>) -> RecordBatch {
    table_batch(table, columns)
}

/// A batch of `table` from its columns in schema order, all but the trailing `cluster`, which
/// comes null (the cluster is the collector's to set, per batch: [`with_cluster`]).
pub fn table_batch(table: Table, mut columns: Vec<ArrayRef>) -> RecordBatch {
    let rows = columns.first().map_or(0, |c| c.len());
    columns.push(arrow::array::new_null_array(&super::schema::label_type(), rows));
    RecordBatch::try_new(table.schema(), columns).expect("row builder columns match the table schema")
}

/// `batch` (of a lake table) with every row's `cluster` set to `name`.
pub fn with_cluster(batch: RecordBatch, name: &str) -> RecordBatch {
    let schema = batch.schema();
    let idx = schema.index_of(super::schema::CLUSTER).expect("every lake table has a cluster column");
    let mut columns = batch.columns().to_vec();
    let keys = arrow::array::Int32Array::from(vec![0; batch.num_rows()]);
    let values: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![name]));
    columns[idx] = Arc::new(arrow::array::DictionaryArray::<Int32Type>::try_new(keys, values).expect("one value"));
    RecordBatch::try_new(schema, columns).expect("the same schema")
}

/// One `gpu_samples` row.
#[derive(Debug, Clone, Copy, Default)]
pub struct GpuSampleRow<'a> {
    pub ts: i64,
    pub step_s: i32,
    pub node: &'a str,
    pub gpu_uuid: &'a str,
    pub gpu_index: i16,
    pub gpu_model: &'a str,
    pub mig_profile: Option<&'a str>,
    pub gpu_instance_id: Option<i16>,
    pub namespace: Option<&'a str>,
    pub pod: Option<&'a str>,
    pub container: Option<&'a str>,
    pub share: f64,
    pub util_pct: Option<f32>,
    pub mem_used_mib: Option<f32>,
    pub mem_total_mib: Option<f32>,
    pub power_w: Option<f32>,
    pub energy_j: Option<f64>,
    pub temp_c: Option<f32>,
    pub xid: Option<i32>,
}

#[derive(Default)]
pub struct GpuSamplesBuilder {
    ts: TimestampMillisecondBuilder,
    step_s: Int32Builder,
    node: Labels,
    gpu_uuid: Labels,
    gpu_index: Int16Builder,
    gpu_model: Labels,
    mig_profile: Labels,
    gpu_instance_id: Int16Builder,
    namespace: Labels,
    pod: Labels,
    container: Labels,
    share: Float64Builder,
    util_pct: Float32Builder,
    mem_used_mib: Float32Builder,
    mem_total_mib: Float32Builder,
    power_w: Float32Builder,
    energy_j: Float64Builder,
    temp_c: Float32Builder,
    xid: Int32Builder,
}

impl GpuSamplesBuilder {
    pub fn new() -> Self {
        GpuSamplesBuilder { ts: ts(), ..Default::default() }
    }

    pub fn push(&mut self, r: &GpuSampleRow) {
        self.ts.append_value(r.ts);
        self.step_s.append_value(r.step_s);
        self.node.append_value(r.node);
        self.gpu_uuid.append_value(r.gpu_uuid);
        self.gpu_index.append_value(r.gpu_index);
        self.gpu_model.append_value(r.gpu_model);
        self.mig_profile.append_option(r.mig_profile);
        self.gpu_instance_id.append_option(r.gpu_instance_id);
        self.namespace.append_option(r.namespace);
        self.pod.append_option(r.pod);
        self.container.append_option(r.container);
        self.share.append_value(r.share);
        self.util_pct.append_option(r.util_pct);
        self.mem_used_mib.append_option(r.mem_used_mib);
        self.mem_total_mib.append_option(r.mem_total_mib);
        self.power_w.append_option(r.power_w);
        self.energy_j.append_option(r.energy_j);
        self.temp_c.append_option(r.temp_c);
        self.xid.append_option(r.xid);
    }

    pub fn finish(mut self) -> RecordBatch {
        finish(
            Table::GpuSamples,
            vec![
                Arc::new(self.ts.finish()),
                Arc::new(self.step_s.finish()),
                Arc::new(self.node.finish()),
                Arc::new(self.gpu_uuid.finish()),
                Arc::new(self.gpu_index.finish()),
                Arc::new(self.gpu_model.finish()),
                Arc::new(self.mig_profile.finish()),
                Arc::new(self.gpu_instance_id.finish()),
                Arc::new(self.namespace.finish()),
                Arc::new(self.pod.finish()),
                Arc::new(self.container.finish()),
                Arc::new(self.share.finish()),
                Arc::new(self.util_pct.finish()),
                Arc::new(self.mem_used_mib.finish()),
                Arc::new(self.mem_total_mib.finish()),
                Arc::new(self.power_w.finish()),
                Arc::new(self.energy_j.finish()),
                Arc::new(self.temp_c.finish()),
                Arc::new(self.xid.finish()),
            ],
        )
    }
}

/// One `pods` row.
#[derive(Debug, Clone, Copy, Default)]
pub struct PodRow<'a> {
    pub namespace: &'a str,
    pub pod: &'a str,
    pub uid: &'a str,
    pub node: Option<&'a str>,
    pub priority_class: Option<&'a str>,
    pub created: i64,
    pub scheduled: Option<i64>,
    pub started: Option<i64>,
    pub finished: Option<i64>,
    pub gpu_resource: Option<&'a str>,
    pub gpu_request: i32,
    pub cpu_request: Option<f64>,
    pub mem_request_bytes: Option<i64>,
    pub phase: Option<&'a str>,
    pub termination_reason: Option<&'a str>,
    pub team: Option<&'a str>,
}

#[derive(Default)]
pub struct PodsBuilder {
    namespace: Labels,
    pod: StringBuilder,
    uid: StringBuilder,
    node: Labels,
    priority_class: Labels,
    created: TimestampMillisecondBuilder,
    scheduled: TimestampMillisecondBuilder,
    started: TimestampMillisecondBuilder,
    finished: TimestampMillisecondBuilder,
    gpu_resource: Labels,
    gpu_request: Int32Builder,
    cpu_request: Float64Builder,
    mem_request_bytes: Int64Builder,
    phase: Labels,
    termination_reason: Labels,
    team: Labels,
}

impl PodsBuilder {
    pub fn new() -> Self {
        PodsBuilder { created: ts(), scheduled: ts(), started: ts(), finished: ts(), ..Default::default() }
    }

    pub fn push(&mut self, r: &PodRow) {
        self.namespace.append_value(r.namespace);
        self.pod.append_value(r.pod);
        self.uid.append_value(r.uid);
        self.node.append_option(r.node);
        self.priority_class.append_option(r.priority_class);
        self.created.append_value(r.created);
        self.scheduled.append_option(r.scheduled);
        self.started.append_option(r.started);
        self.finished.append_option(r.finished);
        self.gpu_resource.append_option(r.gpu_resource);
        self.gpu_request.append_value(r.gpu_request);
        self.cpu_request.append_option(r.cpu_request);
        self.mem_request_bytes.append_option(r.mem_request_bytes);
        self.phase.append_option(r.phase);
        self.termination_reason.append_option(r.termination_reason);
        self.team.append_option(r.team);
    }

    pub fn finish(mut self) -> RecordBatch {
        finish(
            Table::Pods,
            vec![
                Arc::new(self.namespace.finish()),
                Arc::new(self.pod.finish()),
                Arc::new(self.uid.finish()),
                Arc::new(self.node.finish()),
                Arc::new(self.priority_class.finish()),
                Arc::new(self.created.finish()),
                Arc::new(self.scheduled.finish()),
                Arc::new(self.started.finish()),
                Arc::new(self.finished.finish()),
                Arc::new(self.gpu_resource.finish()),
                Arc::new(self.gpu_request.finish()),
                Arc::new(self.cpu_request.finish()),
                Arc::new(self.mem_request_bytes.finish()),
                Arc::new(self.phase.finish()),
                Arc::new(self.termination_reason.finish()),
                Arc::new(self.team.finish()),
            ],
        )
    }
}

/// One `pending_samples` row.
#[derive(Debug, Clone, Copy, Default)]
pub struct PendingRow<'a> {
    pub ts: i64,
    pub step_s: i32,
    pub namespace: &'a str,
    pub pod: &'a str,
    pub uid: &'a str,
    pub priority_class: Option<&'a str>,
    pub gpu_resource: Option<&'a str>,
    pub gpu_request: i32,
    pub reason: Option<&'a str>,
}

#[derive(Default)]
pub struct PendingBuilder {
    ts: TimestampMillisecondBuilder,
    step_s: Int32Builder,
    namespace: Labels,
    pod: StringBuilder,
    uid: StringBuilder,
    priority_class: Labels,
    gpu_resource: Labels,
    gpu_request: Int32Builder,
    reason: Labels,
}

impl PendingBuilder {
    pub fn new() -> Self {
        PendingBuilder { ts: ts(), ..Default::default() }
    }

    pub fn push(&mut self, r: &PendingRow) {
        self.ts.append_value(r.ts);
        self.step_s.append_value(r.step_s);
        self.namespace.append_value(r.namespace);
        self.pod.append_value(r.pod);
        self.uid.append_value(r.uid);
        self.priority_class.append_option(r.priority_class);
        self.gpu_resource.append_option(r.gpu_resource);
        self.gpu_request.append_value(r.gpu_request);
        self.reason.append_option(r.reason);
    }

    pub fn finish(mut self) -> RecordBatch {
        finish(
            Table::PendingSamples,
            vec![
                Arc::new(self.ts.finish()),
                Arc::new(self.step_s.finish()),
                Arc::new(self.namespace.finish()),
                Arc::new(self.pod.finish()),
                Arc::new(self.uid.finish()),
                Arc::new(self.priority_class.finish()),
                Arc::new(self.gpu_resource.finish()),
                Arc::new(self.gpu_request.finish()),
                Arc::new(self.reason.finish()),
            ],
        )
    }
}

/// One `quotas` row.
#[derive(Default)]
pub struct QuotasBuilder {
    ts: TimestampMillisecondBuilder,
    namespace: Labels,
    resource: Labels,
    hard: Float64Builder,
    used: Float64Builder,
}

impl QuotasBuilder {
    pub fn new() -> Self {
        QuotasBuilder { ts: ts(), ..Default::default() }
    }

    pub fn push(&mut self, ts: i64, namespace: &str, resource: &str, hard: Option<f64>, used: Option<f64>) {
        self.ts.append_value(ts);
        self.namespace.append_value(namespace);
        self.resource.append_value(resource);
        self.hard.append_option(hard);
        self.used.append_option(used);
    }

    pub fn finish(mut self) -> RecordBatch {
        finish(
            Table::Quotas,
            vec![
                Arc::new(self.ts.finish()),
                Arc::new(self.namespace.finish()),
                Arc::new(self.resource.finish()),
                Arc::new(self.hard.finish()),
                Arc::new(self.used.finish()),
            ],
        )
    }
}

/// One `nodes` (inventory) row.
#[derive(Debug, Clone, Copy, Default)]
pub struct NodeRow<'a> {
    pub node: &'a str,
    pub gpu_uuid: &'a str,
    pub gpu_index: i16,
    pub gpu_model: &'a str,
    pub mig_profile: Option<&'a str>,
    pub gpu_instance_id: Option<i16>,
    pub share: f64,
    pub mem_total_mib: Option<f32>,
    pub first_seen: i64,
    pub last_seen: i64,
}

#[derive(Default)]
pub struct NodesBuilder {
    node: Labels,
    gpu_uuid: Labels,
    gpu_index: Int16Builder,
    gpu_model: Labels,
    mig_profile: Labels,
    gpu_instance_id: Int16Builder,
    share: Float64Builder,
    mem_total_mib: Float32Builder,
    first_seen: TimestampMillisecondBuilder,
    last_seen: TimestampMillisecondBuilder,
}

impl NodesBuilder {
    pub fn new() -> Self {
        NodesBuilder { first_seen: ts(), last_seen: ts(), ..Default::default() }
    }

    pub fn push(&mut self, r: &NodeRow) {
        self.node.append_value(r.node);
        self.gpu_uuid.append_value(r.gpu_uuid);
        self.gpu_index.append_value(r.gpu_index);
        self.gpu_model.append_value(r.gpu_model);
        self.mig_profile.append_option(r.mig_profile);
        self.gpu_instance_id.append_option(r.gpu_instance_id);
        self.share.append_value(r.share);
        self.mem_total_mib.append_option(r.mem_total_mib);
        self.first_seen.append_value(r.first_seen);
        self.last_seen.append_value(r.last_seen);
    }

    pub fn finish(mut self) -> RecordBatch {
        finish(
            Table::Nodes,
            vec![
                Arc::new(self.node.finish()),
                Arc::new(self.gpu_uuid.finish()),
                Arc::new(self.gpu_index.finish()),
                Arc::new(self.gpu_model.finish()),
                Arc::new(self.mig_profile.finish()),
                Arc::new(self.gpu_instance_id.finish()),
                Arc::new(self.share.finish()),
                Arc::new(self.mem_total_mib.finish()),
                Arc::new(self.first_seen.finish()),
                Arc::new(self.last_seen.finish()),
            ],
        )
    }
}
