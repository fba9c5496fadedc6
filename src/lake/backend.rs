//! Where a lake is kept: a local folder or an S3-compatible bucket. The lake handle
//! (`layout::Lake`) holds one; every read and write of its bytes is in `store`.

/// Where a lake is kept.
#[derive(Debug, Clone)]
pub enum Store {
    Local,
    #[cfg(feature = "s3")]
    S3(std::sync::Arc<super::s3::S3Store>),
}
