//! `gpuledger check`: validate the config and reach every configured source, saying what is
//! wrong and where. Each line is `ok`, `warn` or `FAIL`; any FAIL exits non-zero.

use std::fmt;
use std::path::Path;

use crate::collect::kube::KubeMetric;
use crate::collect::prometheus::PromClient;
use crate::config::{Config, PrometheusConfig};
use crate::domain::dcgm_field::Field;
use crate::engine::SessionBuilder;
use crate::lake::{Lake, Table};
use crate::queries::{Queries, BUILTIN};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Ok,
    Warn,
    Fail,
}

#[derive(Debug, Clone)]
pub struct Finding {
    pub status: Status,
    pub what: String,
    pub detail: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = match self.status {
            Status::Ok => "ok  ",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        write!(f, "{s}  {:<28} {}", self.what, self.detail)
    }
}

fn finding(status: Status, what: impl Into<String>, detail: impl Into<String>) -> Finding {
    Finding { status, what: what.into(), detail: detail.into() }
}

/// Everything `check` looks at, in order.
pub async fn check(config: &Config, config_origin: &str, lake: &Lake, queries: &Queries, session: &SessionBuilder) -> Vec<Finding> {
    let mut out = vec![finding(Status::Ok, "config", config_origin)];
    out.extend(check_lake(lake));
    out.extend(check_queries(config, lake, queries, session).await);
    out.extend(check_prometheus(&config.prometheus).await);
    out
}

fn check_lake(lake: &Lake) -> Vec<Finding> {
    let root = lake.root();
    let mut out = Vec::new();
    if !lake.is_local() {
        // Object storage: list the prefix and write, read back and delete a probe object.
        let probe = crate::collect::state::state_dir(lake).join(format!(".gpuledger-check-{}", std::process::id()));
        let wrote = lake.publish(&probe, |w| w.write_all(b"probe")).and_then(|_| lake.read(&probe)).and_then(|b| {
            lake.remove(&probe)?;
            if &b[..] == b"probe" {
                Ok(())
            } else {
                Err(std::io::Error::other("read back other bytes than written"))
            }
        });
        if let Err(e) = lake.list(root).and(wrote) {
            out.push(finding(
                Status::Fail,
                "lake",
                format!("{}: cannot list, write and delete there: {ec}", root.display(), ec = crate::error_chain::Chain(&e)),
            ));
            return out;
        }
    } else if !root.exists() {
        let parent = root.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let status = if writable(parent) { Status::Ok } else { Status::Fail };
        out.push(finding(
            status,
            "lake",
            format!(
                "{} does not exist yet; {} will create it ({})",
                root.display(),
                "the first collect",
                if status == Status::Ok { "parent is writable" } else { "but its parent is not writable" }
            ),
        ));
        return out;
    }
    if lake.is_local() && !writable(root) {
        out.push(finding(Status::Fail, "lake", format!("{} is not writable by this user", root.display())));
        return out;
    }
    let mut described = Vec::new();
    for t in [Table::GpuSamples, Table::Pods] {
        match lake.dates(t) {
            Ok(d) if !d.is_empty() => described.push(format!("{} {} days ({} to {})", t.name(), d.len(), d[0], d[d.len() - 1])),
            Ok(_) => described.push(format!("{} empty", t.name())),
            Err(e) => out.push(finding(Status::Fail, "lake", format!("listing {}: {ec}", t.name(), ec = crate::error_chain::Chain(&e)))),
        }
    }
    out.push(finding(Status::Ok, "lake", format!("{}: {}", root.display(), described.join("; "))));
    let days = lake.dates(Table::GpuSamples).unwrap_or_default();
    if !days.is_empty() {
        let behind: Vec<_> = days.iter().filter(|d| !crate::lake::rollup::all_current(lake, Table::GpuSamples, **d) || !pending_current(lake, **d)).collect();
        out.push(match behind.as_slice() {
            [] => finding(Status::Ok, "rollups", format!("all {} gpu_samples days have current rollups", days.len())),
            [first, ..] => finding(
                Status::Warn,
                "rollups",
                format!(
                    "{} of {} gpu_samples days (from {first}) lack a current rollup: reports read their samples (same result, slower); `gpuledger rollup` writes them",
                    behind.len(),
                    days.len()
                ),
            ),
        });
    }
    match crate::collect::state::Checkpoints::load(lake) {
        Ok(c) if c.sources.is_empty() => out.push(finding(Status::Ok, "checkpoints", "none yet (the first collect starts prometheus.initial_days back)")),
        Ok(c) => out.push(finding(Status::Ok, "checkpoints", c.sources.iter().map(|(k, v)| format!("{k} at {v}")).collect::<Vec<_>>().join(", "))),
        Err(e) => out.push(finding(Status::Fail, "checkpoints", crate::error_chain::chain(&e))),
    }
    out
}

