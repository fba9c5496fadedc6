//! The Parquet lake: one explicit schema per table (`schema`), the on-disk layout
//! (`layout`) and the atomic writer (`writer`).

pub mod import;
pub mod intern;
pub mod layout;
pub mod quantize;
pub mod reader;
pub mod rows;
pub mod scan;
pub mod schema;
pub mod writer;

pub use layout::Lake;
pub use schema::Table;
pub use writer::{write_partition, WriteError};
