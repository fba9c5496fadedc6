//! How a failure ends the process: its exit code and its one line on stderr.

#[allow(unused_imports)]
use super::context::*;

/// The exit code for a failed command: the first error in its chain that has a code of its own
/// decides it (the table in `exit`).
///
/// (See also [`one_line`], the message printed with it.)
pub fn exit_code_for(error: &anyhow::Error) -> u8 {
    use crate::exit::ExitStatus;
    /// The code `cause` says for itself, where it is one of the error types that have one.
    fn said(cause: &(dyn std::error::Error + 'static)) -> Option<u8> {
        macro_rules! first_of {
            ($($t:ty),*) => {
                None $(.or_else(|| cause.downcast_ref::<$t>().and_then(ExitStatus::exit_code)))*
            };
        }
        first_of!(
            crate::exit::IncompleteData,
            UsageError,
            crate::config::ConfigError,
            crate::domain::window::WindowError,
            crate::adhoc::GuardError,
            crate::adhoc::AdhocError,
            crate::collect::state::StateError,
            crate::collect::CollectError,
            crate::lake::store::OpenError,
            crate::plan::PlanError,
            crate::serve::ServeError
        )
    }
    error.chain().find_map(said).unwrap_or(crate::exit::FAILURE)
}

/// A failure as the one line printed on stderr: the error, then each of its causes, joined by
/// ": " (the convention in `error_chain`: a message never states its source).
pub fn one_line(error: &anyhow::Error) -> String {
    crate::error_chain::chain(error.as_ref())
}

#[cfg(test)]
mod tests {
    /// Every error type that says an exit code (`impl ... ExitStatus for T` anywhere under
    /// `src/`) is among those `exit_code_for` asks: one left out would exit 1 whatever it says.
    #[test]
    fn every_error_with_an_exit_code_is_asked() {
        fn sources(dir: &std::path::Path, out: &mut Vec<(String, String)>) {
            for e in std::fs::read_dir(dir).unwrap() {
                let p = e.unwrap().path();
                if p.is_dir() {
                    sources(&p, out);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    out.push((p.display().to_string(), std::fs::read_to_string(&p).unwrap()));
                }
            }
        }
        let mut files = Vec::new();
        sources(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"), &mut files);
        let this = include_str!("failure.rs");
        let asked = &this[this.find("first_of!(\n").expect("the list")..];
        let asked = &asked[..asked.find(')').expect("its end")];
        let mut found = 0;
        for (path, text) in &files {
            for line in text.lines().filter(|l| l.starts_with("impl") && l.contains("ExitStatus for ")) {
                let ty = line.split("ExitStatus for ").nth(1).unwrap().trim_end_matches(" {").trim();
                let name = ty.rsplit("::").next().unwrap();
                found += 1;
                assert!(
                    asked.contains(&format!("::{name},")) || asked.contains(&format!("::{name}\n")) || asked.contains(&format!(" {name},")),
                    "{path}: {ty} says an exit code but exit_code_for does not ask it"
                );
            }
        }
        assert!(found >= 11, "the impls were found: {found}");
    }

    #[test]
    fn one_line_states_each_cause_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = anyhow::Error::new(crate::config::ConfigError::Read { path: "x.toml".into(), source: io }).context("loading the config");
        assert_eq!(super::one_line(&e), "loading the config: reading config x.toml: no such file");
        let bare = anyhow::Error::new(std::io::Error::other("disk full")).context("writing y");
        assert_eq!(super::one_line(&bare), "writing y: disk full", "a cause the message does not name is added");
        // `run`'s context "plan" around the plan's own error, whose message is "plan": told once.
        #[derive(Debug, thiserror::Error)]
        #[error("plan")]
        struct Plan(#[source] std::io::Error);
        let inner = anyhow::Error::new(Plan(std::io::Error::other("chargeback: no rows"))).context("plan").context("run 2026-10");
        assert_eq!(super::one_line(&inner), "run 2026-10: plan: chargeback: no rows");
    }
}
