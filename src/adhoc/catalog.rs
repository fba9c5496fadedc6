//! What `gpuledger tables` prints: every table and view a query can use, each column with
//! its type and one line of meaning. Lake columns are documented here; views document their
//! columns in the header comment of their SQL (`--   column: meaning`).

use std::collections::BTreeMap;

use arrow::array::{Array, StringArray};
use datafusion::prelude::SessionContext;

use crate::lake::Table;
use crate::queries::VIEWS;

/// (table, column, meaning) for the lake's and the config's tables.
const COLUMNS: &[(&str, &str, &str)] = &[
    ("gpu_samples", "ts", "start of the step the row stands for, [ts, ts + step_s) (UTC)"),
    ("gpu_samples", "step_s", "the step in seconds (the lake's grid, default 30)"),
    ("gpu_samples", "node", "Kubernetes node name"),
    ("gpu_samples", "gpu_uuid", "the physical GPU (DCGM UUID)"),
    ("gpu_samples", "gpu_index", "GPU index on the node"),
    ("gpu_samples", "gpu_model", "DCGM modelName, e.g. NVIDIA H100 80GB HBM3"),
    ("gpu_samples", "mig_profile", "MIG profile of the slice (e.g. 3g.40gb), NULL for a whole GPU"),
    ("gpu_samples", "gpu_instance_id", "MIG GPU instance id, NULL for a whole GPU"),
    ("gpu_samples", "namespace", "namespace of the pod holding the GPU, NULL when none did, __unmeasured__ for GPU time of the pool no sample covered (even within the lookback)"),
    ("gpu_samples", "pod", "pod holding the GPU, NULL when none did"),
    ("gpu_samples", "container", "container holding the GPU"),
    ("gpu_samples", "share", "fraction of the GPU: 1, a MIG slice's share, or 1/n time-sliced"),
    ("gpu_samples", "util_pct", "GPU utilisation, percent (GPU_UTIL, or GR_ENGINE_ACTIVE x 100 on MIG)"),
    ("gpu_samples", "mem_used_mib", "framebuffer used, MiB"),
    ("gpu_samples", "mem_total_mib", "framebuffer size (used + free), MiB"),
    ("gpu_samples", "power_w", "power draw, W"),
    ("gpu_samples", "energy_j", "energy over the step, J (counter delta, reset-aware; else power x time)"),
    ("gpu_samples", "temp_c", "GPU temperature, C"),
    ("gpu_samples", "xid", "last XID error seen in the step, NULL when none"),
    ("gpu_samples", "counter_j", "the physical GPU's energy over the step by its energy counter's raw readings alone, J, on one row of the GPU's step; NULL on its other rows and where the readings do not cover the step (a reset, a gap)"),
    ("pods", "namespace", "the pod's namespace"),
    ("pods", "pod", "pod name (names can be reused; uid tells pods apart)"),
    ("pods", "uid", "the pod's unique id"),
    ("pods", "node", "node it was bound to, NULL if never scheduled"),
    ("pods", "priority_class", "the pod's PriorityClass"),
    ("pods", "created", "creation time (UTC)"),
    ("pods", "scheduled", "time it was bound to a node, NULL if never"),
    ("pods", "started", "time its containers started"),
    ("pods", "finished", "completion time, NULL while running"),
    ("pods", "gpu_resource", "the GPU resource requested (nvidia.com/gpu or a MIG resource)"),
    ("pods", "gpu_request", "GPUs (or MIG slices) requested"),
    ("pods", "cpu_request", "CPU cores requested (all containers)"),
    ("pods", "mem_request_bytes", "memory requested, bytes (all containers)"),
    ("pods", "phase", "last phase seen: Pending, Running, Succeeded, Failed"),
    ("pods", "termination_reason", "Completed, OOMKilled, Error, Preempted, Evicted, ..."),
    ("pods", "team", "the pod's team label (kube_pod_labels), if any"),
    ("pods", "gpu_share_pct", "a HAMi vGPU's share of its GPU, percent (nvidia.com/gpucores, else gpumem-percentage); NULL: not HAMi"),
    ("pending_samples", "ts", "start of a step the pod waited through for a node: Pending, and scheduled (if at all) after the step (UTC)"),
    ("pending_samples", "step_s", "the step in seconds"),
    ("pending_samples", "namespace", "the pending pod's namespace"),
    ("pending_samples", "pod", "the pending pod"),
    ("pending_samples", "uid", "the pending pod's uid"),
    ("pending_samples", "priority_class", "the pending pod's PriorityClass"),
    ("pending_samples", "gpu_resource", "the GPU resource it waits for"),
    ("pending_samples", "gpu_request", "GPUs (or slices) it waits for"),
    ("pending_samples", "reason", "why it waits: Unschedulable, QuotaExceeded, ..."),
    ("pending_samples", "gpu_share_pct", "a pending HAMi pod's share of a GPU per vGPU, percent (as pods.gpu_share_pct); NULL: not HAMi"),
    ("quotas", "ts", "sample time (UTC)"),
    ("quotas", "namespace", "namespace the ResourceQuota belongs to"),
    ("quotas", "resource", "quota resource, e.g. requests.nvidia.com/gpu"),
    ("quotas", "hard", "the quota's hard limit"),
    ("quotas", "used", "what the namespace used of it"),
    ("nodes", "node", "Kubernetes node name"),
    ("nodes", "gpu_uuid", "the physical GPU"),
    ("nodes", "gpu_index", "GPU index on the node"),
    ("nodes", "gpu_model", "DCGM modelName"),
    ("nodes", "mig_profile", "MIG profile of the instance, NULL for a whole GPU"),
    ("nodes", "gpu_instance_id", "MIG GPU instance id, NULL for a whole GPU"),
    ("nodes", "share", "fraction of the GPU the instance is"),
    ("nodes", "mem_total_mib", "framebuffer size, MiB"),
    ("nodes", "first_seen", "first sample of the day for this GPU (UTC)"),
    ("nodes", "last_seen", "last sample of the day for this GPU (UTC)"),
    ("nodes", "rows_energy_j", "the day's energy of the physical GPU's gpu_samples rows, J, on its first row of the day"),
    ("nodes", "counter_energy_j", "of rows_energy_j, the part on the steps its energy counter covers, J"),
    ("nodes", "counter_delta_j", "the counter's own delta over those steps (sum of gpu_samples.counter_j), J: equals counter_energy_j where energy is conserved"),
    ("gaps", "source", "dcgm or kube"),
    ("gaps", "metric", "the metric that returned nothing"),
    ("gaps", "gap_start", "start of the window with no data (UTC)"),
    ("gaps", "gap_end", "end of the window with no data (exclusive, UTC)"),
    ("gaps", "reason", "why: no series returned, ..."),
    ("node_capacity", "ts", "sample time (UTC)"),
    ("node_capacity", "node", "Kubernetes node name"),
    ("node_capacity", "resource", "GPU resource, e.g. nvidia.com/gpu"),
    ("node_capacity", "capacity", "how many the node offers"),
    ("kueue_pending", "ts", "sample time (UTC)"),
    ("kueue_pending", "cluster_queue", "Kueue ClusterQueue"),
    ("kueue_pending", "status", "active or inadmissible"),
    ("kueue_pending", "workloads", "pending workloads"),
    ("gpu_prices", "model", "GPU model (DCGM modelName) the price is for"),
    ("gpu_prices", "mig_profile", "MIG profile the price is for (per instance-hour); NULL: the whole-GPU price, MIG slices pay their share"),
    ("gpu_prices", "price_per_hour", "price per GPU-hour (or MIG instance-hour), in [pricing] currency"),
    ("gpu_prices", "slice_share", "the MIG profile's share of its GPU (1 for a whole GPU)"),
    ("gpu_prices", "effective_from", "the price holds from this instant (UTC) ..."),
    ("gpu_prices", "effective_to", "... until this one (exclusive): the next price row's start"),
    ("gpu_rates", "model", "GPU model (DCGM modelName) the rate is for"),
    ("gpu_rates", "mig_profile", "MIG profile with its own price (per instance-hour); NULL: the whole-GPU price, for whole GPUs and the slices of profiles not in own_price_profiles"),
    ("gpu_rates", "price_per_hour", "price per GPU-hour (or MIG instance-hour), in [pricing] currency"),
    ("gpu_rates", "unit_share", "what one priced hour is a share of the GPU: 1, or the MIG profile's share (GPU time / unit_share = instance time)"),
    ("gpu_rates", "effective_from", "the rate holds from this instant (UTC) ..."),
    ("gpu_rates", "effective_to", "... until this one (exclusive): the next price change of the model or one of its profiles"),
    ("gpu_rates", "own_price_profiles", "on a whole-GPU row, the MIG profiles priced by their own row over its dates, as ,a,b, (NULL on a profile row)"),
    ("cpu_prices", "price_per_core_hour", "price per requested CPU core-hour"),
    ("cpu_prices", "effective_from", "the price holds from this instant (UTC) ..."),
    ("cpu_prices", "effective_to", "... until this one (exclusive)"),
    ("memory_prices", "price_per_gib_hour", "price per requested GiB-hour of memory"),
    ("memory_prices", "effective_from", "the price holds from this instant (UTC) ..."),
    ("memory_prices", "effective_to", "... until this one (exclusive)"),
    ("tariff_bands", "name", "band name (e.g. night)"),
    ("tariff_bands", "price_per_kwh", "price per kWh in this band"),
    ("tariff_bands", "hours", "local hours the band covers, e.g. 22:00-06:00"),
    ("tariff_bands", "days", "weekdays the band covers"),
    ("tariff_bands", "timezone", "time zone of hours and days"),
    ("tariff_bands", "effective_from", "local date the band set starts"),
    ("power_tariff", "bucket_start", "start of a 15-minute bucket (UTC) ..."),
    ("power_tariff", "bucket_end", "... and its end (exclusive)"),
    ("power_tariff", "band", "tariff band in force (or flat)"),
    ("power_tariff", "price_per_kwh", "price per kWh in the bucket"),
    ("power_tariff", "pue", "power usage effectiveness of the data centre"),
    ("power_tariff", "carbon_g_per_kwh", "grid carbon intensity, g CO2e per kWh (NULL: not configured)"),
    ("calendar", "date", "a UTC day, YYYY-MM-DD"),
    ("calendar", "day_start", "its start (UTC)"),
    ("calendar", "day_end", "its end (exclusive)"),
    ("teams_config", "namespace", "a namespace"),
    ("teams_config", "team", "the team it belongs to"),
    ("teams_config", "cost_centre", "its cost centre, NULL when none is configured"),
    ("namespace_labels", "ts", "the hour the labels were seen (UTC)"),
    ("namespace_labels", "namespace", "a namespace"),
    ("namespace_labels", "team", "its team label (prometheus.labels.namespace_team), NULL when absent"),
    ("namespace_labels", "cost_centre", "its cost-centre label (prometheus.labels.namespace_cost_centre), NULL when absent"),
    ("pod_owners", "created", "the pod's creation time (UTC); the row's day partition is its day, as in pods"),
    ("pod_owners", "namespace", "the pod's namespace"),
    ("pod_owners", "pod", "pod name"),
    ("pod_owners", "uid", "the pod's unique id (joins pods.uid)"),
    ("pod_owners", "owner_kind", "kind of its controller ownerReference (kube_pod_owner), NULL for a bare pod"),
    ("pod_owners", "owner_name", "name of its controller ownerReference, NULL for a bare pod"),
    ("pod_owners", "chain", "the owners from the pod's up to the top-level workload, e.g. ReplicaSet/web-5d8f > Deployment/web; empty for a bare pod"),
    ("pod_owners", "workload_kind", "the top-level workload's kind: Deployment, CronJob, JobSet, PyTorchJob, RayJob, Notebook, VolcanoJob, ..., Pod for a bare pod"),
    ("pod_owners", "workload_name", "the top-level workload's name (the pod's own for a bare pod)"),
    ("pod_owners", "inferred", "NULL where every hop came from an owner series; else which hop was inferred and from what (a label, a name convention)"),
    ("pod_labels", "created", "the pod's creation time (UTC); the row's day partition is its day, as in pods"),
    ("pod_labels", "namespace", "the pod's namespace"),
    ("pod_labels", "pod", "pod name"),
    ("pod_labels", "uid", "the pod's unique id (joins pods.uid)"),
    ("pod_labels", "source", "label (kube_pod_labels) or annotation (kube_pod_annotations)"),
    ("pod_labels", "key", "the key as kube-state-metrics names it, without label_/annotation_: app.kubernetes.io/part-of is app_kubernetes_io_part_of"),
    ("pod_labels", "value", "its value (the latest seen)"),
    ("queue_quotas", "ts", "start of the step (UTC)"),
    ("queue_quotas", "scheduler", "kueue, volcano or kai"),
    ("queue_quotas", "queue", "the Kueue ClusterQueue, or the Volcano or KAI queue"),
    ("queue_quotas", "cohort", "a Kueue ClusterQueue's cohort (its root cohort, kueue_cluster_queue_info), NULL elsewhere"),
    ("queue_quotas", "flavor", "the Kueue resource flavor, NULL for Volcano, KAI and Kueue's pending demand"),
    ("queue_quotas", "resource", "the GPU resource (nvidia.com/gpu, a MIG resource)"),
    ("queue_quotas", "nominal", "GPUs: Kueue's nominal quota, Volcano's deserved, KAI's configured quota (kai_queue_deserved_gpus)"),
    ("queue_quotas", "borrowing_limit", "GPUs a Kueue ClusterQueue may borrow from its cohort; NULL: no limit (Kueue's +Inf) or not Kueue"),
    ("queue_quotas", "capacity", "GPUs: a Volcano queue's capability"),
    ("queue_quotas", "allocated", "GPUs in use: Kueue's admitted usage, Volcano's allocated (thousandths / 1000), KAI's allocated (its child queues included)"),
    ("queue_quotas", "pending", "GPUs asked for and not admitted: Kueue's resource_pending, Volcano's request less allocated"),
];

