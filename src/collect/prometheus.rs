//! The Prometheus HTTP API client: auth, extra headers, a path prefix, a CA file, timeouts,
//! retries with exponential backoff and jitter (backon) that honour `Retry-After`, and raw
//! range-vector queries.
//!
//! Why raw range vectors (`/api/v1/query` with `metric[6h]`) and not `query_range`:
//! `query_range` evaluates the selector at every step with Prometheus' 5-minute lookback, so
//! after a pod switch the old pod's series (which stops getting samples, and in backfilled
//! TSDBs has no staleness marker) is still "present" for up to 5 minutes next to the new
//! one: both pods would be charged for the same GPU. A raw range vector returns only the
//! samples that were scraped, with their own timestamps, so each scrape maps to exactly one
//! holder; `tests/it/collect_prometheus.rs` shows the double count `query_range` gives on the
//! same data. Raw queries are not bound by the 11,000-points-per-series limit of
//! `query_range`, only by `query.max-samples`, which the chunk length keeps far below.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBuilder};
use serde_json::Value;

use crate::config::PrometheusConfig;
use crate::redact::url_userinfo;

#[derive(Debug, thiserror::Error)]
pub enum PromError {
    #[error("prometheus setup: {0}")]
    Setup(String),
    #[error("prometheus setup: {key}: reading {path}")]
    ReadFile { key: &'static str, path: String, source: std::io::Error },
    #[error("prometheus setup: {what}")]
    Http { what: String, source: reqwest::Error },
    #[error("query {query} for {window}: {message}")]
    Query { query: String, window: String, message: String },
}

pub type Result<T, E = PromError> = std::result::Result<T, E>;

/// One series: its labels and its raw samples (milliseconds, value).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    pub labels: BTreeMap<String, String>,
    pub samples: Vec<(i64, f64)>,
}

/// Where a run's time went: waiting on the server (request to last body byte) and decoding
/// JSON, summed over queries (several are in flight at once).
#[derive(Debug, Default)]
pub struct ClientStats {
    pub http_ns: std::sync::atomic::AtomicU64,
    pub decode_ns: std::sync::atomic::AtomicU64,
}

impl ClientStats {
    pub fn http_secs(&self) -> f64 {
        self.http_ns.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e9
    }

    pub fn decode_secs(&self) -> f64 {
        self.decode_ns.load(std::sync::atomic::Ordering::Relaxed) as f64 / 1e9
    }

    fn add(counter: &std::sync::atomic::AtomicU64, since: std::time::Instant) {
        counter.fetch_add(since.elapsed().as_nanos() as u64, std::sync::atomic::Ordering::Relaxed);
    }
}

#[derive(Clone)]
pub struct PromClient {
    pub stats: std::sync::Arc<ClientStats>,
    http: reqwest::Client,
    base: String,
    display_base: String,
    auth: Option<String>,
    headers: Vec<(String, String)>,
    retries: u32,
    backoff_ms: u64,
    /// Masks the configured secrets in every message built from a response or a URL.
    redactor: crate::redact::Redactor,
}

impl std::fmt::Debug for PromClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print credentials.
        f.debug_struct("PromClient").field("base", &self.display_base).field("auth", &self.auth.as_ref().map(|_| "<redacted>")).finish()
    }
}

fn read_secret(path: &PathBuf, key: &'static str) -> Result<String> {
    std::fs::read_to_string(path).map(|s| s.trim().to_string()).map_err(|source| PromError::ReadFile { key, path: path.display().to_string(), source })
}

fn http_error(what: impl Into<String>) -> impl FnOnce(reqwest::Error) -> PromError {
    let what = what.into();
    move |source| PromError::Http { what, source }
}

