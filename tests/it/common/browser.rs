//! Headless Chromium for the page tests: where it is, a page laid out at a given width and
//! measured there (the page's height, every element wider than the window, each chart's box),
//! and full-page screenshots.
//!
//! Headless Chromium will not make its window narrower than 500 px, so a page is measured in
//! an iframe of the width asked for (the page's own media queries see that width), from a
//! wrapper page beside a copy of it: `--allow-file-access-from-files` lets the wrapper read the
//! copy's layout. Screenshots take the window size as given.

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

/// The first Chromium installed, or None (a skip, with a message) where none is and
/// `GPULEDGER_REQUIRE_CHROMIUM` is not set.
pub fn chromium() -> Option<&'static str> {
    for c in ["chromium", "chromium-browser", "google-chrome"] {
        if Command::new(c).arg("--version").output().is_ok_and(|o| o.status.success()) {
            return Some(c);
        }
    }
    assert!(std::env::var_os("GPULEDGER_REQUIRE_CHROMIUM").is_none(), "chromium is required here (GPULEDGER_REQUIRE_CHROMIUM is set)");
    eprintln!("SKIPPED: chromium is not installed (apt-get install chromium)");
    None
}

/// Flags for a headless run on a machine with no network: no calls home, no sandbox (root in
/// a container), one pixel per CSS pixel.
const FLAGS: [&str; 9] = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--hide-scrollbars",
    "--force-device-scale-factor=1",
];

/// Measures the page's layout in a frame `width` px wide, after it loaded. Fills in
/// `data-measure` on the wrapper's body, which `--dump-dom` prints.
const MEASURE: &str = r#"<!DOCTYPE html><html><body style="margin:0"><iframe id="f" src="page.html" style="width:WIDTHpx;height:900px;border:0"></iframe>
<script>
const f = document.getElementById('f');
f.addEventListener('load', () => {
  const d = f.contentDocument;
  const vw = d.documentElement.clientWidth;
  const wider = [];
  for (const e of d.querySelectorAll('body *')) {
    const r = e.getBoundingClientRect();
    if (r.width > 0 && (r.right > vw + 0.5 || r.left < -0.5)) {
      wider.push(e.tagName + (e.id ? '#' + e.id : '') + (e.getAttribute('class') ? '.' + e.getAttribute('class') : '') + ' ' + Math.round(r.left) + '..' + Math.round(r.right) + ': ' + (e.textContent || '').slice(0, 40));
    }
  }
  const charts = {};
  for (const c of d.querySelectorAll('.chart')) {
    const r = c.getBoundingClientRect();
    charts[c.id] = [r.width, r.height];
  }
  document.body.setAttribute('data-measure', JSON.stringify({
    viewport: vw, height: d.documentElement.scrollHeight, width: d.documentElement.scrollWidth, wider: wider, charts: charts
  }));
});
</script></body></html>"#;

/// The page's layout at `width`: `viewport`, `height`, `width` (the scroll width), `wider`
/// (the elements that stick out of the window), `charts` (each `.chart`'s [width, height]).
pub fn measure(browser: &str, page: &Path, width: u32) -> Value {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(page, dir.path().join("page.html")).unwrap();
    std::fs::write(dir.path().join("wrap.html"), MEASURE.replace("WIDTH", &width.to_string())).unwrap();
    let out = Command::new(browser)
        .args(FLAGS)
        .arg("--allow-file-access-from-files")
        .arg(format!("--user-data-dir={}", dir.path().join("profile").display()))
        .arg("--window-size=1400,1000")
        .arg("--dump-dom")
        .arg(format!("file://{}", dir.path().join("wrap.html").display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let Some(start) = dom.find("data-measure=\"") else {
        panic!("the page was not measured at {width} px: {}\n{}", dom.chars().take(2000).collect::<String>(), String::from_utf8_lossy(&out.stderr))
    };
    let rest = &dom[start + "data-measure=\"".len()..];
    let json = rest[..rest.find('"').unwrap()].replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{e}: {json}"))
}

/// A screenshot of the page in a window of `width` x `height`, saved at `out`; decoded.
pub fn screenshot(browser: &str, page: &Path, width: u64, height: u64, out: &Path) -> (usize, usize, usize, Vec<u8>) {
    let _ = std::fs::remove_file(out);
    let profile = tempfile::tempdir().unwrap();
    let run = Command::new(browser)
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("--window-size={width},{height}"))
        .arg(format!("--screenshot={}", out.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(out.is_file(), "chromium wrote no screenshot: {}", String::from_utf8_lossy(&run.stderr));
    super::decode_png(&std::fs::read(out).unwrap())
}

/// How many pixels have exactly the colour `#rrggbb`.
pub fn pixels_of(pixels: &[u8], channels: usize, colour: &str) -> usize {
    let rgb: Vec<u8> = (0..3).map(|i| u8::from_str_radix(&colour[1 + 2 * i..3 + 2 * i], 16).unwrap()).collect();
    pixels.chunks(channels).filter(|p| p[..3] == rgb[..]).count()
}

/// Where a test keeps what a person should look at (screenshots, the PDF).
pub fn keep(name: &str) -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join(name)
}

/// The checks every month page passes at `width`: nothing wider than the window, every chart
/// laid out and drawn in its signature colour in a full-page screenshot (kept as `shot`).
/// Returns the screenshot's (width, height).
pub fn check_page(browser: &str, page: &Path, width: u32, shot: &str) -> (usize, usize) {
    let m = measure(browser, page, width);
    assert_eq!(m["viewport"].as_u64(), Some(width as u64), "{m}");
    assert_eq!(m["width"].as_u64(), Some(width as u64), "the page scrolls sideways at {width} px: {m}");
    assert_eq!(m["wider"].as_array().map(Vec::len), Some(0), "elements wider than the {width} px window: {m}");
    let height = m["height"].as_u64().unwrap();
    for (chart, _) in gpuledger::report::html::CHART_COLOURS {
        let size = &m["charts"][chart];
        assert!(size[0].as_f64().unwrap_or(0.0) > 100.0 && size[1].as_f64().unwrap_or(0.0) > 50.0, "{chart} chart laid out at {width} px: {size}");
        assert!(size[0].as_f64().unwrap() <= width as f64, "{chart} fits at {width} px: {size}");
    }
    let path = keep(shot);
    let (w, h, channels, pixels) = screenshot(browser, page, width as u64, height, &path);
    eprintln!("screenshot of the page at {width} px: {} ({w} x {h})", path.display());
    assert_eq!((w, h), (width as usize, height as usize));
    for (chart, colour) in gpuledger::report::html::CHART_COLOURS {
        let count = pixels_of(&pixels, channels, colour);
        eprintln!("{width} px, {chart}: {count} pixels of {colour}");
        // More than a legend swatch (12 x 12 with its border): the chart itself was drawn (the
        // narrow heatmap's hottest cell alone is 12 x 21).
        assert!(count > 200, "{chart} chart not drawn at {width} px ({count} pixels of {colour})");
    }
    (w, h)
}
