//! `gpuledger query` on a terminal with no SQL: an interactive prompt with line editing and a
//! history file. Statements end with `;`; backslash commands list tables and set options.

use std::io::Write;
use std::path::PathBuf;

use datafusion::prelude::SessionContext;
use rustyline::error::ReadlineError;

use super::catalog;
use crate::render::Format;

const HELP: &str = "\
Read-only SQL on the lake; end a statement with ';'. Parameters: $name, set with \\param.
  \\d              tables and views
  \\d NAME         one table's columns and their meaning
  \\format F       table, csv, json or md
  \\param K=V      bind $K to V (\\param alone lists them)
  \\q              quit (or Ctrl-D)";

/// `$GPULEDGER_HISTORY`, else `$XDG_STATE_HOME/gpuledger/history`, else
/// `~/.local/state/gpuledger/history`.
fn history_path() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("GPULEDGER_HISTORY") {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_STATE_HOME").map(PathBuf::from).or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".local/state")))?;
    Some(base.join("gpuledger").join("history"))
}

pub async fn interactive(session: &SessionContext, mut format: Format, mut params: Vec<(String, String)>) -> anyhow::Result<()> {
    let mut editor = rustyline::DefaultEditor::new()?;
    let history = history_path();
    if let Some(h) = &history {
        let _ = editor.load_history(h);
    }
    let mut out = std::io::stdout();
    writeln!(out, "gpuledger {} read-only SQL; \\? for help, \\q to quit", env!("CARGO_PKG_VERSION"))?;
    let mut buffer = String::new();
    loop {
        let prompt = if buffer.is_empty() { "gpuledger> " } else { "      ...> " };
        let line = match editor.readline(prompt) {
            Ok(l) => l,
            Err(ReadlineError::Interrupted) => {
                buffer.clear();
                continue;
            }
            Err(ReadlineError::Eof) => break,
            Err(e) => return Err(e.into()),
        };
        let trimmed = line.trim();
        if buffer.is_empty() && trimmed.starts_with('\\') {
            let _ = editor.add_history_entry(trimmed);
            let (cmd, arg) = trimmed.split_once(' ').map_or((trimmed, ""), |(c, a)| (c, a.trim()));
            match cmd {
                "\\q" | "\\quit" => break,
                "\\?" | "\\h" | "\\help" => writeln!(out, "{HELP}")?,
                "\\d" => {
                    let docs = catalog::describe(session).await?;
                    if arg.is_empty() {
                        for t in &docs {
                            writeln!(out, "{:<16} {:<13} {}", t.name, t.kind, t.meaning)?;
                        }
                    } else {
                        match docs.iter().find(|t| t.name == arg) {
                            Some(t) => write!(out, "{}", catalog::render(std::slice::from_ref(t)))?,
                            None => writeln!(out, "no table or view named {arg:?}")?,
                        }
                    }
                }
                "\\format" => match <Format as clap::ValueEnum>::from_str(arg, true) {
                    Ok(Format::Parquet) | Err(_) => writeln!(out, "formats here: table, csv, json, md")?,
                    Ok(f) => format = f,
                },
                "\\param" if arg.is_empty() => {
                    for (k, v) in &params {
                        writeln!(out, "${k} = {v:?}")?;
                    }
                }
                "\\param" => match super::parse_param(arg) {
                    Ok((k, v)) => {
                        params.retain(|(n, _)| *n != k);
                        params.push((k, v));
                    }
                    Err(e) => writeln!(out, "{e}")?,
                },
                other => writeln!(out, "unknown command {other}; \\? for help")?,
            }
            continue;
        }
        if !buffer.is_empty() {
            buffer.push('\n');
        }
        buffer.push_str(&line);
        if !trimmed.ends_with(';') {
            continue;
        }
        let sql = std::mem::take(&mut buffer);
        let _ = editor.add_history_entry(sql.trim());
        let started = std::time::Instant::now();
        // Rendered whole before it is shown: a query that fails half-way prints only its error.
        let mut rendered = Vec::new();
        match super::run_to(session, &sql, &params, format, &mut rendered).await {
            Ok(rows) => {
                out.write_all(&rendered)?;
                writeln!(out, "{rows} row{} in {:.3}s", if rows == 1 { "" } else { "s" }, started.elapsed().as_secs_f64())?;
            }
            Err(e) => writeln!(out, "error: {}", crate::error_chain::Chain(&e))?,
        }
    }
    if let Some(h) = &history {
        if let Some(dir) = h.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Err(e) = editor.save_history(h) {
            tracing::warn!("could not save the query history to {}: {e}", h.display());
        }
    }
    Ok(())
}
