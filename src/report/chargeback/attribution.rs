//! The chargeback by a key each pod has of its own (`--by workload`, `queue`, `cluster-queue`,
//! `cohort`, `label:KEY`, `annotation:KEY`): every namespace's quantities split between its
//! pods' values of the key, exactly, so the rows by key sum to the namespace rows (and those to
//! the pool) to the unit.
//!
//! - GPU time a sample measured goes to the pod that held the GPU: the samples are summed per
//!   pod as the chargeback's step 1 sums them per namespace (the `pod_buckets` rollup, or a pass
//!   over the samples of days without one) and priced by the same `chargeback_grain.sql`, so
//!   each pod's GPU time, energy, GPU cost, power cost (at its own buckets' tariff) and carbon
//!   are its own, and a namespace's pods' sum is the namespace's step-1 row.
//! - The rest of a namespace's row (GPU time charged by request where no sample measured it,
//!   CPU and memory) goes to its pods' keys in proportion to their requests that day
//!   (`pod_run_days`: GPU, core and GiB request x running time), by the largest remainder.
//! - A pod with no value for the key (`queries/pod_key_values.sql`) is `__unattributed__`; a
//!   namespace's share of a spread (idle, shared namespaces) follows its keys' costs.

use std::collections::{BTreeMap, HashMap};

use arrow::array::RecordBatch;
use datafusion::prelude::SessionContext;

use super::compute::{raw, step1};
use super::consts::{R, RAW_PER_UNIT};
use super::model::{Chargeback, NamespaceCharge, Quantities};
use crate::config::CostBasis;
use crate::domain::charge_by::ChargeBy;
use crate::domain::money::split;
use crate::domain::units::{UNALLOCATED, UNATTRIBUTED, UNMEASURED};
use crate::domain::window::Window;
use crate::engine::{run_query, str_param};
use crate::queries::Queries;
use crate::report::columns::{decimals, floats, ints, millis, strs, window_params};
use crate::report::{ReportError, Result};

/// Separates the namespace from the pod in the per-pod step 1's namespace column.
const POD_SEP: char = '\u{1f}';

fn shape(detail: impl Into<String>) -> ReportError {
    ReportError::Shape { report: R, detail: detail.into() }
}

/// A namespace's quantities split between its pods' keys.
#[derive(Debug, Default)]
pub struct Attribution {
    /// Per (cluster, namespace): each key's part; the parts sum to the namespace's quantities.
    pub per_namespace: BTreeMap<(String, String), BTreeMap<String, Quantities>>,
    /// The same per detail row (cluster, namespace, GPU model, MIG profile, date): the lines by
    /// key of the FOCUS export and chargeback-models. Summed over rows they are `per_namespace`.
    pub per_row: BTreeMap<DetailAt, BTreeMap<String, Quantities>>,
    /// Pods (by cluster, namespace and name) that held a GPU or ran in the window, with a value
    /// of the key and without one.
    pub pods_keyed: usize,
    pub pods_unkeyed: usize,
    /// Pods whose workload was inferred, by how (`pod_owners.inferred`).
    pub inferred: BTreeMap<String, usize>,
}

/// A day's pods' requests per key: GPU, CPU core and memory GiB request x running time.
type Requests = BTreeMap<String, [i128; 3]>;

/// `by`'s name and key as `queries/pod_key_values.sql` takes them.
fn key_params(by: &ChargeBy) -> Result<(&'static str, String)> {
    Ok(match by {
        ChargeBy::Workload => ("workload", String::new()),
        ChargeBy::Queue => ("queue", String::new()),
        ChargeBy::ClusterQueue => ("cluster_queue", String::new()),
        ChargeBy::Cohort => ("cohort", String::new()),
        ChargeBy::Label(k) => ("label", k.clone()),
        ChargeBy::Annotation(k) => ("annotation", k.clone()),
        other => return Err(shape(format!("--by {other} is not a key of each pod"))),
    })
}

/// Each GPU pod's value of a key of its own (`queries/pod_key_values.sql`), by (cluster, namespace,
/// pod); a pod with none is absent. By workload, how a pod's workload was inferred where it was.
#[derive(Debug, Default)]
pub struct PodValues {
    pub values: HashMap<(String, String, String), String>,
    pub inferred: HashMap<(String, String, String), String>,
}

