//! Secrets out of every message: one place that knows what a secret looks like here.
//!
//! A `Redactor` holds the secrets a run was configured with (a bearer token, a basic-auth
//! password and its encoded header, extra header values such as a tenant id, the password of a
//! URL) and replaces each, wherever it appears, with `<redacted>`; it also drops the
//! `user:password@` part of any URL in the text. Every message that can carry a server's words
//! or a URL goes through it: a proxy that echoes the `Authorization` header into its error page
//! does not put the token into the logs.

pub const MASK: &str = "<redacted>";

/// Shorter values are not masked: they would mask ordinary words and numbers.
const MIN_SECRET_LEN: usize = 4;

#[derive(Debug, Clone, Default)]
pub struct Redactor {
    /// Longest first, so a secret that contains another is masked whole.
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(secrets: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets: Vec<String> = secrets.into_iter().map(|s| s.trim().to_string()).filter(|s| s.len() >= MIN_SECRET_LEN).collect();
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        Redactor { secrets }
    }

    /// `text` with every secret masked and every URL's user information removed.
    pub fn apply(&self, text: &str) -> String {
        let mut out = url_userinfo(text);
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), MASK);
            }
        }
        out
    }
}

/// Drops `user:password@` from every `scheme://user:password@host` in `text`.
pub fn url_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the first '/', '?', '#' or whitespace; user info ends at its last '@'.
        let end = tail.find(|c: char| c == '/' || c == '?' || c == '#' || c.is_whitespace() || c == '"' || c == '\'').unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(at) => rest = &tail[at + 1..],
            None => rest = tail,
        }
    }
    out.push_str(rest);
    out
}

/// The user and password of `url`'s user information, if any (percent-decoding left to the caller).
pub fn userinfo(url: &str) -> Option<(String, Option<String>)> {
    let after = &url[url.find("://")? + 3..];
    let end = after.find(['/', '?', '#']).unwrap_or(after.len());
    let at = after[..end].rfind('@')?;
    let info = &after[..at];
    Some(match info.split_once(':') {
        Some((u, p)) => (u.to_string(), Some(p.to_string())),
        None => (info.to_string(), None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_lose_their_user_information() {
        assert_eq!(url_userinfo("https://bob:hunter2@mimir.example/prometheus"), "https://mimir.example/prometheus");
        assert_eq!(url_userinfo("GET http://a:b@h:9090/x and https://c@d/y"), "GET http://h:9090/x and https://d/y");
        assert_eq!(url_userinfo("no url here, an @ sign"), "no url here, an @ sign");
        assert_eq!(url_userinfo("http://host/path?email=a@b"), "http://host/path?email=a@b");
        assert_eq!(userinfo("http://u:p%40ss@h/"), Some(("u".into(), Some("p%40ss".into()))));
        assert_eq!(userinfo("http://h:9090/"), None);
    }

    #[test]
    fn every_secret_is_masked_wherever_it_appears() {
        let r = Redactor::new(["tok-secret-123".to_string(), "Bearer tok-secret-123".into(), "x".into(), "tenant-7".into()]);
        let text = "HTTP 401: bad header Authorization: Bearer tok-secret-123 for tenant-7 at http://u:pw@h/";
        assert_eq!(r.apply(text), "HTTP 401: bad header Authorization: <redacted> for <redacted> at http://h/");
        assert_eq!(r.apply("x marks"), "x marks", "short values are not secrets");
    }
}
