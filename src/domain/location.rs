//! Where the lake lives: a local folder or an object-storage URL.

use std::path::Path;

/// Whether `path` names object storage (`s3://...`) rather than a local folder.
pub fn is_url(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.contains("://"))
}