/// The pods' values of `by` (a key of each pod) in `window`.
pub async fn pod_values(ctx: &SessionContext, queries: &Queries, window: &Window, by: &ChargeBy) -> Result<PodValues> {
    let (kind, key) = key_params(by)?;
    let mut params = window_params(window);
    params.extend([str_param(kind), str_param(key)]);
    let mut out = PodValues::default();
    for b in &run_query(ctx, "pod_key_values", &queries.get("pod_key_values")?, params).await? {
        let (c, ns, pod, value, inferred) =
            (strs(R, b, "cluster")?, strs(R, b, "namespace")?, strs(R, b, "pod")?, strs(R, b, "value")?, strs(R, b, "inferred")?);
        for i in 0..b.num_rows() {
            if let (Some(c), Some(ns), Some(pod), Some(v)) = (c[i].clone(), ns[i].clone(), pod[i].clone(), value[i].clone()) {
                if let Some(why) = inferred[i].clone() {
                    out.inferred.insert((c.clone(), ns.clone(), pod.clone()), why);
                }
                out.values.insert((c, ns, pod), v);
            }
        }
    }
    Ok(out)
}

/// Splits `cb`'s namespace rows between the pods' values of `by`.
pub async fn compute(ctx: &SessionContext, queries: &Queries, window: &Window, cb: &Chargeback, by: &ChargeBy) -> Result<Attribution> {
    let t = std::time::Instant::now();
    let PodValues { values: keys, inferred: inferred_of } = pod_values(ctx, queries, window, by).await?;
    let mut seen: HashMap<(String, String, String), bool> = HashMap::new();
    let key_of = |seen: &mut HashMap<(String, String, String), bool>, c: &str, ns: &str, pod: &str| -> String {
        let id = (c.to_string(), ns.to_string(), pod.to_string());
        let v = keys.get(&id).cloned();
        seen.insert(id, v.is_some());
        v.unwrap_or_else(|| UNATTRIBUTED.to_string())
    };

    // Measured: per detail row's (cluster, namespace, model, profile, date), each key's priced part.
    let measured = measured_parts(ctx, queries, window, &mut |c, ns, pod| key_of(&mut seen, c, ns, pod)).await?;
    tracing::debug!("chargeback by {by}: pods' measured GPU time priced at {:.2}s", t.elapsed().as_secs_f64());
    // Requests: per (cluster, namespace, date), each key's requests.
    let mut requests: BTreeMap<(String, String, String), Requests> = BTreeMap::new();
    for b in &run_query(ctx, "pod_run_days", &queries.get("pod_run_days")?, window_params(window)).await? {
        let (c, ns, pod, date) = (strs(R, b, "cluster")?, strs(R, b, "namespace")?, strs(R, b, "pod")?, strs(R, b, "date")?);
        let (gpu, cpu, mem) = (floats(R, b, "gpu_request")?, floats(R, b, "cpu_request")?, ints(R, b, "mem_request_bytes")?);
        let (from, to) = (millis(R, b, "run_from")?, millis(R, b, "run_to")?);
        for i in 0..b.num_rows() {
            let (Some(c), Some(ns), Some(pod), Some(date)) = (c[i].as_deref(), ns[i].as_deref(), pod[i].as_deref(), date[i].clone()) else { continue };
            let (Some(f), Some(t)) = (from[i], to[i]) else { continue };
            let ms = i128::from((t - f).max(0));
            // Requests in thousandths (of a GPU, a core, a GiB) x ms: integers, exact enough to weigh.
            let milli = |v: f64| (v * 1000.0).round().max(0.0) as i128;
            let w = [milli(gpu[i].unwrap_or(0.0)) * ms, milli(cpu[i].unwrap_or(0.0)) * ms, milli(mem[i].unwrap_or(0) as f64 / 1_073_741_824.0) * ms];
            let k = key_of(&mut seen, c, ns, pod);
            let e = requests.entry((c.to_string(), ns.to_string(), date)).or_default().entry(k).or_default();
            for j in 0..3 {
                e[j] += w[j];
            }
        }
    }

    let mut out = Attribution::default();
    for d in &cb.detail {
        if d.namespace == UNALLOCATED || d.namespace == UNMEASURED {
            continue;
        }
        let at = (d.cluster.clone(), d.namespace.clone(), d.gpu_model.clone(), d.mig_profile.clone(), d.date.clone());
        let parts = out.per_row.entry(at.clone()).or_default();
        let mut rest = d.q.clone();
        if let Some(m) = measured.get(&at) {
            for (k, q) in m {
                parts.entry(k.clone()).or_default().add(q);
                rest = minus(&rest, q);
            }
        }
        if let Some(field) = negative_field(&rest) {
            return Err(shape(format!(
                "the pods of {} in cluster {} on {} ({} {}) measured more {field} than the namespace's row holds",
                d.namespace,
                d.cluster,
                d.date,
                d.gpu_model.as_deref().unwrap_or("no GPU"),
                d.mig_profile.as_deref().unwrap_or("")
            )));
        }
        let asked = requests.get(&(d.cluster.clone(), d.namespace.clone(), d.date.clone()));
        for (k, q) in split_by_requests(&rest, asked) {
            parts.entry(k).or_default().add(&q);
        }
    }
    for ((c, ns, ..), parts) in &out.per_row {
        let whole = out.per_namespace.entry((c.clone(), ns.clone())).or_default();
        for (k, q) in parts {
            whole.entry(k.clone()).or_default().add(q);
        }
    }
    // The split must give back every namespace's quantities to the unit; a row that does not is
    // a bug, and no report is made of it.
    let mut whole: BTreeMap<(String, String), Quantities> = BTreeMap::new();
    for d in cb.detail.iter().filter(|d| d.namespace != UNALLOCATED && d.namespace != UNMEASURED) {
        whole.entry((d.cluster.clone(), d.namespace.clone())).or_default().add(&d.q);
    }
    let broken: Vec<String> = whole
        .iter()
        .filter(|(k, q)| {
            let mut sum = Quantities::default();
            out.per_namespace.get(*k).into_iter().flat_map(|p| p.values()).for_each(|p| sum.add(p));
            sum != **q
        })
        .map(|((c, ns), _)| format!("{ns} in cluster {c}"))
        .collect();
    if !broken.is_empty() {
        return Err(shape(format!("the rows by {by} do not add up to these namespaces' rows: {}", broken.join(", "))));
    }
    out.pods_keyed = seen.values().filter(|k| **k).count();
    out.pods_unkeyed = seen.len() - out.pods_keyed;
    for (id, why) in inferred_of {
        if seen.contains_key(&id) {
            *out.inferred.entry(why).or_default() += 1;
        }
    }
    tracing::info!(
        "chargeback by {by}: {} pods with a value, {} without ({UNATTRIBUTED}) in {:.2}s",
        out.pods_keyed,
        out.pods_unkeyed,
        t.elapsed().as_secs_f64()
    );
    Ok(out)
}

