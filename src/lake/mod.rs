//! The Parquet lake: one explicit schema per table (`schema`), the on-disk layout
//! (`layout`), the atomic writer (`writer`), the rollups kept of `gpu_samples` and
//! `pending_samples` days (`rollup/`, one file per kind), a day and its rollups published
//! together (`day`), and the passes that read them (`passes/`), on a local disk or object
//! storage (`store`, `s3`).

pub mod backend;
pub mod column_types;
pub mod day;
pub mod gpu_energy;
pub mod import;
pub mod intern;
pub mod layout;
pub mod passes;
pub mod published;
pub mod quantize;
pub mod reader;
pub mod rollup;
pub mod rows;
#[cfg(feature = "s3")]
pub mod s3;
pub mod scan;
pub mod schema;
pub mod store;
pub mod writer;

pub use day::write_partition;
pub use layout::Lake;
pub use schema::Table;
pub use writer::WriteError;