impl PromClient {
    pub fn new(cfg: &PrometheusConfig) -> Result<PromClient> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut builder = reqwest::Client::builder()
            .timeout(Duration::from_secs(cfg.timeout_secs))
            .connect_timeout(Duration::from_secs(cfg.timeout_secs.min(10)))
            .user_agent(concat!("gpuledger/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = &cfg.ca_file {
            let pem = std::fs::read(ca).map_err(|source| PromError::ReadFile { key: "prometheus.ca_file", path: ca.display().to_string(), source })?;
            let cert = reqwest::Certificate::from_pem(&pem).map_err(http_error(format!("prometheus.ca_file {}", ca.display())))?;
            builder = builder.add_root_certificate(cert);
        }
        let http = builder.build().map_err(http_error("HTTP client"))?;
        let mut secrets: Vec<String> = cfg.headers.values().cloned().collect();
        // Credentials in the URL become the basic-auth header, never part of a request line.
        let in_url = crate::redact::userinfo(&cfg.url);
        if let Some((_, Some(p))) = &in_url {
            secrets.push(p.clone());
        }
        let auth = if let Some(path) = &cfg.bearer_token_file {
            Some(format!("Bearer {}", read_secret(path, "prometheus.bearer_token_file")?))
        } else if let Some(var) = &cfg.bearer_token_env {
            let token = std::env::var(var).map_err(|_| PromError::Setup(format!("prometheus.bearer_token_env: ${var} is not set")))?;
            Some(format!("Bearer {}", token.trim()))
        } else if let Some(user) = &cfg.basic_auth_user {
            let password = match &cfg.basic_auth_password_file {
                Some(p) => read_secret(p, "prometheus.basic_auth_password_file")?,
                None => String::new(),
            };
            secrets.push(password.clone());
            Some(basic_auth_header(&http, user, &password)?)
        } else if let Some((user, password)) = &in_url {
            Some(basic_auth_header(&http, user, password.as_deref().unwrap_or(""))?)
        } else {
            None
        };
        if let Some(a) = &auth {
            // The header as sent, and its credential alone (a server may echo either).
            secrets.push(a.clone());
            secrets.extend(a.split_once(' ').map(|(_, v)| v.to_string()));
        }
        let base = url_userinfo(cfg.url.trim_end_matches('/'));
        Ok(PromClient {
            stats: std::sync::Arc::default(),
            http,
            display_base: url_userinfo(&base),
            base,
            auth,
            headers: cfg.headers.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            retries: cfg.retries,
            backoff_ms: cfg.backoff_ms,
            redactor: crate::redact::Redactor::new(secrets),
        })
    }

    pub fn display_base(&self) -> &str {
        &self.display_base
    }

    /// Raw samples of `selector` with timestamps in `[start_ms, end_ms)`.
    pub async fn range_vector(&self, selector: &str, start_ms: i64, end_ms: i64) -> Result<Vec<Series>> {
        let range_ms = end_ms - start_ms;
        let query = format!("{selector}[{range_ms}ms]");
        // Evaluated 1 ms before the end: the range covers [start, end) whether the server's
        // range selector is closed (Prometheus 2) or left-open (Prometheus 3) at its start.
        let time = format!("{}.{:03}", (end_ms - 1).div_euclid(1000), (end_ms - 1).rem_euclid(1000));
        let window = format!("{} to {}", fmt_ms(start_ms), fmt_ms(end_ms));
        let data: Option<Matrix> = self.get_json("/api/v1/query", &[("query", query.as_str()), ("time", time.as_str())], &query, &window).await?;
        let mut series = series_of(data).map_err(|message| PromError::Query { query: query.clone(), window: window.clone(), message })?;
        for s in series.iter_mut() {
            s.samples.retain(|(t, _)| *t >= start_ms && *t < end_ms);
        }
        series.retain(|s| !s.samples.is_empty());
        Ok(series)
    }

    /// GETs an API path such as `/api/v1/status/buildinfo`; returns the response's `data`.
    pub async fn api(&self, path: &str, params: &[(&str, &str)]) -> Result<Value> {
        Ok(self.get_json::<Value>(path, params, path, "now").await?.unwrap_or(Value::Null))
    }

    /// How far back the server keeps samples, from `/api/v1/status/runtimeinfo`'s
    /// `storageRetention` ("15d", "15d or 512MiB"; Prometheus and servers that mimic it).
    /// `None` where the server does not say (Thanos Query, Mimir, a size-only retention) or the
    /// endpoint fails: asked once, without retries, so a server that is down fails in the
    /// window's queries with their own message.
    pub async fn retention(&self) -> Option<(Duration, String)> {
        #[derive(serde::Deserialize)]
        struct RuntimeInfo {
            #[serde(rename = "storageRetention")]
            storage_retention: Option<String>,
        }
        let info = match self.get_json_tries::<RuntimeInfo>("/api/v1/status/runtimeinfo", &[], "runtimeinfo", "now", 0).await {
            Ok(info) => info,
            Err(e) => {
                tracing::debug!("retention unknown: {}", crate::error_chain::Chain(&e));
                return None;
            }
        };
        let text = info?.storage_retention?;
        let text = text.as_str();
        let found = text.split(" or ").find_map(|part| parse_duration(part.trim()));
        tracing::debug!("storageRetention {text:?}: {found:?}");
        found.map(|d| (d, text.to_string()))
    }

