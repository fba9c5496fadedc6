//! The Parquet lake: one explicit schema per table (`schema`), the on-disk layout
//! (`layout`), the atomic writer (`writer`) and the 15-minute rollup it keeps of
//! `gpu_samples` and `pending_samples` (`buckets`, `day_sums`, `rollup`), on a local disk or object storage (`store`, `s3`).

pub mod buckets;
pub mod day_sums;
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

pub use layout::Lake;
pub use schema::Table;
pub use writer::{write_partition, WriteError};
