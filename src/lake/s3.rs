//! The lake on S3-compatible object storage (`lake.path = "s3://bucket/prefix"`), through the
//! `object_store` crate that DataFusion reads with.
//!
//! The same layout and guarantees as a local lake: each file is published with one PUT, which
//! S3 makes visible whole or not at all (so a reader never sees half a file and a killed writer
//! leaves nothing behind); rewriting a day PUTs the same key again; listings are sorted here.
//! The lake lock is an object created with a conditional PUT (`If-None-Match: *`), holding a
//! lease that its holder renews (`If-Match` on its own ETag) and that anyone may take over, again
//! conditionally, once it has run out.
//!
//! The lake's own reads and writes are blocking calls (the passes run on plain threads), so
//! this module runs its requests on a small runtime of its own and waits for them; DataFusion
//! gets a separate client (`datafusion_store`) that runs on the caller's runtime.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
use object_store::path::Path as Key;
use object_store::{ClientOptions, GetOptions, GetRange, ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload, RetryConfig, UpdateVersion};
use url::Url;

use crate::config::S3Config;

#[derive(Debug, thiserror::Error)]
pub enum S3Error {
    #[error("lake.path {url:?}: {detail}")]
    Location { url: String, detail: String },
    #[error("lake.s3.credentials_file {path}: {detail}")]
    Credentials { path: PathBuf, detail: String },
    #[error("lake.s3.credentials_file {path}")]
    CredentialsRead { path: PathBuf, source: std::io::Error },
    #[error("lake on {url}")]
    Client { url: String, source: object_store::Error },
    #[error("lake on {url}: starting its runtime")]
    Runtime { url: String, source: std::io::Error },
    #[error("lake.path {url:?}")]
    Url { url: String, source: url::ParseError },
}

/// A tokio runtime that may be dropped anywhere (also inside another runtime).
#[derive(Debug)]
struct Background(Option<tokio::runtime::Runtime>);

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(rt) = self.0.take() {
            rt.shutdown_background();
        }
    }
}

/// An S3 lake: the bucket's client, the key prefix and the runtime its blocking calls use.
#[derive(Debug)]
pub struct S3Store {
    /// `s3://bucket/prefix`, as the user wrote it (no trailing slash).
    location: String,
    /// `s3://bucket`: the object store's URL as DataFusion registers it.
    bucket_url: Url,
    prefix: Vec<String>,
    builder: AmazonS3Builder,
    client: Arc<dyn ObjectStore>,
    runtime: Background,
    pub lock_ttl: Duration,
}

