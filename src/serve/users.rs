//! The users of `serve`: one `user:password` line per user in a file (a mounted Secret), read at
//! every login so that a rotated Secret takes effect without a restart. Logins are
//! SCRAM-SHA-256: the password never crosses the wire, and it is never logged.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use datafusion_postgres::pgwire;
use pgwire::api::auth::sasl::scram::{gen_salted_password, random_nonce, SCRAM_ITERATIONS};
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};

#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    #[error("reading the users file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}: expected user:password (a user name, a colon, a non-empty password)")]
    Malformed { path: PathBuf, line: usize },
    #[error("{path}:{line}: user {user:?} is listed twice")]
    Duplicate { path: PathBuf, line: usize, user: String },
    #[error("{path}: no users (one user:password line per user)")]
    Empty { path: PathBuf },
}

/// The users file; checked when the server starts, read again at each login.
#[derive(Debug, Clone)]
pub struct UsersFile {
    path: PathBuf,
}

impl UsersFile {
    /// Opens and checks `path` (it must hold at least one user).
    pub fn open(path: &Path) -> Result<Self, UsersError> {
        let file = UsersFile { path: path.to_path_buf() };
        file.read()?;
        Ok(file)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// user -> password.
    pub fn read(&self) -> Result<BTreeMap<String, String>, UsersError> {
        let text = std::fs::read_to_string(&self.path).map_err(|source| UsersError::Read { path: self.path.clone(), source })?;
        parse(&text, &self.path)
    }
}

/// `user:password` lines (the password may hold colons; blank lines and `#` comments skipped).
pub fn parse(text: &str, path: &Path) -> Result<BTreeMap<String, String>, UsersError> {
    let mut users = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        let malformed = || UsersError::Malformed { path: path.to_path_buf(), line: i + 1 };
        let (user, password) = line.split_once(':').ok_or_else(malformed)?;
        let user = user.trim();
        if user.is_empty() || password.is_empty() {
            return Err(malformed());
        }
        if users.insert(user.to_string(), password.to_string()).is_some() {
            return Err(UsersError::Duplicate { path: path.to_path_buf(), line: i + 1, user: user.to_string() });
        }
    }
    if users.is_empty() {
        return Err(UsersError::Empty { path: path.to_path_buf() });
    }
    Ok(users)
}

#[async_trait]
impl AuthSource for UsersFile {
    /// The salted password SCRAM checks the client's proof against. An unknown user gets a
    /// random one, so the exchange fails the same way as for a wrong password (no probing for
    /// names).
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let users = self.read().map_err(|e| {
            tracing::error!("login refused: {e}");
            PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".into(), "28000".into(), "the server's users file cannot be read".into())))
        })?;
        let password = login.user().and_then(|u| users.get(u)).cloned().unwrap_or_else(random_nonce);
        let salt = random_nonce().into_bytes();
        let salted = gen_salted_password(&password, &salt, SCRAM_ITERATIONS);
        Ok(Password::new(Some(salt), salted))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_comments_and_colons_in_passwords() {
        let p = Path::new("users.txt");
        let users = parse("# finance\nalice:s3cret\n\nbob:a:b:c\r\n", p).unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "s3cret");
        assert_eq!(users["bob"], "a:b:c");
        let err = parse("alice:pw-secret-1\nbob\n", p).unwrap_err().to_string();
        assert!(err.contains("users.txt:2") && !err.contains("pw-secret"), "{err}");
        assert!(matches!(parse("alice:\n", p), Err(UsersError::Malformed { line: 1, .. })));
        assert!(matches!(parse("alice:x\nalice:y\n", p), Err(UsersError::Duplicate { line: 2, .. })));
        assert!(matches!(parse("# nobody\n", p), Err(UsersError::Empty { .. })));
    }
}