    /// `query_range` (kept for the evidence test: it double-counts after pod switches).
    pub async fn query_range(&self, query: &str, start_ms: i64, end_ms: i64, step_s: u32) -> Result<Vec<Series>> {
        let window = format!("{} to {}", fmt_ms(start_ms), fmt_ms(end_ms));
        let (start, end, step) = (format!("{}", start_ms / 1000), format!("{}", end_ms / 1000), format!("{step_s}"));
        let data: Option<Matrix> =
            self.get_json("/api/v1/query_range", &[("query", query), ("start", &start), ("end", &end), ("step", &step)], query, &window).await?;
        series_of(data).map_err(|message| PromError::Query { query: query.into(), window, message })
    }

    /// The `data` of a successful reply to `path`, decoded as `T`.
    async fn get_json<T: serde::de::DeserializeOwned>(&self, path: &str, params: &[(&str, &str)], query: &str, window: &str) -> Result<Option<T>> {
        self.get_json_tries(path, params, query, window, self.retries).await
    }

    async fn get_json_tries<T: serde::de::DeserializeOwned>(
        &self,
        path: &str,
        params: &[(&str, &str)],
        query: &str,
        window: &str,
        retries: u32,
    ) -> Result<Option<T>> {
        let url = format!("{}{}", self.base, path);
        let fail = |message: String| PromError::Query { query: query.to_string(), window: window.to_string(), message: self.redactor.apply(&message) };
        // Exponential backoff from prometheus.backoff_ms, doubling to at most a minute, each
        // delay plus a random part of itself (backon's jitter); a server's Retry-After wins
        // where it asks for longer (up to RETRY_AFTER_MAX).
        let mut delays = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(self.backoff_ms))
            .with_max_delay(Duration::from_secs(60))
            .with_max_times(retries as usize)
            .with_jitter()
            .build();
        let mut attempt = 0u32;
        loop {
            let mut req = self.http.get(&url).query(params);
            if let Some(a) = &self.auth {
                req = req.header(reqwest::header::AUTHORIZATION, a);
            }
            for (k, v) in &self.headers {
                req = req.header(k.as_str(), v.as_str());
            }
            let t0 = std::time::Instant::now();
            let mut retry_after = None;
            let outcome: std::result::Result<Option<T>, (bool, String)> = match req.send().await {
                Err(e) => Err((true, format!("{} unreachable: {}", self.display_base, without_url(&e)))),
                Ok(resp) => {
                    let status = resp.status();
                    retry_after = resp.headers().get(reqwest::header::RETRY_AFTER).and_then(|v| v.to_str().ok()).and_then(parse_retry_after);
                    let body = resp.bytes().await;
                    ClientStats::add(&self.stats.http_ns, t0);
                    match body {
                        Err(e) => Err((true, format!("HTTP {status}: reading the body: {}", without_url(&e)))),
                        Ok(bytes) => {
                            let t1 = std::time::Instant::now();
                            let decoded = serde_json::from_slice::<Reply<T>>(&bytes);
                            ClientStats::add(&self.stats.decode_ns, t1);
                            let retryable = status.as_u16() == 429 || status.is_server_error();
                            match decoded {
                                Ok(r) if status.is_success() && r.status == "success" => Ok(r.data),
                                Ok(r) => Err((retryable, format!("HTTP {status}: {}", r.error.as_deref().unwrap_or("no error message")))),
                                // Cut off or not JSON: a proxy's hiccup, worth another try.
                                Err(e) if status.is_success() && (e.is_syntax() || e.is_eof()) => {
                                    Err((true, format!("malformed JSON in the response ({} bytes): {e}", bytes.len())))
                                }
                                // JSON of another shape: asking again gives the same.
                                Err(e) if status.is_success() => Err((false, format!("unexpected response ({} bytes): {e}", bytes.len()))),
                                Err(_) => Err((retryable, format!("HTTP {status}: {}", String::from_utf8_lossy(&bytes[..bytes.len().min(200)]).trim()))),
                            }
                        }
                    }
                }
            };
            let (retry, message) = match outcome {
                Ok(v) => return Ok(v),
                Err(e) => e,
            };
            match delays.next().filter(|_| retry) {
                Some(backoff) => {
                    let message = self.redactor.apply(&message);
                    attempt += 1;
                    let (delay, asked) = match retry_after {
                        Some(after) if after > backoff => (after.min(RETRY_AFTER_MAX), " (the server's Retry-After)"),
                        _ => (backoff, ""),
                    };
                    tracing::warn!("{query} ({window}): {message}; retry {attempt}/{retries} in {} ms{asked}", delay.as_millis());
                    tokio::time::sleep(delay).await;
                }
                None => {
                    let tries = if attempt > 0 { format!(" (after {} attempts)", attempt + 1) } else { String::new() };
                    return Err(fail(format!("{message}{tries}")));
                }
            }
        }
    }
}

