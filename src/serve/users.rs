//! The users of `serve`: one `user:password` line per user in a file (a mounted Secret), read at
//! every login so that a rotated Secret takes effect without a restart. Logins are
//! SCRAM-SHA-256: the password never crosses the wire, and it is never logged.
//!
//! A user may be given a scope: `scope USER team=a,b cost_centre=c namespace=x` lines (any of
//! the keys, repeatable) limit what the user reads to the rows of those namespaces (a team's or
//! a cost centre's namespaces as the `teams` table maps them). A user without a scope line reads
//! everything.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use datafusion_postgres::pgwire;
use pgwire::api::auth::sasl::scram::{gen_salted_password, random_nonce, SCRAM_ITERATIONS};
use pgwire::api::auth::{AuthSource, LoginInfo, Password};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};

#[derive(Debug, thiserror::Error)]
pub enum UsersError {
    #[error("reading the users file {path}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("{path}:{line}: expected user:password (a user name, a colon, a non-empty password)")]
    Malformed { path: PathBuf, line: usize },
    #[error("{path}:{line}: user {user:?} is listed twice")]
    Duplicate { path: PathBuf, line: usize, user: String },
    #[error("{path}: no users (one user:password line per user)")]
    Empty { path: PathBuf },
    #[error("{path}:{line}: expected scope USER KEY=VALUE[,VALUE...] with KEY team, cost_centre or namespace; got {got:?}")]
    BadScope { path: PathBuf, line: usize, got: String },
    #[error("{path}:{line}: a scope for {user:?}, who has no user:password line")]
    ScopeOfNobody { path: PathBuf, line: usize, user: String },
}

/// The rows a user may read: those of these namespaces, and of the namespaces of these teams
/// and cost centres.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Scope {
    pub teams: BTreeSet<String>,
    pub cost_centres: BTreeSet<String>,
    pub namespaces: BTreeSet<String>,
}

/// Who a connection logged in as, and what it may read (kept with the connection from its
/// login; a client cannot set it).
#[derive(Debug, Clone)]
pub struct Login {
    pub user: String,
    pub scope: Option<Scope>,
}

/// The users file, read.
#[derive(Debug, Clone, Default)]
pub struct Users {
    /// user -> password.
    pub passwords: BTreeMap<String, String>,
    /// user -> scope; a user not here reads everything.
    pub scopes: BTreeMap<String, Scope>,
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

    /// The users, their passwords and scopes.
    pub fn read(&self) -> Result<Users, UsersError> {
        let text = std::fs::read_to_string(&self.path).map_err(|source| UsersError::Read { path: self.path.clone(), source })?;
        parse(&text, &self.path)
    }
}

/// `user:password` lines (the password may hold colons; blank lines and `#` comments skipped)
/// and `scope USER KEY=VALUES...` lines.
pub fn parse(text: &str, path: &Path) -> Result<Users, UsersError> {
    let mut users = BTreeMap::new();
    let mut scopes: BTreeMap<String, Scope> = BTreeMap::new();
    let mut scoped_at: BTreeMap<String, usize> = BTreeMap::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim_end_matches('\r');
        if line.trim().is_empty() || line.trim_start().starts_with('#') {
            continue;
        }
        if let Some(rest) = line.trim_start().strip_prefix("scope ") {
            let bad = || UsersError::BadScope { path: path.to_path_buf(), line: i + 1, got: line.trim().to_string() };
            let mut words = rest.split_whitespace();
            let user = words.next().ok_or_else(bad)?;
            let scope = scopes.entry(user.to_string()).or_default();
            scoped_at.entry(user.to_string()).or_insert(i + 1);
            let mut any = false;
            for word in words {
                let (key, values) = word.split_once('=').ok_or_else(bad)?;
                let set = match key {
                    "team" => &mut scope.teams,
                    "cost_centre" => &mut scope.cost_centres,
                    "namespace" => &mut scope.namespaces,
                    _ => return Err(bad()),
                };
                for v in values.split(',') {
                    if v.is_empty() {
                        return Err(bad());
                    }
                    set.insert(v.to_string());
                }
                any = true;
            }
            if !any {
                return Err(bad());
            }
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
    if let Some((user, line)) = scoped_at.into_iter().find(|(u, _)| !users.contains_key(u)) {
        return Err(UsersError::ScopeOfNobody { path: path.to_path_buf(), line, user });
    }
    Ok(Users { passwords: users, scopes })
}

#[async_trait]
impl AuthSource for UsersFile {
    /// The salted password SCRAM checks the client's proof against. An unknown user gets a
    /// random one, so the exchange fails the same way as for a wrong password (no probing for
    /// names).
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        let users = self.read().map_err(|e| {
            tracing::error!("login refused: {}", crate::error_chain::Chain(&e));
            PgWireError::UserError(Box::new(ErrorInfo::new("FATAL".into(), "28000".into(), "the server's users file cannot be read".into())))
        })?;
        let password = login.user().and_then(|u| users.passwords.get(u)).cloned().unwrap_or_else(random_nonce);
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
        let users = parse("# finance\nalice:s3cret\n\nbob:a:b:c\r\n", p).unwrap().passwords;
        assert_eq!(users.len(), 2);
        assert_eq!(users["alice"], "s3cret");
        assert_eq!(users["bob"], "a:b:c");
        let err = parse("alice:pw-secret-1\nbob\n", p).unwrap_err().to_string();
        assert!(err.contains("users.txt:2") && !err.contains("pw-secret"), "{err}");
        assert!(matches!(parse("alice:\n", p), Err(UsersError::Malformed { line: 1, .. })));
        assert!(matches!(parse("alice:x\nalice:y\n", p), Err(UsersError::Duplicate { line: 2, .. })));
        assert!(matches!(parse("# nobody\n", p), Err(UsersError::Empty { .. })));
    }

    #[test]
    fn scopes_by_team_cost_centre_and_namespace() {
        let p = Path::new("users.txt");
        let users = parse("alice:pw\nbob:pw\nscope alice team=research,infra namespace=team-x\nscope alice cost_centre=cc-1\n", p).unwrap();
        let alice = &users.scopes["alice"];
        assert_eq!(alice.teams, BTreeSet::from(["research".to_string(), "infra".to_string()]));
        assert_eq!((alice.cost_centres.len(), alice.namespaces.len()), (1, 1));
        assert!(!users.scopes.contains_key("bob"), "bob reads everything");
        assert!(matches!(parse("alice:pw\nscope alice\n", p), Err(UsersError::BadScope { line: 2, .. })));
        assert!(matches!(parse("alice:pw\nscope alice project=x\n", p), Err(UsersError::BadScope { line: 2, .. })));
        assert!(matches!(parse("alice:pw\nscope carol team=x\n", p), Err(UsersError::ScopeOfNobody { line: 2, .. })));
    }
}
