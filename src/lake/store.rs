//! Where the lake's bytes live, and every read and write of them: a local folder (std::fs; a
//! file is written under a temp name, fsynced, renamed, and its folder fsynced) or, with the
//! `s3` feature, an S3-compatible bucket (`s3`; a file is one PUT). Paths stay `PathBuf`s under
//! `Lake::root()` either way (`s3://bucket/prefix/gpu_samples/...` for a bucket), so error
//! messages name the file the same way on both.

use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use parquet::errors::ParquetError;
use parquet::file::metadata::{ParquetMetaData, ParquetMetaDataReader};
use parquet::file::reader::{ChunkReader, Length};

pub use super::backend::Store;
use super::layout::Lake;

pub use crate::domain::location::is_url;

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[cfg(feature = "s3")]
    #[error(transparent)]
    S3(#[from] super::s3::S3Error),
    #[error("lake.path {0:?}: object storage needs gpuledger built with the `s3` feature")]
    NoS3(String),
}

/// A lake location that cannot be opened is a configuration error.
impl crate::exit::ExitStatus for OpenError {
    fn exit_code(&self) -> Option<u8> {
        Some(crate::exit::USAGE)
    }
}

/// A Parquet footer that could not be read, naming the file, with the reader's error.
#[derive(Debug, thiserror::Error)]
pub enum FooterError {
    #[error("{path}")]
    Io { path: PathBuf, source: io::Error },
    #[error("{path}")]
    Parquet { path: PathBuf, source: ParquetError },
}

/// An open lake file for the Parquet readers: a local file, or an object's bytes.
pub enum LakeFile {
    Local(File),
    Remote(Bytes),
}

impl Length for LakeFile {
    fn len(&self) -> u64 {
        match self {
            LakeFile::Local(f) => f.len(),
            LakeFile::Remote(b) => b.len() as u64,
        }
    }
}

impl ChunkReader for LakeFile {
    type T = Box<dyn Read + Send>;

    fn get_read(&self, start: u64) -> Result<Self::T, ParquetError> {
        Ok(match self {
            LakeFile::Local(f) => Box::new(f.get_read(start)?),
            LakeFile::Remote(b) => Box::new(b.get_read(start)?),
        })
    }

    fn get_bytes(&self, start: u64, length: usize) -> Result<Bytes, ParquetError> {
        match self {
            LakeFile::Local(f) => f.get_bytes(start, length),
            LakeFile::Remote(b) => b.get_bytes(start, length),
        }
    }
}

impl Lake {
    /// The lake at `location`: a local folder, or `s3://bucket/prefix` with `s3`'s settings.
    pub fn open(location: &Path, s3: &crate::config::S3Config) -> Result<Lake, OpenError> {
        if !is_url(location) {
            return Ok(Lake::new(location));
        }
        let text = location.to_string_lossy().into_owned();
        #[cfg(feature = "s3")]
        {
            let store = super::s3::S3Store::open(&text, s3)?;
            let root = PathBuf::from(store.location());
            Ok(Lake::with_store(root, Store::S3(std::sync::Arc::new(store))))
        }
        #[cfg(not(feature = "s3"))]
        {
            let _ = s3;
            Err(OpenError::NoS3(text))
        }
    }

    pub fn is_local(&self) -> bool {
        matches!(self.store(), Store::Local)
    }