/// The longest a server's `Retry-After` makes a query wait before its next try.
const RETRY_AFTER_MAX: Duration = Duration::from_secs(120);

/// A `Retry-After` header's delay: whole seconds (the form proxies and rate limiters send); an
/// HTTP date is left to the backoff.
fn parse_retry_after(value: &str) -> Option<Duration> {
    value.trim().parse::<u64>().ok().map(Duration::from_secs)
}

/// reqwest errors print the URL with its query string; keep messages short.
fn without_url(e: &reqwest::Error) -> String {
    let mut msg = e.to_string();
    if let Some(url) = e.url() {
        msg = msg.replace(url.as_str(), "").replace(" for url ()", "").replace(" ()", "");
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg = format!("{msg}: {s}");
        source = s.source();
    }
    msg
}

pub fn fmt_ms(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)).unwrap_or_else(|| ms.to_string())
}

/// A Prometheus duration: `15d`, `1d12h`, `90m`, `100y` (a year is 365 days, a week 7), `500ms`.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let mut total_ms: u64 = 0;
    let mut rest = text;
    if rest.is_empty() {
        return None;
    }
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let unit_ms: u64 = match &rest[..unit_len] {
            "ms" => 1,
            "s" => 1_000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            "w" => 7 * 86_400_000,
            "y" => 365 * 86_400_000,
            _ => return None,
        };
        total_ms = total_ms.checked_add(n.checked_mul(unit_ms)?)?;
        rest = &rest[unit_len..];
    }
    (total_ms > 0).then(|| Duration::from_millis(total_ms))
}

/// Parses a Prometheus sample value: numbers, `NaN`, `+Inf`, `-Inf`.
pub fn parse_value(v: &str) -> Option<f64> {
    match v {
        "NaN" => Some(f64::NAN),
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        other => other.parse().ok(),
    }
}

/// A Prometheus API reply: `{"status": "success", "data": ...}` or `{"status": "error",
/// "error": "..."}`.
#[derive(serde::Deserialize)]
struct Reply<T> {
    status: String,
    #[serde(default)]
    error: Option<String>,
    #[serde(default = "none")]
    data: Option<T>,
}

fn none<T>() -> Option<T> {
    None
}

/// A query's `data`: `{"resultType": "matrix", "result": [{"metric": {...}, "values": [[t, "v"],
/// ...]}]}`. Another result type decodes with no `values` and is refused by [`series_of`].
#[derive(serde::Deserialize)]
pub struct Matrix {
    #[serde(rename = "resultType")]
    result_type: String,
    result: Vec<MatrixSeries>,
}

#[derive(serde::Deserialize)]
struct MatrixSeries {
    metric: BTreeMap<String, String>,
    #[serde(default)]
    values: Vec<(f64, String)>,
}

