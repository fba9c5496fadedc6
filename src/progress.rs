//! Progress for long work: a bar when stderr is a terminal (and `TERM` is not `dumb`), plain
//! log lines otherwise (cron, CI, pipes).

use std::io::IsTerminal;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ProgressMode {
    #[default]
    Auto,
    Always,
    Never,
}

pub struct Progress {
    bar: Option<ProgressBar>,
    label: String,
    total: u64,
    done: AtomicU64,
    started: Instant,
}

impl Progress {
    pub fn new(mode: ProgressMode, label: &str, total: u64) -> Progress {
        let terminal = std::io::stderr().is_terminal() && std::env::var("TERM").map_or(true, |t| t != "dumb");
        let show_bar = match mode {
            ProgressMode::Always => true,
            ProgressMode::Never => false,
            ProgressMode::Auto => terminal,
        };
        let bar = show_bar.then(|| {
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{msg:>12} [{bar:40}] {pos}/{len} {elapsed_precise} eta {eta}").expect("valid template").progress_chars("=> "),
            );
            bar.set_message(label.to_string());
            bar
        });
        Progress { bar, label: label.to_string(), total, done: AtomicU64::new(0), started: Instant::now() }
    }

    /// Marks one more unit of work done; `what` names it in log lines.
    pub fn inc(&self, what: &str) {
        let done = self.done.fetch_add(1, Ordering::Relaxed) + 1;
        match &self.bar {
            Some(bar) => bar.inc(1),
            None => tracing::info!("{}: {done}/{} {what} ({:.1}s)", self.label, self.total, self.started.elapsed().as_secs_f64()),
        }
    }

    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