const CONFIG_TABLES: &[(&str, &str)] = &[
    ("gpu_prices", "config [[pricing.gpu]]: price per GPU-hour by model (and MIG profile), with dates"),
    (
        "gpu_rates",
        "config [[pricing.gpu]] resolved: the one rate of every GPU row (MIG profile price, else the whole-GPU price), as every priced query joins it",
    ),
    ("cpu_prices", "config [[pricing.cpu]]: price per requested core-hour, with dates"),
    ("memory_prices", "config [[pricing.memory]]: price per requested GiB-hour, with dates"),
    ("tariff_bands", "config [[pricing.power.tariff]]: time-of-use bands as configured"),
    ("power_tariff", "config [pricing.power]: the tariff resolved to 15-minute UTC buckets over the lake's days"),
    ("calendar", "the lake's UTC days, for cutting intervals at midnight"),
    ("teams_config", "config [teams]: namespace -> team and cost centre (the `teams` view adds namespace labels)"),
];

/// One column as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDoc {
    pub name: String,
    pub data_type: String,
    pub nullable: bool,
    pub meaning: String,
}

/// One table or view as listed.
#[derive(Debug, Clone, PartialEq)]
pub struct TableDoc {
    pub name: String,
    pub kind: &'static str,
    pub meaning: String,
    pub columns: Vec<ColumnDoc>,
}