/// A day without pending pods has no `pending_samples` file, and so nothing to roll up.
fn pending_current(lake: &Lake, date: chrono::NaiveDate) -> bool {
    !lake.exists(&lake.partition_file(Table::PendingSamples, date)) || crate::lake::rollup::all_current(lake, Table::PendingSamples, date)
}

fn writable(dir: &Path) -> bool {
    let probe = dir.join(format!(".gpuledger-check-{}", std::process::id()));
    let ok = std::fs::write(&probe, b"").is_ok();
    let _ = std::fs::remove_file(&probe);
    ok
}

/// Every rollup query (built-in or overridden) must plan against the lake's schemas.
async fn check_queries(config: &Config, lake: &Lake, queries: &Queries, session: &SessionBuilder) -> Vec<Finding> {
    let ctx = match session.build(lake, config).await {
        Ok(c) => c,
        Err(e) => return vec![finding(Status::Fail, "engine", crate::error_chain::chain(&e))],
    };
    let mut out = Vec::new();
    let mut bad = Vec::new();
    // The passes over the samples and rollups hand idle_pods.sql, chargeback_grain.sql, the
    // queue's and the quota's SQL their tables: register them (empty).
    for (name, schema) in [
        (crate::lake::passes::idle_runs::HOLDING_TABLE, crate::lake::passes::idle_runs::holding_schema()),
        (crate::lake::passes::idle_runs::RUNS_TABLE, crate::lake::passes::idle_runs::runs_schema()),
        (crate::lake::passes::gpu_buckets::TABLE, crate::lake::passes::gpu_buckets::schema()),
        (crate::lake::rollup::PENDING_BUCKETS.name(), crate::lake::rollup::PENDING_BUCKETS.schema()),
        (crate::lake::rollup::PENDING_POD_BUCKETS.name(), crate::lake::rollup::PENDING_POD_BUCKETS.schema()),
        (crate::lake::rollup::NAMESPACE_GPUS.name(), crate::lake::rollup::NAMESPACE_GPUS.schema()),
        (crate::lake::rollup::UNALLOCATED_UNITS.name(), crate::lake::rollup::UNALLOCATED_UNITS.schema()),
    ] {
        if let Ok(t) = datafusion::datasource::MemTable::try_new(schema, vec![vec![]]) {
            let _ = ctx.register_table(name, std::sync::Arc::new(t));
        }
    }
    let (view, select) = crate::queries::BUCKET_VIEW;
    if let Err(e) = crate::engine::register_view(&ctx, view, select).await {
        bad.push(format!("view {view}: {}", crate::error_chain::chain(&e).lines().next().unwrap_or("")));
    }
    for (name, _) in BUILTIN {
        let result = match queries.get(name) {
            Ok(sql) => {
                let planned = ctx.state().create_logical_plan(&sql).await;
                // The chargeback's first queries are tables for its later ones: register their
                // (empty) results.
                if crate::report::chargeback::STAGED.contains(name) {
                    if let Ok(plan) = &planned {
                        let schema = std::sync::Arc::new(plan.schema().as_arrow().clone());
                        if let Ok(t) = datafusion::datasource::MemTable::try_new(schema, vec![vec![]]) {
                            let _ = ctx.register_table(*name, std::sync::Arc::new(t));
                        }
                    }
                }
                planned.map(|_| ()).map_err(|e| e.strip_backtrace())
            }
            Err(e) => Err(crate::error_chain::chain(&e)),
        };
        if let Err(e) = result {
            bad.push(format!("{name}: {}", e.lines().next().unwrap_or("")));
        }
    }
    if bad.is_empty() {
        out.push(finding(Status::Ok, "queries", format!("{} rollup queries and {} views plan", BUILTIN.len(), crate::queries::VIEWS.len())));
    } else {
        for b in bad {
            out.push(finding(Status::Fail, "queries", b));
        }
    }
    out
}