/// A detail row's identity: cluster, namespace, GPU model, MIG profile, date.
pub type DetailAt = (String, String, Option<String>, Option<String>, String);
type MeasuredAt = DetailAt;

/// The per-pod step 1, priced: per (cluster, namespace, model, profile, date), each key's part.
async fn measured_parts(
    ctx: &SessionContext,
    queries: &Queries,
    window: &Window,
    key_of: &mut dyn FnMut(&str, &str, &str) -> String,
) -> Result<BTreeMap<MeasuredAt, BTreeMap<String, Quantities>>> {
    // Priced only: the conservation line is the namespace chargeback's.
    let (_, priced, _) = step1(ctx, queries, window, ("pod_buckets", pod_buckets), false).await?;
    let mut out: BTreeMap<MeasuredAt, BTreeMap<String, Quantities>> = BTreeMap::new();
    for b in &priced {
        let (c, ns, model, profile, date) =
            (strs(R, b, "cluster")?, strs(R, b, "namespace")?, strs(R, b, "gpu_model")?, strs(R, b, "mig_profile")?, strs(R, b, "date")?);
        let int = |name| ints(R, b, name);
        let (gpu_us, energy, util, util_known, unpriced) =
            (int("gpu_us")?, int("energy_mj")?, int("util_gpu_us")?, int("util_known_gpu_us")?, int("unpriced_gpu_us")?);
        let dec = |name| decimals(R, b, name);
        let (gpu_cost, power, carbon) = (dec("gpu_cost_us")?, dec("power_cost_mj")?, dec("carbon_mg")?);
        for i in 0..b.num_rows() {
            let (Some(c), Some(composite), Some(date)) = (c[i].clone(), ns[i].as_deref(), date[i].clone()) else { continue };
            let Some((ns, pod)) = composite.split_once(POD_SEP) else { continue };
            if ns == UNMEASURED || ns == UNALLOCATED {
                continue;
            }
            let k = key_of(&c, ns, pod);
            let q = Quantities {
                gpu_us: gpu_us[i].unwrap_or(0),
                energy_mj: energy[i].unwrap_or(0),
                util_gpu_us: util[i].unwrap_or(0),
                util_known_gpu_us: util_known[i].unwrap_or(0),
                gpu_cost: raw(gpu_cost[i])?,
                power_cost: raw(power[i])?,
                carbon_mg: raw(carbon[i])?,
                unpriced_gpu_us: unpriced[i].unwrap_or(0),
                ..Quantities::default()
            };
            out.entry((c, ns.to_string(), model[i].clone(), profile[i].clone(), date)).or_default().entry(k).or_default().add(&q);
        }
    }
    Ok(out)
}

