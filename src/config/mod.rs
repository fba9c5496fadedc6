//! `gpuledger.toml`: loaded once (`load`: the file, paths relative to it), validated with
//! errors that name the key (`validate`), then passed on as typed values (`types`, with their
//! defaults in `defaults`): parse, then trust.

mod defaults;
mod load;
mod types;
mod validate;

use std::path::PathBuf;

pub use defaults::default_gpu_prices;
pub use types::*;
pub use validate::check_prometheus_url;

impl crate::exit::ExitStatus for ConfigError {
    fn exit_code(&self) -> Option<u8> {
        Some(crate::exit::USAGE)
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("reading config {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("parsing config {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config {path}: key `{key}`: {message}")]
    Invalid { path: String, key: String, message: String },
}

pub type Result<T, E = ConfigError> = std::result::Result<T, E>;
