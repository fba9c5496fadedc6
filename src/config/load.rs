//! Reading the config file: TOML into typed values, validated, with the paths it names made
//! relative to the file.

use std::path::Path;

use super::error::{ConfigError, Result};
use super::types::Config;

impl Config {
    /// Loads `path`; a missing file is an error only when `required` (an explicit `--config`).
    pub fn load(path: &Path, required: bool) -> Result<Config> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let mut config = Config::parse(&text, &path.display().to_string())?;
                // Relative paths in a config file are relative to the file.
                let base = path.parent().unwrap_or(Path::new(""));
                if config.lake.path.is_relative() && !crate::domain::location::is_url(&config.lake.path) {
                    config.lake.path = base.join(&config.lake.path);
                }
                if config.run.reports_dir.is_relative() {
                    config.run.reports_dir = base.join(&config.run.reports_dir);
                }
                for p in [
                    &mut config.queries.dir,
                    &mut config.lake.s3.credentials_file,
                    &mut config.prometheus.bearer_token_file,
                    &mut config.prometheus.basic_auth_password_file,
                    &mut config.prometheus.ca_file,
                    &mut config.serve.users_file,
                    &mut config.serve.tls_cert,
                    &mut config.serve.tls_key,
                ] {
                    if let Some(dir) = p.as_mut().filter(|d| d.is_relative()) {
                        *dir = base.join(&*dir);
                    }
                }
                Ok(config)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && !required => Ok(Config::default()),
            Err(source) => Err(ConfigError::Read { path: path.to_path_buf(), source }),
        }
    }

    /// Parses and validates TOML text; `origin` names the source in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Config> {
        let mut config: Config =
            toml::from_str(text).map_err(|e| ConfigError::Parse { path: origin.to_string(), message: e.to_string().trim().replace('\n', " ") })?;
        config.pricing.power.resolved = config.validate(origin)?;
        Ok(config)
    }
}
