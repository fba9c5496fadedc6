//! Typed row builders for the lake tables, so every writer (the simulator, the collector)
//! fills the same columns the same way and the schema stays defined once (`schema.rs`).

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Float32Builder, Float64Builder, Int16Builder, Int32Builder, Int64Builder, RecordBatch, StringBuilder, StringDictionaryBuilder,
    TimestampMillisecondBuilder,
};
use arrow::datatypes::{DataType, Field, Int32Type, Schema, SchemaRef};

type Labels = StringDictionaryBuilder<Int32Type>;

/// A column builder as a row builder starts it (empty, timestamps in UTC), and the Arrow type
/// of the column it builds.
trait Fresh {
    fn fresh() -> Self;
    fn data_type() -> DataType;
}

/// Whether a row's value may be absent: its column is then nullable.
trait Value {
    const NULLABLE: bool;
}

macro_rules! values {
    ($($t:ty),*) => {$(
        impl Value for $t {
            const NULLABLE: bool = false;
        }
    )*};
}
values!(i16, i32, i64, f32, f64, &str);

impl<T> Value for Option<T> {
    const NULLABLE: bool = true;
}

/// A column builder taking one row's value: present (`T`) or maybe absent (`Option<T>`).
trait Column<T> {
    fn put(&mut self, value: T);
}

macro_rules! columns {
    ($($builder:ty => $value:ty => $data_type:expr),* $(,)?) => {$(
        impl Fresh for $builder {
            fn fresh() -> Self {
                Self::default()
            }
            fn data_type() -> DataType {
                $data_type
            }
        }
        impl Column<$value> for $builder {
            fn put(&mut self, value: $value) {
                self.append_value(value)
            }
        }
        impl Column<Option<$value>> for $builder {
            fn put(&mut self, value: Option<$value>) {
                self.append_option(value)
            }
        }
    )*};
}
columns!(
    Int16Builder => i16 => DataType::Int16,
    Int32Builder => i32 => DataType::Int32,
    Int64Builder => i64 => DataType::Int64,
    Float32Builder => f32 => DataType::Float32,
    Float64Builder => f64 => DataType::Float64,
);

impl Fresh for TimestampMillisecondBuilder {
    fn fresh() -> Self {
        TimestampMillisecondBuilder::new().with_timezone("UTC")
    }
    fn data_type() -> DataType {
        super::column_types::ts_type()
    }
}
impl Column<i64> for TimestampMillisecondBuilder {
    fn put(&mut self, value: i64) {
        self.append_value(value)
    }
}
impl Column<Option<i64>> for TimestampMillisecondBuilder {
    fn put(&mut self, value: Option<i64>) {
        self.append_option(value)
    }
}

macro_rules! string_columns {
    ($($builder:ty => $data_type:expr),*) => {$(
        impl Fresh for $builder {
            fn fresh() -> Self {
                Self::default()
            }
            fn data_type() -> DataType {
                $data_type
            }
        }
        impl<'a> Column<&'a str> for $builder {
            fn put(&mut self, value: &'a str) {
                self.append_value(value);
            }
        }
        impl<'a> Column<Option<&'a str>> for $builder {
            fn put(&mut self, value: Option<&'a str>) {
                self.append_option(value);
            }
        }
    )*};
}
string_columns!(Labels => super::column_types::label_type(), StringBuilder => DataType::Utf8);

/// A lake table's row (`$row`, borrowed values; `$row::schema()` is the table's schema) and
/// its builder (`$builder`: `push` a row, `finish` a batch), from one list of columns in
/// schema order: name, value type (an `Option` is a nullable column), column builder (the
/// Arrow type). Every table ends with the nullable `cluster` column, which the builders leave
/// null ([`with_cluster`] sets it).
macro_rules! lake_rows {
    ($($(#[$doc:meta])* $table:ident => $row:ident, $builder:ident { $($field:ident: $value:ty => $column:ty),* $(,)? })*) => {$(
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, Default)]
        pub struct $row<'a> {
            $(pub $field: $value,)*
        }

        impl<'a> $row<'a> {
            /// The table's Arrow schema, `cluster` last.
            pub fn schema() -> SchemaRef {
                let mut fields = vec![$(Field::new(stringify!($field), <$column as Fresh>::data_type(), <$value as Value>::NULLABLE),)*];
                fields.push(super::column_types::cluster());
                Arc::new(Schema::new(fields))
            }
        }

        pub struct $builder {
            $($field: $column,)*
        }

        impl Default for $builder {
            fn default() -> Self {
                $builder { $($field: Fresh::fresh(),)* }
            }
        }

        impl $builder {
            pub fn new() -> Self {
                Self::default()
            }

            pub fn push(&mut self, r: &$row) {
                $(self.$field.put(r.$field);)*
            }

            pub fn finish(mut self) -> RecordBatch {
                table_batch($row::schema(), vec![$(Arc::new(self.$field.finish()) as ArrayRef,)*])
            }
        }
    )*};
}