impl S3Store {
    pub fn open(location: &str, config: &S3Config) -> Result<S3Store, S3Error> {
        let loc_err = |detail: String| S3Error::Location { url: location.to_string(), detail };
        let url = Url::parse(location).map_err(|source| S3Error::Url { url: location.to_string(), source })?;
        if url.scheme() != "s3" {
            return Err(loc_err(format!("the {} scheme is not supported; use s3://bucket/prefix or a local folder", url.scheme())));
        }
        let bucket = url.host_str().filter(|b| !b.is_empty()).ok_or_else(|| loc_err("no bucket (s3://bucket/prefix)".into()))?.to_string();
        let prefix: Vec<String> = url.path().split('/').filter(|p| !p.is_empty()).map(|p| p.to_string()).collect();
        let bucket_url = Url::parse(&format!("s3://{bucket}")).map_err(|source| S3Error::Url { url: location.to_string(), source })?;

        // The environment first (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
        // AWS_REGION, AWS_ENDPOINT, ...), then the config file's keys over it.
        let mut builder = AmazonS3Builder::from_env()
            .with_bucket_name(&bucket)
            .with_conditional_put(S3ConditionalPut::ETagMatch)
            // A few retries with backoff for a store that blips, then a clear error: a cron job
            // should fail within a minute (lake.s3.retries, retry_timeout_secs: 4 and 30 s), not
            // hang for the client's default three minutes. (Client options first: they replace
            // `allow_http`.)
            .with_retry(RetryConfig { max_retries: config.retries, retry_timeout: Duration::from_secs(config.retry_timeout_secs), ..RetryConfig::default() })
            .with_client_options(ClientOptions::new().with_connect_timeout(Duration::from_secs(5)).with_timeout(Duration::from_secs(120)))
            .with_allow_http(config.allow_http)
            .with_virtual_hosted_style_request(!config.path_style);
        if let Some(endpoint) = &config.endpoint {
            builder = builder.with_endpoint(endpoint);
        }
        if let Some(region) = &config.region {
            builder = builder.with_region(region);
        }
        if let Some(file) = &config.credentials_file {
            let creds = read_credentials(file, config.profile.as_deref().unwrap_or("default"))?;
            builder = builder.with_access_key_id(creds.key_id).with_secret_access_key(creds.secret);
            if let Some(token) = creds.token {
                builder = builder.with_token(token);
            }
        }
        let client_err = |source| S3Error::Client { url: location.to_string(), source };
        let client: Arc<dyn ObjectStore> = Arc::new(builder.clone().build().map_err(client_err)?);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("lake-s3")
            .enable_all()
            .build()
            .map_err(|source| S3Error::Runtime { url: location.to_string(), source })?;
        Ok(S3Store {
            location: location.trim_end_matches('/').to_string(),
            bucket_url,
            prefix,
            builder,
            client,
            runtime: Background(Some(runtime)),
            lock_ttl: Duration::from_secs(config.lock_ttl_secs.max(3)),
        })
    }

    pub fn location(&self) -> &str {
        &self.location
    }

    /// The URL and a client for DataFusion's runtime environment.
    pub fn datafusion_store(&self) -> Result<(Url, Arc<dyn ObjectStore>), S3Error> {
        let client = self.builder.clone().build().map_err(|source| S3Error::Client { url: self.location.clone(), source })?;
        Ok((self.bucket_url.clone(), Arc::new(client)))
    }

    /// The object key of `rel` (a path relative to the lake root).
    pub fn key(&self, rel: &Path) -> Key {
        let parts = self.prefix.iter().cloned().chain(rel.components().map(|c| c.as_os_str().to_string_lossy().into_owned()));
        Key::from_iter(parts)
    }