/// The window's `pod_buckets` as `gpu_buckets`' rows, the namespace column carrying
/// `<namespace>` U+001F `<pod>`: priced by step 1 as a namespace's rows are. Rows no pod's
/// namespace held (unallocated GPU time) are left out.
fn pod_buckets(lake: &crate::lake::Lake, window: &Window, threads: usize) -> Result<crate::lake::passes::gpu_buckets::GpuBuckets> {
    let mut sums = crate::lake::passes::gpu_buckets::scan_pods(lake, window, threads)?;
    sums.batches =
        sums.batches.iter().map(pods_as_namespaces).collect::<std::result::Result<_, _>>().map_err(|source| ReportError::Arrow { report: R, source })?;
    Ok(sums)
}

/// A `pod_buckets` batch as `gpu_buckets`' schema: `namespace` U+001F `pod` in the namespace
/// column (a dictionary of the pairs present), rows with a null namespace dropped.
fn pods_as_namespaces(b: &RecordBatch) -> std::result::Result<RecordBatch, arrow::error::ArrowError> {
    use arrow::array::{Array, AsArray, DictionaryArray, Int32Array, StringArray};
    use arrow::datatypes::Int32Type;
    let label = |name: &str| -> std::result::Result<&DictionaryArray<Int32Type>, arrow::error::ArrowError> {
        b.column_by_name(name)
            .and_then(|c| c.as_dictionary_opt::<Int32Type>())
            .ok_or_else(|| arrow::error::ArrowError::SchemaError(format!("pod_buckets without the label {name}")))
    };
    let (ns, pod) = (label("namespace")?, label("pod")?);
    let (ns_names, pod_names) = (ns.values().as_string::<i32>(), pod.values().as_string::<i32>());
    let mut pairs: HashMap<(i32, i32), i32> = HashMap::new();
    let mut names: Vec<String> = Vec::new();
    let mut keep: Vec<u32> = Vec::new();
    let mut keys: Vec<i32> = Vec::new();
    for i in 0..b.num_rows() {
        if ns.is_null(i) {
            continue;
        }
        let (n, p) = (ns.keys().value(i), if pod.is_null(i) { -1 } else { pod.keys().value(i) });
        let key = *pairs.entry((n, p)).or_insert_with(|| {
            let pod_name = if p < 0 { "" } else { pod_names.value(p as usize) };
            names.push(format!("{}{POD_SEP}{pod_name}", ns_names.value(n as usize)));
            names.len() as i32 - 1
        });
        keep.push(i as u32);
        keys.push(key);
    }
    let kept = arrow::compute::take_record_batch(b, &arrow::array::UInt32Array::from(keep))?;
    let combined: arrow::array::ArrayRef =
        std::sync::Arc::new(DictionaryArray::<Int32Type>::try_new(Int32Array::from(keys), std::sync::Arc::new(StringArray::from(names)))?);
    let target = crate::lake::passes::gpu_buckets::schema();
    let columns = target
        .fields()
        .iter()
        .map(|f| match f.name().as_str() {
            "namespace" => Ok(combined.clone()),
            name => kept.column_by_name(name).cloned().ok_or_else(|| arrow::error::ArrowError::SchemaError(format!("pod_buckets without {name}"))),
        })
        .collect::<std::result::Result<Vec<_>, _>>()?;
    RecordBatch::try_new(target, columns)
}