/// Reaches Prometheus (build info) and looks for every configured metric name.
async fn check_prometheus(cfg: &PrometheusConfig) -> Vec<Finding> {
    let mut quick = cfg.clone();
    quick.retries = 0;
    quick.timeout_secs = quick.timeout_secs.min(15);
    let client = match PromClient::new(&quick) {
        Ok(c) => c,
        Err(e) => return vec![finding(Status::Fail, "prometheus", crate::error_chain::chain(&e))],
    };
    let base = client.display_base().to_string();
    let mut out = Vec::new();
    match client.api("/api/v1/status/buildinfo", &[]).await {
        Ok(info) => {
            let version = info.get("version").and_then(|v| v.as_str()).unwrap_or("unknown version");
            out.push(finding(Status::Ok, "prometheus", format!("{base} answers (version {version})")));
        }
        Err(e) => {
            // Mimir/Thanos may not serve buildinfo: fall through to the metric list.
            out.push(finding(Status::Warn, "prometheus", format!("{base}: build info: {ec}", ec = crate::error_chain::Chain(&e))));
        }
    }
    if let Some((keep, text)) = client.retention().await {
        let horizon = chrono::Utc::now().timestamp_millis() - keep.as_millis().min(i64::MAX as u128) as i64;
        let from = crate::collect::prometheus::fmt_ms(horizon);
        out.push(finding(Status::Ok, "prometheus retention", format!("{text}: samples from about {from} on; a collect window starting earlier is refused")));
    }
    let names: Vec<String> = match client.api("/api/v1/label/__name__/values", &[]).await {
        Ok(v) => v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect()).unwrap_or_default(),
        Err(e) => {
            out.retain(|f| f.what != "prometheus");
            out.push(finding(Status::Fail, "prometheus", format!("{base}: {ec}", ec = crate::error_chain::Chain(&e))));
            return out;
        }
    };
    let has = |m: &str| {
        let bare = m.split('{').next().unwrap_or(m);
        names.iter().any(|n| n == bare)
    };
    let util = cfg.metrics.of(Field::Util);
    let engine = cfg.metrics.of(Field::EngineActive);
    out.push(match (has(util), has(engine)) {
        (true, _) | (_, true) => finding(
            Status::Ok,
            "dcgm utilisation",
            format!("{}{}", if has(util) { util } else { "" }, if has(engine) { format!(" {engine} (MIG)") } else { String::new() }),
        ),
        _ => finding(Status::Fail, "dcgm utilisation", format!("neither {util} nor {engine} exists: is dcgm-exporter scraped? (prometheus.metrics.gpu_util)")),
    });
    for (field, key, required) in [
        (Field::FbUsed, "fb_used", true),
        (Field::Power, "power", true),
        (Field::Energy, "energy", false),
        (Field::FbFree, "fb_free", false),
        (Field::Temp, "temp", false),
        (Field::Xid, "xid", false),
    ] {
        let m = cfg.metrics.of(field);
        out.push(if has(m) {
            finding(Status::Ok, format!("dcgm {key}"), m)
        } else if required {
            finding(Status::Fail, format!("dcgm {key}"), format!("{m} does not exist (prometheus.metrics.{key})"))
        } else {
            finding(
                Status::Warn,
                format!("dcgm {key}"),
                format!("{m} does not exist (prometheus.metrics.{key}){}", if key == "energy" { ": energy falls back to power x time" } else { "" }),
            )
        });
    }
    for metric in KubeMetric::ALL {
        let selector = metric.selector(cfg);
        let name = selector.split('{').next().unwrap_or(&selector).to_string();
        let required = matches!(metric, KubeMetric::Info | KubeMetric::Created | KubeMetric::Scheduled | KubeMetric::Phase | KubeMetric::Requests);
        let what = format!("kube {name}");
        out.push(if has(&name) {
            finding(Status::Ok, what, "present")
        } else if metric == KubeMetric::KueuePending {
            finding(Status::Ok, what, "absent (Kueue does not run here; the queue report skips it)")
        } else if metric == KubeMetric::ResourceClaims {
            finding(
                Status::Ok,
                what,
                "absent (no DRA here, or kube-state-metrics before 2.20: pods holding GPUs through ResourceClaims are then known from dcgm-exporter alone)",
            )
        } else if metric == KubeMetric::NamespaceLabels {
            finding(Status::Ok, what, "absent (teams and cost centres come from the config's [teams] only)")
        } else if metric == KubeMetric::DeploymentOwner {
            finding(Status::Ok, what, "absent (kube-state-metrics before 2.18: a Deployment is taken as top-level)")
        } else if metric == KubeMetric::Annotations {
            finding(Status::Ok, what, "absent (no --metric-annotations-allowlist for pods: --by annotation:KEY has no values)")
        } else if metric == KubeMetric::RayClusterInfo {
            finding(Status::Ok, what, "absent (no KubeRay operator metrics: a RayCluster is a RayJob's only where its submitter Job names it)")
        } else if metric.is_queue() {
            finding(Status::Ok, what, "absent (that scheduler does not run here, or does not export its queues' resources)")
        } else if matches!(metric, KubeMetric::Owner | KubeMetric::ReplicaSetOwner | KubeMetric::JobOwner) {
            finding(Status::Warn, what, "does not exist: pods resolve to no workload above them (--by workload shows Pod/<name>)")
        } else if required {
            finding(Status::Fail, what, "does not exist: is kube-state-metrics scraped?")
        } else {
            finding(Status::Warn, what, "does not exist; reports that use it will be empty")
        });
    }
    // HAMi's series: optional (most clusters do not run HAMi); where its scheduler is scraped,
    // the GPUs it shares are split among their holders.
    let hami = crate::collect::hami::HamiMetric::ALL.map(|m| m.name(cfg).to_string());
    let present: Vec<&String> = hami.iter().filter(|m| has(m)).collect();
    out.push(if present.is_empty() {
        finding(Status::Ok, "hami", "absent (no HAMi here, or its scheduler is not scraped: a HAMi node's pods are then billed by their requests)")
    } else if has(&hami[0]) {
        finding(Status::Ok, "hami", format!("present: {}", present.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")))
    } else {
        finding(
            Status::Warn,
            "hami",
            format!(
                "{} does not exist (prometheus.metrics.hami_core_allocated) though {} do: HAMi's GPUs go by memory alone",
                hami[0],
                present.iter().map(|m| m.as_str()).collect::<Vec<_>>().join(", ")
            ),
        )
    });
    out.push(check_gpu_nodes(&client, cfg).await);
    if let Some(f) = check_clusters(&client, cfg).await {
        out.push(f);
    }
    out
}

/// Where `prometheus.cluster_label` is unset: whether the DCGM series carry a cluster label
/// (`collect::labels::CLUSTER_LABEL_CANDIDATES`) with several values, clusters a collect would
/// read as one pool (and nodes of one name in two clusters as one node).
async fn check_clusters(client: &PromClient, cfg: &PrometheusConfig) -> Option<Finding> {
    if let Some(label) = cfg.cluster_label.as_deref() {
        return Some(finding(Status::Ok, "clusters", format!("kept apart by label {label} (prometheus.cluster_label)")));
    }
    let selector = format!("{{__name__=~\"{}|{}\"}}", cfg.metrics.of(Field::Util), cfg.metrics.of(Field::EngineActive));
    for label in crate::collect::labels::CLUSTER_LABEL_CANDIDATES {
        let path = format!("/api/v1/label/{label}/values");
        let Ok(v) = client.api(&path, &[("match[]", selector.as_str())]).await else { continue };
        let values: Vec<&str> = v.as_array().map(|a| a.iter().filter_map(|x| x.as_str()).filter(|x| !x.is_empty()).collect()).unwrap_or_default();
        if values.len() > 1 {
            let shown: Vec<&str> = values.iter().take(10).copied().collect();
            return Some(finding(
                Status::Warn,
                "clusters",
                format!(
                    "the DCGM series carry {label} with {} values ({}{}): a collect reads them as one pool. Set prometheus.cluster_label = \"{label}\"",
                    values.len(),
                    shown.join(", "),
                    if values.len() > shown.len() { ", ..." } else { "" }
                ),
            ));
        }
    }
    None
}

/// Whether every node kube-state-metrics reports GPUs on is one a DCGM series names: a node
/// without an exporter is GPU time the lake will hold as `__unmeasured__`, and node names of
/// another convention on the two sides mean the pool cannot be checked against capacity.
async fn check_gpu_nodes(client: &PromClient, cfg: &PrometheusConfig) -> Finding {
    let values = |label: String, selector: String| async move {
        let path = format!("/api/v1/label/{label}/values");
        client.api(&path, &[("match[]", selector.as_str())]).await.map(|v| {
            v.as_array().map(|a| a.iter().filter_map(|x| x.as_str().map(String::from)).collect::<std::collections::BTreeSet<String>>()).unwrap_or_default()
        })
    };
    let mut dcgm = std::collections::BTreeSet::new();
    for label in &cfg.labels.node {
        for metric in [cfg.metrics.of(Field::Util), cfg.metrics.of(Field::EngineActive)] {
            match values(label.clone(), metric.to_string()).await {
                Ok(v) => dcgm.extend(v),
                Err(e) => return finding(Status::Warn, "gpu nodes", format!("listing DCGM's {label} values: {ec}", ec = crate::error_chain::Chain(&e))),
            }
        }
    }
    let capacity = match values("node".into(), KubeMetric::NodeCapacity.selector(cfg)).await {
        Ok(v) => v,
        Err(e) => return finding(Status::Warn, "gpu nodes", format!("listing kube_node_status_capacity's nodes: {ec}", ec = crate::error_chain::Chain(&e))),
    };
    // As the collector does: `gpu-1` and `gpu-1.ec2.internal` are one node.
    let short = |n: &str| n.split('.').next().unwrap_or(n).to_string();
    let dcgm_short: std::collections::BTreeSet<String> = dcgm.iter().map(|n| short(n)).collect();
    let missing: Vec<&String> = capacity.iter().filter(|n| !dcgm.contains(*n) && !dcgm_short.contains(&short(n))).collect();
    if capacity.is_empty() {
        finding(Status::Warn, "gpu nodes", "kube_node_status_capacity reports no GPU resource: the pool is what DCGM reports")
    } else if missing.len() == capacity.len() && !dcgm.is_empty() {
        finding(
            Status::Warn,
            "gpu nodes",
            format!(
                "no node of kube_node_status_capacity ({} nodes) is one DCGM names ({}): another naming convention? The pool is what DCGM reports",
                capacity.len(),
                cfg.labels.node.join(", ")
            ),
        )
    } else if !missing.is_empty() {
        let list: Vec<&str> = missing.iter().take(10).map(|s| s.as_str()).collect();
        finding(
            Status::Warn,
            "gpu nodes",
            format!(
                "{} of {} GPU nodes have no DCGM series (is dcgm-exporter running there?): {}{}; their GPU time is __unmeasured__",
                missing.len(),
                capacity.len(),
                list.join(", "),
                if missing.len() > 10 { ", ..." } else { "" }
            ),
        )
    } else {
        finding(Status::Ok, "gpu nodes", format!("{} nodes with GPUs (kube_node_status_capacity), every one named by DCGM", capacity.len()))
    }
}
