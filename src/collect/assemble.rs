//! The fetched series of a run assembled into lake rows: split by cluster, each cluster's DCGM
//! grid, kube-state-metrics and gaps, and the day's inventory derived from its GPU rows.

use std::collections::BTreeMap;
use std::sync::Arc;

use arrow::array::{Array, AsArray, RecordBatch};
use arrow::compute::concat_batches;
use arrow::datatypes::{DataType, Int32Type, TimestampMillisecondType};

use super::dcgm::DcgmGrid;
use super::hami::HamiShares;
use super::job::Job;
use super::kube::dra::ClaimDevices;
use super::kube::{KubeMetric, KubeState};
use super::labels;
use super::prometheus::{fmt_ms, Series};
use crate::config::{PrometheusConfig, SharingConfig};
use crate::domain::dcgm_field::Field;
use crate::domain::units::UNMEASURED;
use crate::lake::gpu_energy::EnergyByGpu;
use crate::lake::rows::{NodeRow, NodesBuilder};
use crate::lake::Table;

/// One cluster's assembled window: its GPU grid, kube-state-metrics and gaps.
pub(super) struct ClusterRows {
    pub(super) name: String,
    pub(super) grid: DcgmGrid,
    pub(super) kube: KubeState,
    pub(super) gaps: Vec<(&'static str, String, i64, i64)>,
}

pub(super) type Fetched = (Job, i64, i64, Vec<Series>);

/// The fetched series split by cluster (`prometheus.cluster_label`; `cluster_name` where unset
/// or a series lacks it), every query of the run present in each cluster's part (an empty
/// answer there is a gap of that cluster). Sorted by cluster name.
pub(super) fn by_cluster(results: Vec<Fetched>, cfg: &PrometheusConfig) -> BTreeMap<String, Vec<Fetched>> {
    let Some(label) = cfg.cluster_label.as_deref() else {
        if let Some((label, values)) = labels::mixed_clusters(results.iter().flat_map(|r| &r.3)) {
            tracing::warn!(
                "the series carry a {label} label with several values ({}): several clusters are read as one pool, and nodes of the same name in two clusters as one node. Set prometheus.cluster_label = \"{label}\" to keep them apart",
                values.join(", ")
            );
        }
        return BTreeMap::from([(cfg.cluster_name.clone(), results)]);
    };
    let name_of = |s: &Series| s.labels.get(label).filter(|v| !v.is_empty()).cloned();
    let mut names = std::collections::BTreeSet::new();
    let mut unlabelled = 0usize;
    for s in results.iter().flat_map(|r| &r.3) {
        match name_of(s) {
            Some(n) => {
                names.insert(n);
            }
            None => unlabelled += 1,
        }
    }
    if unlabelled > 0 {
        tracing::warn!("{unlabelled} series carry no {label} label (prometheus.cluster_label): read as cluster {} (prometheus.cluster_name)", cfg.cluster_name);
    }
    if unlabelled > 0 || names.is_empty() {
        names.insert(cfg.cluster_name.clone());
    }
    let mut out: BTreeMap<String, Vec<Fetched>> = names.iter().map(|n| (n.clone(), Vec::with_capacity(results.len()))).collect();
    for (job, s, e, series) in results {
        let mut split: BTreeMap<&str, Vec<Series>> = BTreeMap::new();
        for x in series {
            let name = name_of(&x).unwrap_or_else(|| cfg.cluster_name.clone());
            let key = names.get(name.as_str()).expect("every cluster name collected").as_str();
            split.entry(key).or_default().push(x);
        }
        for (name, part) in out.iter_mut() {
            part.push((job.clone(), s, e, split.remove(name.as_str()).unwrap_or_default()));
        }
    }
    out
}

/// "cluster NAME: " where the run reads several clusters, else nothing (log prefixes).
pub(super) fn in_cluster(name: &str, cfg: &PrometheusConfig) -> String {
    if cfg.cluster_label.is_some() {
        format!("cluster {name}: ")
    } else {
        String::new()
    }
}

/// Every cluster's GPU rows of cells `[c0, c1)`, each with its cluster.
pub(super) fn gpu_batch(clusters: &[ClusterRows], c0: usize, c1: usize) -> RecordBatch {
    per_cluster(Table::GpuSamples, clusters, &|c| c.grid.batch(c0, c1))
}

/// `rows` of each cluster, with its cluster, as one batch of `table`.
pub(super) fn per_cluster(table: Table, clusters: &[ClusterRows], rows: &dyn Fn(&ClusterRows) -> RecordBatch) -> RecordBatch {
    let batches: Vec<RecordBatch> = clusters.iter().map(|c| crate::lake::rows::with_cluster(rows(c), &c.name)).collect();
    concat_batches(&table.schema(), &batches).expect("batches of one table")
}

/// Assembles one cluster's fetched series onto the window's grid: DCGM cells (the lookback,
/// counters, the pool from kube-state-metrics' capacity), pods, and the gaps.
pub(super) fn assemble(name: &str, results: &[Fetched], cfg: &PrometheusConfig, sharing: &SharingConfig, from: i64, to: i64) -> ClusterRows {
    let step = cfg.step_secs as i64 * 1000;
    let chunk = cfg.chunk_secs as i64 * 1000;
    let mut grid = DcgmGrid::new(from, to, cfg.step_secs);
    let mut kube = KubeState::new(from, to, cfg.step_secs);
    let mut gaps: Vec<(&'static str, String, i64, i64)> = Vec::new();
    let mut util_chunks: BTreeMap<i64, usize> = BTreeMap::new();
    for (job, s, e, series) in results {
        match job {
            Job::Dcgm(f) => {
                if matches!(f, Field::Util | Field::EngineActive) {
                    *util_chunks.entry(*s).or_default() += series.len();
                } else if matches!(f, Field::Power | Field::FbUsed) && series.is_empty() {
                    gaps.push(("dcgm", cfg.metrics.of(*f).to_string(), *s, (*e).min(to)));
                }
                grid.add(*f, series, cfg);
            }
            Job::Kube(m) => {
                if matches!(m, KubeMetric::Info | KubeMetric::Phase) && series.is_empty() {
                    gaps.push(("kube", m.selector(cfg), *s, *e));
                }
                kube.add(*m, series, cfg);
            }
            Job::Hami(_) => {}
        }
    }
    // Prometheus' lookback on the grid: each DCGM series, its chunks joined, stands over the
    // steps its scrapes miss (a longer scrape interval than the step, a missed scrape).
    let mut by_series: BTreeMap<(Field, &BTreeMap<String, String>), Vec<&[(i64, f64)]>> = BTreeMap::new();
    for (job, _, _, series) in results {
        if let Job::Dcgm(f) = job {
            for x in series {
                by_series.entry((*f, &x.labels)).or_default().push(&x.samples);
            }
        }
    }
    // Each series' chunks joined once: its own scrape interval, then the fill.
    let joined: Vec<(Field, &BTreeMap<String, String>, Vec<(i64, f64)>)> =
        by_series.into_iter().map(|((f, labels), parts)| (f, labels, parts.concat())).collect();
    let mut intervals: BTreeMap<Field, Vec<i64>> = BTreeMap::new();
    for (f, _, samples) in &joined {
        if let Some(g) = super::prometheus::median_gap(samples) {
            intervals.entry(*f).or_default().push(g);
        }
    }
    let typical: BTreeMap<Field, i64> = intervals
        .into_iter()
        .map(|(f, mut gaps)| {
            let mid = gaps.len() / 2;
            (f, *gaps.select_nth_unstable(mid).1)
        })
        .collect();
    let mut filled = 0usize;
    for (f, labels, samples) in &joined {
        filled += grid.fill(*f, labels, samples, cfg, typical.get(f).copied().unwrap_or(step));
    }
    let series_of = |field: Field| joined.iter().filter(move |(f, _, _)| *f == field).map(|(_, l, s)| (*l, s.as_slice()));
    grid.align_counters(series_of(Field::Energy), series_of(Field::Power), cfg);
    grid.fill_counters(series_of(Field::Energy), cfg);
    log_conventions(name, &joined, cfg);
    let dra = kube.set_dra(&dra_devices(&joined));
    if dra.seen + dra.by_template + dra.unknown > 0 {
        tracing::info!(
            "{}DRA: {} pods hold GPUs through ResourceClaims (their devices as dcgm-exporter labels them with the claim); {} more, whose claims it never named (pending, or not mapped), take what other pods' claims of the same template held (inferred); {} with claims of no known GPU request",
            in_cluster(name, cfg),
            dra.seen,
            dra.by_template,
            dra.unknown
        );
    }
    if let Some(util) = typical.get(&Field::Util).or_else(|| typical.get(&Field::EngineActive)) {
        tracing::info!(
            "{}DCGM scrape interval {:.0} s (median over series), lake step {} s; {filled} GPU-steps without a scrape of their own took the last sample within prometheus.lookback_secs = {}",
            in_cluster(name, cfg),
            *util as f64 / 1000.0,
            cfg.step_secs,
            cfg.lookback_secs
        );
    }
    drop(joined);
    let hami_series: Vec<_> = results
        .iter()
        .filter_map(|(job, _, _, series)| if let Job::Hami(m) = job { Some(series.iter().map(move |x| (*m, x))) } else { None })
        .flatten()
        .collect();
    let shares = HamiShares::build(from, step, ((to - from) / step) as usize, &hami_series, cfg, sharing.hami_share);
    if shares.gpus() > 0 {
        tracing::info!(
            "{}HAMi: holders of {} GPUs from its scheduler's allocations (sharing.hami_share = {:?}); {} GPU-steps whose holders added up to more than the GPU scaled down to it; {} holder-steps without the vGPU monitor's utilisation take the GPU's; {} more launched no kernel in the step (hami_container_last_kernel_elapsed_seconds) and are idle",
            in_cluster(name, cfg),
            shares.gpus(),
            sharing.hami_share,
            shares.scaled_steps,
            shares.without_util,
            shares.idle_by_kernel
        );
    }
    grid.set_hami(shares);
    let hami = kube.hami_nodes();
    for (node, pods) in &hami {
        tracing::warn!(
            "{}node {node}: {pods} pods request HAMi's share of a GPU (nvidia.com/gpucores, gpumem): its nvidia.com/gpu capacity counts vGPUs, not GPUs; its GPUs are those DCGM reports (none if no dcgm-exporter runs there), and requests of nvidia.com/gpu there are vGPUs, each its share of the cores in the request-based fallback",
            in_cluster(name, cfg)
        );
    }
    let uncounted = kube.uncounted_resources();
    if !uncounted.is_empty() {
        tracing::info!(
            "{}requests of {} are not device counts (sizes, percentages, priorities) and are never read as GPUs",
            in_cluster(name, cfg),
            uncounted.iter().map(|r| crate::collect::kube::resource_name(r)).collect::<Vec<_>>().join(", ")
        );
    }
    let pool = grid.set_pool(kube.gpu_capacity(cfg.lookback_secs as i64 * 1000, &hami));
    if pool.names_disagree {
        tracing::warn!(
            "{}kube_node_status_capacity's node names share none with DCGM's ({}): the pool is the GPUs DCGM reported, GPU time of nodes without a DCGM exporter is not counted",
            in_cluster(name, cfg),
            cfg.labels.node.join(", ")
        );
    }
    for (node, gpus, most) in &pool.multiplied {
        tracing::warn!(
            "{}node {node}: kube-state-metrics reports up to {most} nvidia.com/gpu, {}x the {gpus} GPUs DCGM reports there: read as a sharing layer's replicas (time-slicing without renameByDefault), so the node's GPUs are DCGM's {gpus}, not {most} (were GPUs missing from its dcgm-exporter, they are not counted)",
            in_cluster(name, cfg),
            most / gpus
        );
    }
    for node in &pool.uncounted_without_dcgm {
        tracing::warn!(
            "{}node {node}: kube-state-metrics reports GPU resources there but no count of whole GPUs (HAMi's vGPUs, MIG or time-slicing replicas), and no DCGM series names it: its GPUs are not in the pool; run dcgm-exporter there",
            in_cluster(name, cfg)
        );
    }
    for (node, gpus) in &pool.without_dcgm {
        tracing::warn!(
            "{}node {node}: kube-state-metrics reports up to {gpus} GPUs (nvidia.com/gpu) but no DCGM series names it: is dcgm-exporter running there? Its GPU time is {UNMEASURED}, model {}",
            in_cluster(name, cfg),
            crate::domain::units::UNKNOWN_MODEL
        );
    }
    for (s, n) in util_chunks {
        if n == 0 {
            gaps.push(("dcgm", format!("{}|{}", cfg.metrics.gpu_util, cfg.metrics.engine_active), s, (s + chunk).min(to)));
        }
    }
    gaps.sort();
    if grid.cells_seen() == 0 {
        tracing::warn!("{}no DCGM samples at all in {} to {}: is the DCGM exporter scraped?", in_cluster(name, cfg), fmt_ms(from), fmt_ms(to));
    }
    ClusterRows { name: name.to_string(), grid, kube, gaps }
}

/// The devices dcgm-exporter labels with a DRA claim (`dra_claim_namespace`, `dra_claim_name`;
/// the device by `dra_device_name`, else its UUID and MIG instance), by claim.
fn dra_devices(joined: &[(Field, &BTreeMap<String, String>, Vec<(i64, f64)>)]) -> BTreeMap<(String, String), ClaimDevices> {
    let mut out: BTreeMap<(String, String), ClaimDevices> = BTreeMap::new();
    for (_, l, samples) in joined {
        let (Some(ns), Some(claim)) = (l.get("dra_claim_namespace"), l.get("dra_claim_name")) else { continue };
        if samples.is_empty() || claim.is_empty() {
            continue;
        }
        let uuid = l.get("UUID").or_else(|| l.get("uuid")).map_or("", String::as_str);
        let gi = l.get("GPU_I_ID").map_or("", String::as_str);
        let device = l.get("dra_device_name").filter(|d| !d.is_empty()).cloned().unwrap_or_else(|| format!("{uuid}/{gi}"));
        let e = out.entry((ns.clone(), claim.clone())).or_default();
        match l.get("GPU_I_PROFILE").filter(|p| !p.is_empty()) {
            Some(profile) => {
                e.mig.entry(profile.clone()).or_default().insert(device);
            }
            None => {
                e.whole.insert(device);
            }
        }
    }
    out
}

/// Logs once per run how the DCGM series name their workload, per node: the conventions in use,
/// and the nodes that changed from one to another inside the window (a ServiceMonitor's
/// `honorLabels` flipped, a second exporter's ServiceMonitor).
pub(super) fn log_conventions(cluster: &str, joined: &[(Field, &BTreeMap<String, String>, Vec<(i64, f64)>)], cfg: &PrometheusConfig) {
    let prefix = in_cluster(cluster, cfg);
    let workload = labels::WorkloadLabels::new(&cfg.labels);
    let node_pick = labels::LabelPick::plain(&cfg.labels.node);
    // node -> convention -> (first, last) sample time
    let mut seen: BTreeMap<&str, BTreeMap<labels::Convention, (i64, i64)>> = BTreeMap::new();
    let mut nodes: std::collections::BTreeSet<&str> = std::collections::BTreeSet::new();
    for (f, l, samples) in joined {
        if !matches!(f, Field::Util | Field::EngineActive) || samples.is_empty() {
            continue;
        }
        let node = node_pick.get(l).unwrap_or("");
        nodes.insert(node);
        let Some(conv) = workload.convention(l) else { continue };
        let e = seen.entry(node).or_default().entry(conv).or_insert((i64::MAX, i64::MIN));
        e.0 = e.0.min(samples[0].0);
        e.1 = e.1.max(samples[samples.len() - 1].0);
    }
    let mut by_conv: BTreeMap<labels::Convention, usize> = BTreeMap::new();
    let mut mixed = Vec::new();
    for (node, convs) in &seen {
        for c in convs.keys() {
            *by_conv.entry(*c).or_default() += 1;
        }
        if convs.contains_key(&labels::Convention::Exported) && convs.contains_key(&labels::Convention::Plain) {
            let span = |c| convs.get(&c).map_or(String::new(), |&(a, b): &(i64, i64)| format!("{} to {}", fmt_ms(a), fmt_ms(b)));
            mixed.push(format!("{node} (exported_* {}, plain {})", span(labels::Convention::Exported), span(labels::Convention::Plain)));
        }
    }
    if !by_conv.is_empty() {
        let list: Vec<String> = by_conv.iter().map(|(c, n)| format!("{} on {n} nodes", c.label())).collect();
        tracing::info!("{prefix}DCGM workload labels, read per series: {}", list.join("; "));
    }
    let unmapped: Vec<&str> = nodes
        .iter()
        .filter(|n| !seen.get(**n).is_some_and(|c| c.contains_key(&labels::Convention::Exported) || c.contains_key(&labels::Convention::Plain)))
        .copied()
        .collect();
    if !unmapped.is_empty() {
        tracing::warn!(
            "{prefix}{} nodes have DCGM series but none names a pod (idle the whole window, or an exporter without the pod mapping? prometheus.labels.pod): the chargeback gives their GPU time to the pods kube-state-metrics shows there, requests x running time: {}{}",
            unmapped.len(),
            unmapped.iter().take(10).copied().collect::<Vec<_>>().join(", "),
            if unmapped.len() > 10 { ", ..." } else { "" }
        );
    }
    if !mixed.is_empty() {
        tracing::info!(
            "{prefix}{} nodes changed label convention inside the window (a ServiceMonitor's honorLabels?), each series read by its own labels: {}",
            mixed.len(),
            mixed.iter().take(10).cloned().collect::<Vec<_>>().join("; ")
        );
    }
}

/// GPU-seconds of namespace `__unmeasured__` per node in a batch of GPU rows.
/// Nodes are named `cluster/node` where `qualified` (several clusters).
pub(super) fn unmeasured_gpu_seconds(gpu: &RecordBatch, qualified: bool) -> BTreeMap<String, f64> {
    let mut out = BTreeMap::new();
    let ns = arrow::compute::cast(gpu.column_by_name("namespace").expect("namespace"), &DataType::Utf8).expect("cast to utf8");
    let node = arrow::compute::cast(gpu.column_by_name("node").expect("node"), &DataType::Utf8).expect("cast to utf8");
    let cluster = arrow::compute::cast(gpu.column_by_name("cluster").expect("cluster"), &DataType::Utf8).expect("cast to utf8");
    let (ns, node, cluster) = (ns.as_string::<i32>(), node.as_string::<i32>(), cluster.as_string::<i32>());
    let share = gpu.column_by_name("share").expect("share").as_primitive::<arrow::datatypes::Float64Type>();
    let step = gpu.column_by_name("step_s").expect("step_s").as_primitive::<Int32Type>();
    for i in 0..gpu.num_rows() {
        if ns.is_valid(i) && ns.value(i) == UNMEASURED {
            let name = if qualified && cluster.is_valid(i) { format!("{}/{}", cluster.value(i), node.value(i)) } else { node.value(i).to_string() };
            *out.entry(name).or_insert(0.0) += share.value(i) * step.value(i) as f64;
        }
    }
    out
}

/// The day's inventory, derived from its GPU rows: first and last sample per unit, and each
/// physical GPU's energy of the day against its counter (`lake::gpu_energy`).
pub(super) fn nodes_of(gpu: &RecordBatch) -> RecordBatch {
    let str_col = |name: &str| arrow::compute::cast(gpu.column_by_name(name).expect("column"), &DataType::Utf8).expect("cast to utf8");
    let (node, uuid, model, mig, cluster) = (str_col("node"), str_col("gpu_uuid"), str_col("gpu_model"), str_col("mig_profile"), str_col("cluster"));
    let (node, uuid, model, mig, cluster) =
        (node.as_string::<i32>(), uuid.as_string::<i32>(), model.as_string::<i32>(), mig.as_string::<i32>(), cluster.as_string::<i32>());
    let gi = gpu.column_by_name("gpu_instance_id").expect("gi").as_primitive::<arrow::datatypes::Int16Type>();
    let idx = gpu.column_by_name("gpu_index").expect("idx").as_primitive::<arrow::datatypes::Int16Type>();
    let share = gpu.column_by_name("share").expect("share").as_primitive::<arrow::datatypes::Float64Type>();
    let total = gpu.column_by_name("mem_total_mib").expect("mem_total").as_primitive::<arrow::datatypes::Float32Type>();
    let ts = gpu.column_by_name("ts").expect("ts").as_primitive::<TimestampMillisecondType>();
    type Key = (Option<String>, String, String, Option<i16>);
    let mut units: BTreeMap<Key, (i16, String, Option<String>, f64, Option<f32>, i64, i64)> = BTreeMap::new();
    for i in 0..gpu.num_rows() {
        let key = (
            cluster.is_valid(i).then(|| cluster.value(i).to_string()),
            node.value(i).to_string(),
            uuid.value(i).to_string(),
            gi.is_valid(i).then(|| gi.value(i)),
        );
        let t = ts.value(i);
        let e =
            units.entry(key).or_insert_with(|| (idx.value(i), model.value(i).to_string(), mig.is_valid(i).then(|| mig.value(i).to_string()), 0.0, None, t, t));
        // a time-sliced GPU has several rows per step; its unit share is their sum per step
        if t == e.5 {
            e.3 += share.value(i);
        }
        if total.is_valid(i) {
            e.4 = Some(total.value(i));
        }
        e.5 = e.5.min(t);
        e.6 = e.6.max(t);
    }
    // Each physical GPU's energy of the day, on its first row (units sort with the GPU's own,
    // `gpu_instance_id` null, first).
    let mut energy = EnergyByGpu::of(gpu);
    let mut by_cluster: BTreeMap<&Option<String>, NodesBuilder> = BTreeMap::new();
    for ((c, n, u, g), (i, m, p, s, fb, first, last)) in &units {
        let e = energy.take(c.as_deref(), n, u);
        let rows = by_cluster.entry(c).or_default();
        rows.push(&NodeRow {
            node: n,
            gpu_uuid: u,
            gpu_index: *i,
            gpu_model: m,
            mig_profile: p.as_deref(),
            gpu_instance_id: *g,
            share: *s,
            mem_total_mib: *fb,
            first_seen: *first,
            last_seen: *last,
            rows_energy_j: e.rows_j,
            counter_energy_j: e.counter_energy_j,
            counter_delta_j: e.counter_delta_j,
        });
    }
    let batches: Vec<RecordBatch> = by_cluster
        .into_iter()
        .map(|(c, rows)| match c {
            Some(c) => crate::lake::rows::with_cluster(rows.finish(), c),
            None => rows.finish(),
        })
        .collect();
    if batches.is_empty() {
        return NodesBuilder::new().finish();
    }
    concat_batches(&Table::Nodes.schema(), &batches).expect("batches of one table")
}

pub(super) fn gaps_batch(gaps: &[(&'static str, String, i64, i64)]) -> RecordBatch {
    let src: arrow::array::DictionaryArray<Int32Type> = gaps.iter().map(|g| g.0).collect();
    let metric: arrow::array::DictionaryArray<Int32Type> = gaps.iter().map(|g| g.1.as_str()).collect();
    let start = arrow::array::TimestampMillisecondArray::from(gaps.iter().map(|g| g.2).collect::<Vec<_>>()).with_timezone("UTC");
    let end = arrow::array::TimestampMillisecondArray::from(gaps.iter().map(|g| g.3).collect::<Vec<_>>()).with_timezone("UTC");
    let reason: arrow::array::DictionaryArray<Int32Type> = gaps.iter().map(|_| "no data").collect();
    crate::lake::rows::table_batch(Table::Gaps.schema(), vec![Arc::new(src), Arc::new(metric), Arc::new(start), Arc::new(end), Arc::new(reason)])
}