    /// Runs `f(client)` on the store's runtime and waits for it.
    fn call<T, F>(&self, f: impl FnOnce(Arc<dyn ObjectStore>) -> F) -> T
    where
        F: std::future::Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let rt = self.runtime.0.as_ref().expect("runtime lives as long as the store");
        let task = rt.spawn(f(Arc::clone(&self.client)));
        // Unconstrained: called from inside an async task (collect's publishing), a JoinHandle
        // counts against that task's cooperative budget, and once the budget is spent its poll
        // answers Pending with a wake deferred to the caller's runtime, which this blocking wait
        // never hands back to: the wait spun at full CPU forever (seen after ~130 requests).
        futures::executor::block_on(tokio::task::unconstrained(task)).expect("lake S3 request task panicked")
    }

    /// Names of the entries (objects and "folders") directly under `rel`, sorted.
    pub fn list(&self, rel: &Path) -> io::Result<Vec<String>> {
        let key = self.key(rel);
        let listed = self.call(move |c| async move { c.list_with_delimiter(Some(&key)).await }).map_err(to_io)?;
        let mut names: Vec<String> =
            listed.common_prefixes.iter().chain(listed.objects.iter().map(|o| &o.location)).filter_map(|k| k.filename().map(|s| s.to_string())).collect();
        names.sort();
        names.dedup();
        Ok(names)
    }

    pub fn read(&self, rel: &Path) -> io::Result<Bytes> {
        let key = self.key(rel);
        self.call(move |c| async move { c.get(&key).await?.bytes().await }).map_err(to_io)
    }

    /// The last `n` bytes of `rel` (all of it when shorter) and its whole size, in one request.
    pub fn read_tail(&self, rel: &Path, n: u64) -> io::Result<(Bytes, u64)> {
        let key = self.key(rel);
        let opts = GetOptions { range: Some(GetRange::Suffix(n)), ..Default::default() };
        self.call(move |c| async move {
            let r = c.get_opts(&key, opts).await?;
            let size = r.meta.size;
            Ok::<_, object_store::Error>((r.bytes().await?, size))
        })
        .map_err(to_io)
    }

    /// Every object under `rel` (at any depth), as paths relative to `rel`, sorted: one listing
    /// request per thousand objects, where asking for each expected file would be one each.
    pub fn list_files(&self, rel: &Path) -> io::Result<Vec<PathBuf>> {
        Ok(self.list_sizes(rel)?.into_iter().map(|(p, _)| p).collect())
    }

    /// Every object under `rel` with its size, as [`list_files`](Self::list_files) lists them.
    pub fn list_sizes(&self, rel: &Path) -> io::Result<Vec<(PathBuf, u64)>> {
        let key = self.key(rel);
        let base = key.as_ref().to_string();
        let metas: Vec<object_store::ObjectMeta> = self
            .call(move |c| async move {
                use futures::TryStreamExt;
                c.list(Some(&key)).try_collect().await
            })
            .map_err(to_io)?;
        let mut out: Vec<(PathBuf, u64)> =
            metas.iter().filter_map(|m| m.location.as_ref().strip_prefix(&base).map(|r| (PathBuf::from(r.trim_start_matches('/')), m.size))).collect();
        out.sort();
        Ok(out)
    }

    pub fn len(&self, rel: &Path) -> io::Result<u64> {
        let key = self.key(rel);
        self.call(move |c| async move { c.head(&key).await }).map(|m| m.size).map_err(to_io)
    }

    /// Deletes `rel`; Ok(false) when it was not there.
    pub fn remove(&self, rel: &Path) -> io::Result<bool> {
        let key = self.key(rel);
        let existed = match self.call({
            let key = key.clone();
            move |c| async move { c.head(&key).await }
        }) {
            Ok(_) => true,
            Err(object_store::Error::NotFound { .. }) => false,
            Err(e) => return Err(to_io(e)),
        };
        if existed {
            self.call(move |c| async move { c.delete(&key).await }).map_err(to_io)?;
        }
        Ok(existed)
    }

    /// One PUT: the object appears whole, replacing any earlier one, or not at all.
    pub fn put(&self, rel: &Path, bytes: Vec<u8>) -> io::Result<()> {
        let key = self.key(rel);
        self.call(move |c| async move { c.put(&key, PutPayload::from(bytes)).await }).map(|_| ()).map_err(to_io)
    }

    /// Creates `rel` only if no object has that key; the new ETag, or None when one exists.
    pub fn create(&self, rel: &Path, bytes: Vec<u8>) -> io::Result<Option<String>> {
        let key = self.key(rel);
        let opts = PutOptions { mode: PutMode::Create, ..Default::default() };
        match self.call(move |c| async move { c.put_opts(&key, PutPayload::from(bytes), opts).await }) {
            Ok(r) => Ok(Some(r.e_tag.unwrap_or_default())),
            Err(object_store::Error::AlreadyExists { .. }) | Err(object_store::Error::Precondition { .. }) => Ok(None),
            Err(e) => Err(to_io(e)),
        }
    }

    /// Replaces `rel` only if its ETag is still `e_tag`; the new ETag, or None when it changed.
    pub fn replace(&self, rel: &Path, e_tag: &str, bytes: Vec<u8>) -> io::Result<Option<String>> {
        let key = self.key(rel);
        let opts = PutOptions { mode: PutMode::Update(UpdateVersion { e_tag: Some(e_tag.to_string()), version: None }), ..Default::default() };
        match self.call(move |c| async move { c.put_opts(&key, PutPayload::from(bytes), opts).await }) {
            Ok(r) => Ok(Some(r.e_tag.unwrap_or_default())),
            Err(object_store::Error::Precondition { .. }) | Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(to_io(e)),
        }
    }

    /// The object's bytes and ETag, or None.
    pub fn read_versioned(&self, rel: &Path) -> io::Result<Option<(Bytes, String)>> {
        let key = self.key(rel);
        let got = self.call(move |c| async move {
            let r = c.get(&key).await?;
            let tag = r.meta.e_tag.clone().unwrap_or_default();
            Ok::<_, object_store::Error>((r.bytes().await?, tag))
        });
        match got {
            Ok(v) => Ok(Some(v)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(to_io(e)),
        }
    }
}

