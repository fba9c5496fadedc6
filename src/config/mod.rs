//! `gpuledger.toml`: loaded once (`load`: the file, paths relative to it), validated with
//! errors that name the key (`validate`), then passed on as typed values (`types`, with their
//! defaults in `defaults`): parse, then trust.

mod defaults;
mod error;
mod load;
mod types;
mod validate;

pub use defaults::default_gpu_prices;
pub use error::{ConfigError, Result};
pub use types::*;
pub use validate::check_prometheus_url;
