//! What a config file can get wrong, each naming the file (and the key).

use std::path::PathBuf;

impl crate::exit::ExitStatus for ConfigError {
    fn exit_code(&self) -> Option<u8> {
        Some(crate::exit::USAGE)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config {path}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("parsing config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config {path}: key `{key}`: {message}")]
    Invalid { path: String, key: String, message: String },
}

pub type Result<T, E = ConfigError> = std::result::Result<T, E>;