    #[cfg(feature = "s3")]
    pub(crate) fn rel<'a>(&self, path: &'a Path) -> io::Result<&'a Path> {
        path.strip_prefix(self.root()).map_err(|_| io::Error::other(format!("{} is outside the lake {}", path.display(), self.root().display())))
    }

    /// Names of the entries directly under `dir` (files and folders), sorted; none when absent.
    pub fn list(&self, dir: &Path) -> io::Result<Vec<String>> {
        match self.store() {
            Store::Local => {
                let mut names = Vec::new();
                match fs::read_dir(dir) {
                    Ok(entries) => {
                        for e in entries {
                            names.push(e?.file_name().to_string_lossy().into_owned());
                        }
                    }
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
                names.sort();
                Ok(names)
            }
            #[cfg(feature = "s3")]
            Store::S3(s) => s.list(self.rel(dir)?),
        }
    }

    /// The whole file.
    pub fn read(&self, path: &Path) -> io::Result<Bytes> {
        match self.store() {
            Store::Local => fs::read(path).map(Bytes::from),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.read(self.rel(path)?),
        }
    }

    /// The file for a Parquet reader (a bucket's object is fetched whole, in one request).
    pub fn open_file(&self, path: &Path) -> io::Result<LakeFile> {
        match self.store() {
            Store::Local => File::open(path).map(LakeFile::Local),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.read(self.rel(path)?).map(LakeFile::Remote),
        }
    }

    /// The file's size in bytes.
    pub fn file_len(&self, path: &Path) -> io::Result<u64> {
        match self.store() {
            Store::Local => fs::metadata(path).map(|m| m.len()),
            #[cfg(feature = "s3")]
            Store::S3(s) => s.len(self.rel(path)?),
        }
    }

    pub fn exists(&self, path: &Path) -> bool {
        match self.store() {
            Store::Local => path.exists(),
            #[cfg(feature = "s3")]
            Store::S3(_) => self.file_len(path).is_ok(),
        }
    }

    /// Removes the file, durably; Ok(false) when it was not there.
    pub fn remove(&self, path: &Path) -> io::Result<bool> {
        match self.store() {
            Store::Local => match fs::remove_file(path) {
                Ok(()) => {
                    if let Some(dir) = path.parent() {
                        File::open(dir)?.sync_all()?;
                    }
                    Ok(true)
                }
                Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
                Err(e) => Err(e),
            },
            #[cfg(feature = "s3")]
            Store::S3(s) => s.remove(self.rel(path)?),
        }
    }

    /// Removes `dir` and everything under it (nothing when absent).
    pub fn remove_tree(&self, dir: &Path) -> io::Result<()> {
        match self.store() {
            Store::Local => match fs::remove_dir_all(dir) {
                Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
                _ => Ok(()),
            },
            #[cfg(feature = "s3")]
            Store::S3(s) => {
                let rel = self.rel(dir)?;
                for f in s.list_files(rel)? {
                    s.remove(&rel.join(f))?;
                }
                Ok(())
            }
        }
    }

    /// Publishes what `write` writes as `path`, replacing any earlier file atomically: readers
    /// see the old file or the new one, never part of one, and a failure leaves the old one.
    /// Locally: a temp file beside it, fsync, rename, fsync of the folder. On S3: one PUT.
    pub fn publish(&self, path: &Path, write: impl FnOnce(&mut (dyn Write + Send)) -> io::Result<()>) -> io::Result<()> {
        match self.store() {
            Store::Local => crate::atomic::publish(path, |file| write(file)),
            #[cfg(feature = "s3")]
            Store::S3(s) => {
                let rel = self.rel(path)?;
                let mut buf: Vec<u8> = Vec::new();
                write(&mut buf)?;
                s.put(rel, buf)
            }
        }
    }

    /// The Parquet footer of `path` and the file's size (locally from the file; on S3 from one
    /// ranged read of its tail, which also gives the size).
    pub fn footer(&self, path: &Path) -> Result<(ParquetMetaData, u64), FooterError> {
        let io = |source| FooterError::Io { path: path.to_path_buf(), source };
        let parquet = |source| FooterError::Parquet { path: path.to_path_buf(), source };
        match self.store() {
            Store::Local => {
                let file = File::open(path).map_err(io)?;
                let size = file.len();
                ParquetMetaDataReader::new().parse_and_finish(&file).map(|m| (m, size)).map_err(parquet)
            }
            #[cfg(feature = "s3")]
            Store::S3(s) => {
                let rel = self.rel(path).map_err(io)?;
                let mut want: u64 = 64 * 1024;
                loop {
                    let (tail, size) = s.read_tail(rel, want).map_err(io)?;
                    let mut reader = ParquetMetaDataReader::new();
                    match reader.try_parse_sized(&tail, size) {
                        Ok(()) => return reader.finish().map(|m| (m, size)).map_err(parquet),
                        Err(ParquetError::NeedMoreData(n)) if (n as u64) > want && (n as u64) <= size => want = n as u64,
                        Err(e) => return Err(parquet(e)),
                    }
                }
            }
        }
    }

    /// Which of `paths` (files under `dir`) exist: locally each is looked up, on S3 `dir` is
    /// listed once.
    pub fn existing(&self, dir: &Path, paths: Vec<PathBuf>) -> io::Result<Vec<PathBuf>> {
        match self.store() {
            Store::Local => {
                let _ = dir;
                Ok(paths.into_iter().filter(|p| p.exists()).collect())
            }
            #[cfg(feature = "s3")]
            Store::S3(s) => {
                let present: std::collections::HashSet<PathBuf> = s.list_files(self.rel(dir)?)?.into_iter().map(|r| dir.join(r)).collect();
                Ok(paths.into_iter().filter(|p| present.contains(p)).collect())
            }
        }
    }
}

/// The temp name a local file is written under before its rename.
pub use crate::atomic::temp_path;