/// A view's meaning and column meanings, from its SQL header comment.
pub fn view_docs(sql: &str) -> (String, BTreeMap<String, String>) {
    let mut meaning = String::new();
    let mut columns = BTreeMap::new();
    for line in sql.lines().take_while(|l| l.starts_with("--")) {
        let body = line.trim_start_matches('-');
        if let Some(rest) = body.strip_prefix("   ") {
            if let Some((col, text)) = rest.split_once(": ") {
                columns.insert(col.trim().to_string(), text.trim().to_string());
            }
        } else if meaning.is_empty() {
            meaning = body.trim().to_string();
        }
    }
    (meaning, columns)
}

/// Every table and view registered in `session`, in a fixed order: lake tables, views,
/// config tables; columns as the session sees them.
pub async fn describe(session: &SessionContext) -> datafusion::error::Result<Vec<TableDoc>> {
    let batches = session
        .sql("SELECT table_name, column_name, data_type, is_nullable FROM information_schema.columns WHERE table_schema = 'public' ORDER BY table_name, ordinal_position")
        .await?
        .collect()
        .await?;
    let mut found: BTreeMap<String, Vec<ColumnDoc>> = BTreeMap::new();
    for b in &batches {
        let col = |i: usize| b.column(i).as_any().downcast_ref::<StringArray>().cloned();
        let (Some(t), Some(c), Some(d), Some(n)) = (col(0), col(1), col(2), col(3)) else { continue };
        for i in 0..b.num_rows() {
            found.entry(t.value(i).to_string()).or_default().push(ColumnDoc {
                name: c.value(i).to_string(),
                data_type: d.value(i).to_string(),
                nullable: !n.is_null(i) && n.value(i) == "YES",
                meaning: String::new(),
            });
        }
    }
    let lake_meaning = |table: &str, column: &str| {
        if column == "date" {
            return Some("day partition (YYYY-MM-DD, UTC); filter on it to read fewer files".to_string());
        }
        if column == crate::lake::schema::CLUSTER {
            return Some("the cluster of the row: its series' prometheus.cluster_label value, else prometheus.cluster_name; NULL (read as default) in files from before the column".to_string());
        }
        COLUMNS.iter().find(|(t, c, _)| *t == table && *c == column).map(|(_, _, m)| m.to_string())
    };
    let mut out = Vec::new();
    for table in Table::ALL {
        if let Some(mut cols) = found.remove(table.name()) {
            for c in cols.iter_mut() {
                c.meaning = lake_meaning(table.name(), &c.name).unwrap_or_default();
            }
            out.push(TableDoc { name: table.name().into(), kind: "table", meaning: table.description().into(), columns: cols });
        }
    }
    for (name, sql) in VIEWS {
        if let Some(mut cols) = found.remove(*name) {
            let (meaning, docs) = view_docs(sql);
            // `--   *: ... `table` ...`: the view passes on that table's columns, documented there.
            let base = docs.get("*").and_then(|text| text.split('`').nth(1)).map(str::to_string);
            for c in cols.iter_mut() {
                c.meaning = docs.get(&c.name).cloned().or_else(|| base.as_deref().and_then(|b| lake_meaning(b, &c.name))).unwrap_or_default();
            }
            out.push(TableDoc { name: name.to_string(), kind: "view", meaning, columns: cols });
        }
    }
    for (name, meaning) in CONFIG_TABLES {
        if let Some(mut cols) = found.remove(*name) {
            for c in cols.iter_mut() {
                c.meaning = lake_meaning(name, &c.name).unwrap_or_default();
            }
            out.push(TableDoc { name: name.to_string(), kind: "config table", meaning: meaning.to_string(), columns: cols });
        }
    }
    Ok(out)
}

/// The listing as text.
pub fn render(docs: &[TableDoc]) -> String {
    let mut out = String::new();
    for t in docs {
        out.push_str(&format!("{}  ({}) -- {}\n", t.name, t.kind, t.meaning));
        let width = t.columns.iter().map(|c| c.data_type.len() + if c.nullable { 0 } else { 9 }).max().unwrap_or(0);
        for c in &t.columns {
            let ty = format!("{}{}", c.data_type, if c.nullable { "" } else { " NOT NULL" });
            out.push_str(&format!("  {:<20} {:<width$}  {}\n", c.name, ty, c.meaning));
        }
        out.push('\n');
    }
    out
}