/// A batch of a table of `schema` from its columns in schema order, all but the trailing
/// `cluster`, which comes null (the cluster is the collector's to set, per batch: [`with_cluster`]).
pub fn table_batch(schema: SchemaRef, mut columns: Vec<ArrayRef>) -> RecordBatch {
    let rows = columns.first().map_or(0, |c| c.len());
    columns.push(arrow::array::new_null_array(&super::column_types::label_type(), rows));
    RecordBatch::try_new(schema, columns).expect("row builder columns match the table schema")
}

/// `batch` (of a lake table) with every row's `cluster` set to `name`.
pub fn with_cluster(batch: RecordBatch, name: &str) -> RecordBatch {
    let schema = batch.schema();
    let idx = schema.index_of(super::column_types::CLUSTER).expect("every lake table has a cluster column");
    let mut columns = batch.columns().to_vec();
    let keys = arrow::array::Int32Array::from(vec![0; batch.num_rows()]);
    let values: ArrayRef = Arc::new(arrow::array::StringArray::from(vec![name]));
    columns[idx] = Arc::new(arrow::array::DictionaryArray::<Int32Type>::try_new(keys, values).expect("one value"));
    RecordBatch::try_new(schema, columns).expect("the same schema")
}

lake_rows! {
    /// One `gpu_samples` row.
    GpuSamples => GpuSampleRow, GpuSamplesBuilder {
        ts: i64 => TimestampMillisecondBuilder,
        step_s: i32 => Int32Builder,
        node: &'a str => Labels,
        gpu_uuid: &'a str => Labels,
        gpu_index: i16 => Int16Builder,
        gpu_model: &'a str => Labels,
        mig_profile: Option<&'a str> => Labels,
        gpu_instance_id: Option<i16> => Int16Builder,
        namespace: Option<&'a str> => Labels,
        pod: Option<&'a str> => Labels,
        container: Option<&'a str> => Labels,
        share: f64 => Float64Builder,
        util_pct: Option<f32> => Float32Builder,
        mem_used_mib: Option<f32> => Float32Builder,
        mem_total_mib: Option<f32> => Float32Builder,
        power_w: Option<f32> => Float32Builder,
        energy_j: Option<f64> => Float64Builder,
        temp_c: Option<f32> => Float32Builder,
        xid: Option<i32> => Int32Builder,
        // The physical GPU's energy over the step by its energy counter alone (J): the raw
        // readings' deltas, linear between consecutive readings, where readings cover the whole
        // step without a decrease (a reset) or an implausible gap; on one row of the GPU's step
        // (its first), null on the others and where the counters do not cover the step. The
        // independent side of energy's conservation (`nodes.counter_delta_j`).
        counter_j: Option<f64> => Float64Builder,
    }

    /// One `pods` row.
    Pods => PodRow, PodsBuilder {
        namespace: &'a str => Labels,
        pod: &'a str => StringBuilder,
        uid: &'a str => StringBuilder,
        node: Option<&'a str> => Labels,
        priority_class: Option<&'a str> => Labels,
        created: i64 => TimestampMillisecondBuilder,
        scheduled: Option<i64> => TimestampMillisecondBuilder,
        started: Option<i64> => TimestampMillisecondBuilder,
        finished: Option<i64> => TimestampMillisecondBuilder,
        gpu_resource: Option<&'a str> => Labels,
        gpu_request: i32 => Int32Builder,
        cpu_request: Option<f64> => Float64Builder,
        mem_request_bytes: Option<i64> => Int64Builder,
        phase: Option<&'a str> => Labels,
        termination_reason: Option<&'a str> => Labels,
        team: Option<&'a str> => Labels,
        gpu_share_pct: Option<f64> => Float64Builder,
    }

    /// One `pending_samples` row.
    PendingSamples => PendingRow, PendingBuilder {
        ts: i64 => TimestampMillisecondBuilder,
        step_s: i32 => Int32Builder,
        namespace: &'a str => Labels,
        pod: &'a str => StringBuilder,
        uid: &'a str => StringBuilder,
        priority_class: Option<&'a str> => Labels,
        gpu_resource: Option<&'a str> => Labels,
        gpu_request: i32 => Int32Builder,
        reason: Option<&'a str> => Labels,
        // A pending HAMi pod's share of a GPU in percent (its `nvidia.com/gpucores`), as the
        // pod's row has it: its demand is that share of each vGPU it asks for.
        gpu_share_pct: Option<f64> => Float64Builder,
    }

    /// One `quotas` row.
    Quotas => QuotaRow, QuotasBuilder {
        ts: i64 => TimestampMillisecondBuilder,
        namespace: &'a str => Labels,
        resource: &'a str => Labels,
        hard: Option<f64> => Float64Builder,
        used: Option<f64> => Float64Builder,
    }

    /// One `nodes` (inventory) row.
    Nodes => NodeRow, NodesBuilder {
        node: &'a str => Labels,
        gpu_uuid: &'a str => Labels,
        gpu_index: i16 => Int16Builder,
        gpu_model: &'a str => Labels,
        mig_profile: Option<&'a str> => Labels,
        gpu_instance_id: Option<i16> => Int16Builder,
        share: f64 => Float64Builder,
        mem_total_mib: Option<f32> => Float32Builder,
        first_seen: i64 => TimestampMillisecondBuilder,
        last_seen: i64 => TimestampMillisecondBuilder,
        // The day's energy of the physical GPU's `gpu_samples` rows (J), on its first row of
        // the day (null on its other units' rows and for GPUs without energy).
        rows_energy_j: Option<f64> => Float64Builder,
        // Of `rows_energy_j`, the part on steps its energy counter covers (`gpu_samples.counter_j`).
        counter_energy_j: Option<f64> => Float64Builder,
        // The counter's own delta over those steps (the sum of `gpu_samples.counter_j`): equal
        // to `counter_energy_j` where the rows conserve the counter's energy.
        counter_delta_j: Option<f64> => Float64Builder,
    }

    /// One `pod_owners` row: a GPU pod's controller and the top-level workload it resolves to.
    PodOwners => PodOwnerRow, PodOwnersBuilder {
        created: i64 => TimestampMillisecondBuilder,
        namespace: &'a str => Labels,
        pod: &'a str => StringBuilder,
        uid: &'a str => StringBuilder,
        owner_kind: Option<&'a str> => Labels,
        owner_name: Option<&'a str> => Labels,
        // The hops above the owner as resolved, ` > ` between them (`ReplicaSet/web-5d8f > Deployment/web`).
        chain: &'a str => Labels,
        workload_kind: &'a str => Labels,
        workload_name: &'a str => Labels,
        // Null where every hop came from kube-state-metrics' owner series; else what was
        // inferred and from what (a label, a name convention).
        inferred: Option<&'a str> => Labels,
    }

    /// One `queue_quotas` row: a scheduler queue's quota and use at one step, in GPUs.
    QueueQuotas => QueueQuotaRow, QueueQuotasBuilder {
        ts: i64 => TimestampMillisecondBuilder,
        scheduler: &'a str => Labels,
        queue: &'a str => Labels,
        cohort: Option<&'a str> => Labels,
        flavor: Option<&'a str> => Labels,
        resource: &'a str => Labels,
        nominal: Option<f64> => Float64Builder,
        borrowing_limit: Option<f64> => Float64Builder,
        capacity: Option<f64> => Float64Builder,
        allocated: Option<f64> => Float64Builder,
        pending: Option<f64> => Float64Builder,
    }

    /// One `pod_labels` row: one label (or annotation) of a GPU pod, as kube-state-metrics
    /// names it (without its `label_` / `annotation_` prefix).
    PodLabels => PodLabelRow, PodLabelsBuilder {
        created: i64 => TimestampMillisecondBuilder,
        namespace: &'a str => Labels,
        pod: &'a str => StringBuilder,
        uid: &'a str => StringBuilder,
        source: &'a str => Labels,
        key: &'a str => Labels,
        value: &'a str => Labels,
    }
}