fn minus(a: &Quantities, b: &Quantities) -> Quantities {
    Quantities {
        gpu_us: a.gpu_us - b.gpu_us,
        energy_mj: a.energy_mj - b.energy_mj,
        util_gpu_us: a.util_gpu_us - b.util_gpu_us,
        util_known_gpu_us: a.util_known_gpu_us - b.util_known_gpu_us,
        gpu_cost: a.gpu_cost - b.gpu_cost,
        power_cost: a.power_cost - b.power_cost,
        carbon_mg: a.carbon_mg - b.carbon_mg,
        unpriced_gpu_us: a.unpriced_gpu_us - b.unpriced_gpu_us,
        request_based_gpu_us: a.request_based_gpu_us - b.request_based_gpu_us,
        core_us: a.core_us - b.core_us,
        cpu_cost: a.cpu_cost - b.cpu_cost,
        gib_us: a.gib_us - b.gib_us,
        memory_cost: a.memory_cost - b.memory_cost,
    }
}

/// The first quantity of `q` below zero, by name.
fn negative_field(q: &Quantities) -> Option<&'static str> {
    let ints = [("GPU time", q.gpu_us), ("energy", q.energy_mj), ("utilised GPU time", q.util_gpu_us), ("unpriced GPU time", q.unpriced_gpu_us)];
    let money = [("GPU cost", q.gpu_cost), ("power cost", q.power_cost), ("carbon", q.carbon_mg)];
    ints.iter().find(|(_, v)| *v < 0).map(|(n, _)| *n).or_else(|| money.iter().find(|(_, v)| *v < 0).map(|(n, _)| *n))
}

/// `rest` split between the keys of `asked`: its GPU quantities by their GPU requests, CPU by
/// their core requests, memory by their memory requests; a part no key asked for (or with no
/// pods that day) is `__unattributed__`'s. Exact: the parts sum to `rest`.
fn split_by_requests(rest: &Quantities, asked: Option<&Requests>) -> Vec<(String, Quantities)> {
    if *rest == Quantities::default() {
        return Vec::new();
    }
    let empty = Requests::new();
    let asked = asked.unwrap_or(&empty);
    let names: Vec<&String> = asked.keys().collect();
    let mut parts: Vec<Quantities> = vec![Quantities::default(); names.len()];
    let mut unattributed = Quantities::default();
    // Each field with the request (0 GPU, 1 CPU, 2 memory) that weighs it.
    let mut each = |which: usize, amount: i128, set: &dyn Fn(&mut Quantities, i128)| {
        if amount == 0 {
            return;
        }
        let weights: Vec<i128> = asked.values().map(|w| w[which]).collect();
        if weights.iter().sum::<i128>() <= 0 {
            set(&mut unattributed, amount);
            return;
        }
        for (p, v) in parts.iter_mut().zip(split(amount, &weights)) {
            set(p, v);
        }
    };
    each(0, rest.gpu_us.into(), &|q, v| q.gpu_us = v as i64);
    each(0, rest.energy_mj.into(), &|q, v| q.energy_mj = v as i64);
    each(0, rest.util_gpu_us.into(), &|q, v| q.util_gpu_us = v as i64);
    each(0, rest.util_known_gpu_us.into(), &|q, v| q.util_known_gpu_us = v as i64);
    each(0, rest.gpu_cost, &|q, v| q.gpu_cost = v);
    each(0, rest.power_cost, &|q, v| q.power_cost = v);
    each(0, rest.carbon_mg, &|q, v| q.carbon_mg = v);
    each(0, rest.unpriced_gpu_us.into(), &|q, v| q.unpriced_gpu_us = v as i64);
    each(0, rest.request_based_gpu_us.into(), &|q, v| q.request_based_gpu_us = v as i64);
    each(1, rest.core_us.into(), &|q, v| q.core_us = v as i64);
    each(1, rest.cpu_cost, &|q, v| q.cpu_cost = v);
    each(2, rest.gib_us.into(), &|q, v| q.gib_us = v as i64);
    each(2, rest.memory_cost, &|q, v| q.memory_cost = v);
    let mut out: Vec<(String, Quantities)> = names.into_iter().cloned().zip(parts).filter(|(_, q)| *q != Quantities::default()).collect();
    if unattributed != Quantities::default() {
        out.push((UNATTRIBUTED.to_string(), unattributed));
    }
    out
}

