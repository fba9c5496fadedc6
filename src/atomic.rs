//! The one way a local file is published: written under a temp name beside it, fsynced,
//! renamed over the old one, and its folder fsynced, so a reader (or a crash) sees the old file
//! or the new one, never part of one. A failed or abandoned write removes its temp file.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// The temp name `path` is written under before its rename (`x.parquet` -> `x.parquet.tmp`).
pub fn temp_path(path: &Path) -> PathBuf {
    PathBuf::from(format!("{}.tmp", path.display()))
}

/// A file being written: [`commit`](Self::commit) publishes it; dropped uncommitted, its temp
/// file is removed and `path` is left as it was.
#[derive(Debug)]
pub struct Pending {
    path: PathBuf,
    tmp: PathBuf,
    file: File,
    committed: bool,
}

impl Pending {
    /// Creates the folders up to `path` and the temp file.
    pub fn create(path: &Path) -> io::Result<Pending> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            fs::create_dir_all(dir)?;
        }
        let tmp = temp_path(path);
        let file = File::create(&tmp)?;
        Ok(Pending { path: path.to_path_buf(), tmp, file, committed: false })
    }

    pub fn file(&mut self) -> &mut File {
        &mut self.file
    }

    /// The temp file's name (for messages about a failed write).
    pub fn temp(&self) -> &Path {
        &self.tmp
    }

    /// fsync, rename over `path`, fsync the folder.
    pub fn commit(mut self) -> io::Result<()> {
        self.file.sync_all()?;
        fs::rename(&self.tmp, &self.path)?;
        self.committed = true;
        match self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
            Some(dir) => File::open(dir)?.sync_all(),
            None => File::open(".")?.sync_all(),
        }
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.committed {
            let _ = fs::remove_file(&self.tmp);
        }
    }
}

/// Publishes what `write` writes as `path`.
pub fn publish(path: &Path, write: impl FnOnce(&mut File) -> io::Result<()>) -> io::Result<()> {
    let mut pending = Pending::create(path)?;
    write(pending.file())?;
    pending.commit()
}

/// Publishes `bytes` as `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    publish(path, |f| f.write_all(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_write_leaves_the_old_file_and_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("sub/a.csv");
        write_atomic(&path, b"old").unwrap();
        let failed = publish(&path, |f| {
            f.write_all(b"half")?;
            Err(io::Error::other("cut off"))
        });
        assert!(failed.is_err());
        assert_eq!(fs::read(&path).unwrap(), b"old");
        assert!(!temp_path(&path).exists(), "temp file removed");
        let pending = Pending::create(&path).unwrap();
        drop(pending);
        assert!(!temp_path(&path).exists() && fs::read(&path).unwrap() == b"old", "an abandoned write leaves nothing");
        write_atomic(&path, b"new").unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        assert_eq!(temp_path(Path::new("d/x.parquet")), Path::new("d/x.parquet.tmp"));
    }
}