/// The series of a matrix reply, timestamps in milliseconds, values parsed (`NaN`, `+Inf`, ...).
pub fn series_of(data: Option<Matrix>) -> std::result::Result<Vec<Series>, String> {
    let data = data.ok_or("no `data` in the response")?;
    if data.result_type != "matrix" {
        return Err(format!("expected a matrix, got {}", data.result_type));
    }
    let mut out = Vec::with_capacity(data.result.len());
    for (i, item) in data.result.into_iter().enumerate() {
        let mut samples = Vec::with_capacity(item.values.len());
        for (t, v) in &item.values {
            let v = parse_value(v).ok_or(format!("result[{i}]: bad value {v:?}"))?;
            samples.push(((t * 1000.0).round() as i64, v));
        }
        out.push(Series { labels: item.metric, samples });
    }
    Ok(out)
}

/// The `Authorization` value reqwest's `basic_auth` sends for `user` and `password` (kept, so
/// that the redactor knows it as a secret).
fn basic_auth_header(http: &reqwest::Client, user: &str, password: &str) -> Result<String> {
    let request = http.get("http://localhost/").basic_auth(user, Some(password)).build().map_err(http_error("basic auth"))?;
    let value = request.headers().get(reqwest::header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    value.map(str::to_string).ok_or_else(|| PromError::Setup("basic auth: no header".into()))
}

/// The median gap between consecutive samples: the series' own scrape interval.
pub fn median_gap(samples: &[(i64, f64)]) -> Option<i64> {
    let mut gaps: Vec<i64> = samples.windows(2).map(|w| w[1].0 - w[0].0).filter(|g| *g > 0).collect();
    if gaps.is_empty() {
        return None;
    }
    let mid = gaps.len() / 2;
    Some(*gaps.select_nth_unstable(mid).1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matrix_parsing_handles_floats_nan_and_inf() {
        let reply: Reply<Matrix> = serde_json::from_str(
            r#"{"status":"success","data":{"resultType":"matrix","result":[{"metric":{"__name__":"x","a":"b"},"values":[[1790812800.5,"1.5e+09"],[1790812830,"NaN"],[1790812860,"+Inf"]]}]}}"#,
        )
        .unwrap();
        let s = series_of(reply.data).unwrap();
        assert_eq!(s[0].labels["a"], "b");
        assert_eq!(s[0].samples[0], (1_790_812_800_500, 1.5e9));
        assert!(s[0].samples[1].1.is_nan());
        assert!(s[0].samples[2].1.is_infinite());
        let vector: Reply<Matrix> =
            serde_json::from_str(r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"1"]}]}}"#).unwrap();
        assert_eq!(series_of(vector.data).err().as_deref(), Some("expected a matrix, got vector"));
        let error: Reply<Matrix> = serde_json::from_str(r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#).unwrap();
        assert!(error.data.is_none() && error.error.as_deref() == Some("parse error"));
    }

    #[test]
    fn prometheus_durations() {
        assert_eq!(parse_duration("15d"), Some(Duration::from_secs(15 * 86_400)));
        assert_eq!(parse_duration("1d12h"), Some(Duration::from_secs(36 * 3_600)));
        assert_eq!(parse_duration("100y"), Some(Duration::from_secs(100 * 365 * 86_400)));
        assert_eq!(parse_duration("1w"), Some(Duration::from_secs(7 * 86_400)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        for bad in ["", "0s", "15", "d", "512MiB", "1.5d", "15 d"] {
            assert_eq!(parse_duration(bad), None, "{bad}");
        }
    }

    #[test]
    fn credentials_never_reach_messages() {
        assert_eq!(url_userinfo("https://bob:hunter2@mimir.example/prometheus"), "https://mimir.example/prometheus");
        let cfg = PrometheusConfig { bearer_token_env: Some("GPULEDGER_TEST_TOKEN_XYZ".into()), ..PrometheusConfig::default() };
        std::env::set_var("GPULEDGER_TEST_TOKEN_XYZ", "s3cret-token");
        let c = PromClient::new(&cfg).unwrap();
        assert!(!format!("{c:?}").contains("s3cret"));
    }

    #[test]
    fn basic_auth_from_the_config_and_from_the_url() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::new();
        // RFC 7617's example, and "user:pass".
        assert_eq!(basic_auth_header(&http, "Aladdin", "open sesame").unwrap(), "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==");
        let c = PromClient::new(&PrometheusConfig { url: "http://user:pass@prom.example:9090".into(), ..PrometheusConfig::default() }).unwrap();
        assert_eq!(c.auth.as_deref(), Some("Basic dXNlcjpwYXNz"));
        assert_eq!(c.display_base(), "http://prom.example:9090");
    }
}
