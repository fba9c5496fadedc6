//! The Arrow types every lake table's columns are made of: UTC millisecond timestamps,
//! dictionary-encoded labels, and the `cluster` column each table ends with.

use arrow::datatypes::{DataType, Field, TimeUnit};

/// Timestamps are milliseconds since the epoch, UTC.
pub fn ts_type() -> DataType {
    DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into()))
}

/// A non-null column of [`ts_type`] named `name`.
pub fn ts_field(name: &str) -> arrow::datatypes::Field {
    arrow::datatypes::Field::new(name, ts_type(), false)
}

/// Milliseconds since the epoch as a [`ts_type`] array.
pub fn ts_array(values: Vec<i64>) -> arrow::array::TimestampMillisecondArray {
    arrow::array::TimestampMillisecondArray::from(values).with_timezone("UTC")
}

/// Low-cardinality labels are dictionary-encoded in memory and in Parquet.
pub fn label_type() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

pub(super) fn ts(name: &str, nullable: bool) -> Field {
    Field::new(name, ts_type(), nullable)
}

pub(super) fn label(name: &str, nullable: bool) -> Field {
    Field::new(name, label_type(), nullable)
}

/// The column every table ends with: the cluster a row belongs to (the value of
/// `prometheus.cluster_label` on its series, else `prometheus.cluster_name`). Nullable: files
/// written before it existed read as null (see `schema::cluster_of`).
pub(super) fn cluster() -> Field {
    label(CLUSTER, true)
}

/// The name of the cluster column.
pub const CLUSTER: &str = "cluster";
