//! A real S3-compatible server on loopback for the object-storage tests: the `moto` server
//! (PyPI `moto[server]`), started from `GPULEDGER_S3_PYTHON` (else `python3`). Where no Python
//! has it the tests say SKIPPED, unless `GPULEDGER_REQUIRE_S3` is set (CI).
//!
//! The tests look at the bucket through `object_store` (a client of their own), so what they
//! check is what is stored, not what gpuledger says it stored.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use object_store::aws::AmazonS3Builder;
use object_store::path::Path as Key;
use object_store::{ObjectStore, ObjectStoreExt, PutPayload};

pub const KEY_ID: &str = "gpuledger-test";
pub const SECRET: &str = "not-a-real-secret-3f9a";

pub struct Moto {
    child: Child,
    pub port: u16,
    rt: tokio::runtime::Runtime,
}

/// The moto server, or None (with a note) where no Python has it.
pub fn start() -> Option<Moto> {
    let py = std::env::var("GPULEDGER_S3_PYTHON").unwrap_or_else(|_| "python3".into());
    let has = Command::new(&py).args(["-c", "import moto.server, flask"]).output().is_ok_and(|o| o.status.success());
    if !has {
        assert!(
            std::env::var_os("GPULEDGER_REQUIRE_S3").is_none(),
            "{py} cannot import moto.server and GPULEDGER_REQUIRE_S3 is set (pip install 'moto[server]', or point GPULEDGER_S3_PYTHON at a Python that has it)"
        );
        eprintln!("SKIPPED: {py} cannot import moto.server (pip install 'moto[server]', or set GPULEDGER_S3_PYTHON; .ci/run installs it)");
        return None;
    }
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let child = Command::new(&py)
        .args(["-m", "moto.server", "-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start moto");
    let moto = Moto { child, port, rt: tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap() };
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        if moto.http("GET", "/").is_some_and(|r| r.starts_with("HTTP/1.1 200") || r.starts_with("HTTP/1.0 200")) {
            return Some(moto);
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    panic!("moto server did not come up on port {port}");
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Moto {
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn http(&self, method: &str, path: &str) -> Option<String> {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).ok()?;
        s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        write!(s, "{method} {path} HTTP/1.0\r\nHost: 127.0.0.1:{}\r\nContent-Length: 0\r\n\r\n", self.port).ok()?;
        let mut out = String::new();
        s.read_to_string(&mut out).ok()?;
        Some(out)
    }

    pub fn create_bucket(&self, bucket: &str) {
        let r = self.http("PUT", &format!("/{bucket}")).expect("moto answers");
        assert!(r.starts_with("HTTP/1.1 200") || r.starts_with("HTTP/1.0 200"), "creating bucket {bucket}: {r}");
    }

    /// A `[lake]` section for `s3://bucket/prefix`, credentials from `creds` (a shared
    /// credentials file the caller writes with `credentials_file`).
    pub fn lake_toml(&self, bucket: &str, prefix: &str, creds: &Path) -> String {
        format!(
            "[lake]\npath = \"s3://{bucket}/{prefix}\"\n\n[lake.s3]\nendpoint = \"{}\"\nregion = \"us-east-1\"\npath_style = true\nallow_http = true\ncredentials_file = \"{}\"\nlock_ttl_secs = 6\n",
            self.endpoint(),
            creds.display()
        )
    }

    pub fn credentials_file(dir: &Path) -> std::path::PathBuf {
        let p = dir.join("s3-credentials");
        std::fs::write(&p, format!("[default]\naws_access_key_id = {KEY_ID}\naws_secret_access_key = {SECRET}\n")).unwrap();
        p
    }

    pub fn store(&self, bucket: &str) -> Arc<dyn ObjectStore> {
        Arc::new(
            AmazonS3Builder::new()
                .with_bucket_name(bucket)
                .with_endpoint(self.endpoint())
                .with_region("us-east-1")
                .with_allow_http(true)
                .with_access_key_id(KEY_ID)
                .with_secret_access_key(SECRET)
                .build()
                .unwrap(),
        )
    }

    /// Every object under `prefix` as (key relative to it, bytes), sorted.
    pub fn tree(&self, bucket: &str, prefix: &str) -> Vec<(String, Vec<u8>)> {
        let store = self.store(bucket);
        let prefix = prefix.to_string();
        self.rt.block_on(async move {
            use futures::TryStreamExt;
            let metas: Vec<_> = store.list(Some(&Key::from(prefix.as_str()))).try_collect().await.unwrap();
            let mut out = Vec::new();
            for m in metas {
                let bytes = store.get(&m.location).await.unwrap().bytes().await.unwrap().to_vec();
                let rel = m.location.as_ref().strip_prefix(&format!("{prefix}/")).unwrap().to_string();
                out.push((rel, bytes));
            }
            out.sort();
            out
        })
    }

    /// Uploads every file under `dir` to `prefix/<relative path>`.
    pub fn upload(&self, bucket: &str, prefix: &str, dir: &Path) {
        for (rel, bytes) in super::tree(dir) {
            self.put(bucket, &format!("{prefix}/{rel}"), bytes);
        }
    }

    pub fn put(&self, bucket: &str, key: &str, bytes: Vec<u8>) {
        let store = self.store(bucket);
        let key = Key::from(key);
        self.rt.block_on(async move { store.put(&key, PutPayload::from(bytes)).await.unwrap() });
    }

    pub fn get(&self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let store = self.store(bucket);
        let key = Key::from(key);
        self.rt.block_on(async move {
            match store.get(&key).await {
                Ok(r) => Some(r.bytes().await.unwrap().to_vec()),
                Err(object_store::Error::NotFound { .. }) => None,
                Err(e) => panic!("{e}"),
            }
        })
    }

    pub fn delete(&self, bucket: &str, key: &str) {
        let store = self.store(bucket);
        let key = Key::from(key);
        self.rt.block_on(async move { store.delete(&key).await.unwrap() });
    }
}
