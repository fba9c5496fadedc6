//! How an error is told in one line: its message, then each cause its message does not state,
//! joined by ": ".
//!
//! The convention of every error type in this crate: a message never states its source; the
//! source is kept as `#[source]` (or `#[from]`) and told by [`Chain`]. Some foreign errors
//! (DataFusion's `External`, object_store's) state their source in their own message as well;
//! a link whose message its parent already states is not told twice.

use std::error::Error;
use std::fmt;

/// `error` and its sources as one line (`Display`).
pub struct Chain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for Chain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parent = self.0.to_string();
        f.write_str(&parent)?;
        let mut next = self.0.source();
        while let Some(cause) = next {
            let text = cause.to_string();
            if !parent.contains(&text) {
                write!(f, ": {text}")?;
            }
            parent = text;
            next = cause.source();
        }
        Ok(())
    }
}

/// `error` and its sources as one line.
pub fn chain(error: &(dyn Error + 'static)) -> String {
    Chain(error).to_string()
}

#[cfg(test)]
mod tests {
    use super::chain;

    #[derive(Debug, thiserror::Error)]
    #[error("reading {path}")]
    struct Read {
        path: String,
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_told_once() {
        let e = Read { path: "x".into(), source: std::io::Error::other("disk full") };
        assert_eq!(chain(&e), "reading x: disk full");
        // A foreign error that states its source (DataFusion's External) around one of ours.
        let df = datafusion::error::DataFusionError::External(Box::new(e));
        assert_eq!(chain(&df), "External error: reading x: disk full");
    }
}