impl Attribution {
    /// Namespace row `r`'s parts by key: its quantities and its spread (split by the keys'
    /// costs on `basis`, else their GPU time). Sums to `r` exactly.
    pub fn parts(&self, r: &NamespaceCharge, basis: CostBasis) -> Vec<(String, Quantities, i128)> {
        let Some(parts) = self.per_namespace.get(&(r.cluster.clone(), r.namespace.clone())).filter(|p| !p.is_empty()) else {
            return vec![(UNATTRIBUTED.to_string(), r.q.clone(), r.spread)];
        };
        // In cents: `split` needs weights whose products with a remainder fit in i128.
        let mut weights: Vec<i128> = parts.values().map(|q| q.basis_cost(basis).max(0) / (RAW_PER_UNIT / 100)).collect();
        if weights.iter().sum::<i128>() == 0 {
            weights = parts.values().map(|q| i128::from(q.gpu_us.max(0))).collect();
        }
        if weights.iter().sum::<i128>() == 0 {
            weights = vec![1; parts.len()];
        }
        let spreads = if r.spread == 0 { vec![0; parts.len()] } else { split(r.spread, &weights) };
        parts.iter().zip(spreads).map(|((k, q), s)| (k.clone(), q.clone(), s)).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rest_follows_the_requests_and_adds_up() {
        let rest = Quantities { gpu_us: 1_000_001, energy_mj: 7, core_us: 10, cpu_cost: 999, gib_us: 5, memory_cost: 3, ..Quantities::default() };
        let mut asked = Requests::new();
        asked.insert("Job/a".into(), [3, 1, 0]);
        asked.insert("Job/b".into(), [1, 1, 0]);
        let parts = split_by_requests(&rest, Some(&asked));
        let mut sum = Quantities::default();
        parts.iter().for_each(|(_, q)| sum.add(q));
        assert_eq!(rest, sum);
        let a = &parts.iter().find(|(k, _)| k == "Job/a").unwrap().1;
        assert_eq!((750_001, 5, 500), (a.gpu_us, a.core_us, a.cpu_cost));
        // Nobody asked for memory: it is unattributed, never dropped.
        let u = &parts.iter().find(|(k, _)| k == UNATTRIBUTED).unwrap().1;
        assert_eq!((5, 3, 0), (u.gib_us, u.memory_cost, u.gpu_us));
    }

    #[test]
    fn a_spread_follows_the_keys_costs() {
        let mut a = Attribution::default();
        let part = |cents: i128| Quantities { gpu_cost: cents * RAW_PER_UNIT / 100, gpu_us: 1, ..Quantities::default() };
        a.per_namespace.insert(("c".into(), "ns".into()), BTreeMap::from([("x".to_string(), part(3)), ("y".to_string(), part(1))]));
        let r = NamespaceCharge { cluster: "c".into(), namespace: "ns".into(), owner: Default::default(), q: part(4), spread: -101 };
        let parts = a.parts(&r, CostBasis::Cloud);
        assert_eq!(vec![-76, -25], parts.iter().map(|p| p.2).collect::<Vec<_>>());
        // A month's money in raw units (1e21 a unit) spreads exactly, without overflow.
        let big = |units: i128| Quantities { gpu_cost: units * RAW_PER_UNIT + 7, gpu_us: 1, ..Quantities::default() };
        a.per_namespace.insert(("c".into(), "big".into()), BTreeMap::from([("x".to_string(), big(900_000)), ("y".to_string(), big(1_234_567))]));
        let heavy = NamespaceCharge { namespace: "big".into(), spread: -(250_000 * RAW_PER_UNIT + 3), ..r.clone() };
        let parts = a.parts(&heavy, CostBasis::Cloud);
        assert_eq!(heavy.spread, parts.iter().map(|p| p.2).sum::<i128>());
        let other = NamespaceCharge { namespace: "none".into(), ..r };
        assert_eq!(UNATTRIBUTED, a.parts(&other, CostBasis::Cloud)[0].0);
    }
}
