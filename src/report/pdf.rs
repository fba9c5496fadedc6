//! The month's page printed to `report.pdf` by a headless Chromium, where one is installed:
//! the page's print stylesheet makes it A4 landscape. The PDF's creation and modification
//! dates are set to a fixed instant (the same length of text, so the file's cross-reference
//! offsets stay right), so a re-run month's PDF is the same bytes, as every other file is.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(Debug, thiserror::Error)]
pub enum PdfError {
    #[error("{browser} --print-to-pdf {page}")]
    Start { browser: String, page: PathBuf, source: std::io::Error },
    #[error("{browser} --print-to-pdf {page} took more than {secs} s and was stopped")]
    Timeout { browser: String, page: PathBuf, secs: u64 },
    #[error("{browser} --print-to-pdf {page} wrote no PDF (exit {status}): {stderr}")]
    NoPdf { browser: String, page: PathBuf, status: String, stderr: String },
    #[error("writing {path}")]
    Write { path: PathBuf, source: std::io::Error },
}

/// The browsers tried, in order, on the PATH.
const BROWSERS: [&str; 4] = ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"];
/// The longest a print may take.
const TIMEOUT: Duration = Duration::from_secs(120);

/// The first Chromium on the PATH, if any.
pub fn find_browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    BROWSERS.iter().find_map(|name| std::env::split_paths(&path).map(|dir| dir.join(name)).find(|p| p.is_file()))
}

/// Prints `page` (a local HTML file) to `out` with `browser`; the PDF's dates become
/// `fixed_date` (PDF date text, `D:YYYYMMDDHHmmSS`).
pub fn print(browser: &Path, page: &Path, out: &Path, fixed_date: &str) -> Result<(), PdfError> {
    let name = browser.display().to_string();
    let profile = Scratch::new().map_err(|source| PdfError::Start { browser: name.clone(), page: page.into(), source })?;
    let tmp_pdf = profile.path().join("report.pdf");
    let page_abs = std::fs::canonicalize(page).unwrap_or_else(|_| page.to_path_buf());
    // The page has no script and asks for nothing from the network; the flags keep Chromium
    // from calling home (a closed network makes it retry) and let it run as root in a
    // container.
    let mut child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--no-first-run",
            "--no-pdf-header-footer",
        ])
        .arg(format!("--user-data-dir={}", profile.path().join("profile").display()))
        .arg(format!("--print-to-pdf={}", tmp_pdf.display()))
        .arg(format!("file://{}", page_abs.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|source| PdfError::Start { browser: name.clone(), page: page.into(), source })?;
    // Drain stderr as it comes, so a chatty browser never blocks on a full pipe.
    let mut err_pipe = child.stderr.take().expect("piped");
    let stderr_reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut err_pipe, &mut buf);
        buf
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < TIMEOUT => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(PdfError::Timeout { browser: name, page: page.into(), secs: TIMEOUT.as_secs() });
            }
        }
    };
    let stderr = String::from_utf8_lossy(&stderr_reader.join().unwrap_or_default()).into_owned();
    let bytes = match std::fs::read(&tmp_pdf) {
        Ok(b) if b.starts_with(b"%PDF-") => b,
        _ => {
            let last: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
            let tail = last[last.len().saturating_sub(3)..].join(" | ");
            return Err(PdfError::NoPdf { browser: name, page: page.into(), status: status.to_string(), stderr: tail });
        }
    };
    let fixed = fix_node_ids(fix_dates(bytes, fixed_date));
    crate::atomic::write_atomic(out, &fixed).map_err(|source| PdfError::Write { path: out.into(), source })
}

/// A folder of our own under the system's temp folder, removed when dropped: Chromium's
/// profile and its PDF before it is published.
struct Scratch(PathBuf);

impl Scratch {
    fn new() -> std::io::Result<Scratch> {
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!("gpuledger-pdf-{}-{nanos}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Replaces the text of every `/CreationDate (D:...)` and `/ModDate (D:...)` with
/// `fixed_date`, cut or padded to the old text's length so no byte offset moves.
pub fn fix_dates(mut pdf: Vec<u8>, fixed_date: &str) -> Vec<u8> {
    for key in [&b"/CreationDate ("[..], &b"/ModDate ("[..]] {
        let mut from = 0;
        while let Some(at) = find(&pdf[from..], key).map(|i| i + from + key.len()) {
            let Some(len) = pdf[at..].iter().position(|b| *b == b')') else { break };
            let old = &pdf[at..at + len];
            // Keep the old text's time-zone tail ("+00'00'") where the fixed date has none.
            let mut new: Vec<u8> = fixed_date.bytes().take(len).collect();
            if new.len() < len {
                new.extend_from_slice(&old[new.len()..]);
            }
            pdf[at..at + len].copy_from_slice(&new);
            from = at + len;
        }
    }
    pdf
}

/// Renumbers the tagged PDF's structure element IDs (`(node00000054)`: Chromium's
/// accessibility node ids, which an extra node made on a busy machine shifts by one from run to
/// run) in order of first appearance, each the same 8 digits, so no byte offset moves
/// and every reference (the elements' `/ID`, the `/IDTree`) keeps naming the same element.
pub fn fix_node_ids(mut pdf: Vec<u8>) -> Vec<u8> {
    const KEY: &[u8] = b"(node";
    let mut renumbered: std::collections::HashMap<Vec<u8>, Vec<u8>> = std::collections::HashMap::new();
    let mut from = 0;
    while let Some(at) = find(&pdf[from..], KEY).map(|i| i + from + KEY.len()) {
        let digits = pdf[at..].iter().take_while(|b| b.is_ascii_digit()).count();
        from = at + digits;
        if digits != 8 || pdf.get(at + digits) != Some(&b')') {
            continue;
        }
        let next = renumbered.len() + 1;
        let new = renumbered.entry(pdf[at..at + digits].to_vec()).or_insert_with(|| format!("{next:0digits$}").into_bytes());
        if new.len() == digits {
            pdf[at..at + digits].copy_from_slice(new);
        }
        // (More than 10^8 elements would keep their own numbers: never on a month's page.)
    }
    pdf
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    #[test]
    fn dates_are_fixed_in_place() {
        let pdf = b"%PDF-1.4\n<</Producer (Skia/PDF m156)\n/CreationDate (D:20261203110206+00'00')\n/ModDate (D:20261203110208+00'00')>>\nxref".to_vec();
        let out = super::fix_dates(pdf.clone(), "D:20261201000000");
        assert_eq!(out.len(), pdf.len());
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("/CreationDate (D:20261201000000+00'00')") && text.contains("/ModDate (D:20261201000000+00'00')"), "{text}");
    }

    /// Two prints of one page whose accessibility node ids are shifted by one are the same
    /// bytes once renumbered; each id keeps naming one element (the /IDTree's names too).
    #[test]
    fn structure_ids_are_renumbered_in_order() {
        let print = |k: u32| {
            format!(
                "<</S /TH /ID (node{:08})>> <</S /TD /ID (node{:08})>> /IDTree <</Names [(node{:08}) 5 0 R (node{:08}) 6 0 R]>> (node12)",
                54 + k,
                61 + k,
                54 + k,
                61 + k
            )
            .into_bytes()
        };
        let (a, b) = (super::fix_node_ids(print(0)), super::fix_node_ids(print(1)));
        assert_eq!(a, b);
        assert_eq!(
            String::from_utf8(a).unwrap(),
            "<</S /TH /ID (node00000001)>> <</S /TD /ID (node00000002)>> /IDTree <</Names [(node00000001) 5 0 R (node00000002) 6 0 R]>> (node12)"
        );
    }
}