fn to_io(e: object_store::Error) -> io::Error {
    match e {
        object_store::Error::NotFound { .. } => io::Error::new(io::ErrorKind::NotFound, e.to_string()),
        other => io::Error::other(other.to_string()),
    }
}

struct Credentials {
    key_id: String,
    secret: String,
    token: Option<String>,
}

/// Reads one profile of an AWS shared-credentials file (`[profile]`, `aws_access_key_id = ...`,
/// `aws_secret_access_key = ...`, optional `aws_session_token`): the format of `~/.aws/credentials`
/// and of a Kubernetes Secret mounted as a file. The values are never logged or printed.
fn read_credentials(path: &Path, profile: &str) -> Result<Credentials, S3Error> {
    let err = |detail: String| S3Error::Credentials { path: path.to_path_buf(), detail };
    let text = std::fs::read_to_string(path).map_err(|source| S3Error::CredentialsRead { path: path.to_path_buf(), source })?;
    let mut section = String::new();
    let (mut key_id, mut secret, mut token) = (None, None, None);
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with(';')) {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name.trim().trim_start_matches("profile ").trim().to_string();
            continue;
        }
        if section != profile {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else { continue };
        let v = v.trim().to_string();
        match k.trim() {
            "aws_access_key_id" => key_id = Some(v),
            "aws_secret_access_key" => secret = Some(v),
            "aws_session_token" => token = Some(v),
            _ => {}
        }
    }
    match (key_id, secret) {
        (Some(key_id), Some(secret)) => Ok(Credentials { key_id, secret, token }),
        _ => Err(err(format!("profile [{profile}] needs aws_access_key_id and aws_secret_access_key"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_file_profiles() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("credentials");
        std::fs::write(&path, "[default]\naws_access_key_id = AK1\naws_secret_access_key = SK1\n\n[profile lake]\naws_access_key_id=AK2\naws_secret_access_key=SK2\naws_session_token=T2\n").unwrap();
        let d = read_credentials(&path, "default").unwrap();
        assert_eq!((d.key_id.as_str(), d.secret.as_str(), d.token), ("AK1", "SK1", None));
        let l = read_credentials(&path, "lake").unwrap();
        assert_eq!((l.key_id.as_str(), l.token.as_deref()), ("AK2", Some("T2")));
        let e = read_credentials(&path, "other").err().unwrap().to_string();
        assert!(e.contains("[other]") && !e.contains("SK1"), "{e}");
    }

    #[test]
    fn locations_parse_to_bucket_and_prefix() {
        let cfg = S3Config { region: Some("us-east-1".into()), ..S3Config::default() };
        let s = S3Store::open("s3://bucket/a/b/", &cfg).unwrap();
        assert_eq!(s.key(Path::new("gpu_samples/date=2026-10-01/x.parquet")).as_ref(), "a/b/gpu_samples/date=2026-10-01/x.parquet");
        assert_eq!(s.location(), "s3://bucket/a/b");
        assert!(S3Store::open("gs://bucket/a", &cfg).unwrap_err().to_string().contains("not supported"));
        assert!(S3Store::open("s3:///a", &cfg).is_err());
    }
}
