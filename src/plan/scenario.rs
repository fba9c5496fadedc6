//! Scenarios: what a plan changes about the recorded month, from a TOML file. Every key is
//! checked; an error names the scenario and the key.
//!
//! ```toml
//! [[scenario]]
//! name = "25% of the pool to team-llm"
//! preemption = true                      # default: on, as recorded
//! [scenario.quotas]                      # namespace or team -> whole GPUs, or "NN%" of the pool
//! team-llm = "25%"
//! data-platform = 12                     # a team: one quota its namespaces share
//! [scenario.model_quotas.team-vision]    # namespace -> GPU model -> whole GPUs on that model
//! "NVIDIA H100 80GB HBM3" = 8
//! [scenario.priority]                    # namespace -> priority class
//! team-batch = "low"
//! [scenario.affinity]                    # namespace -> the GPU models it may run on
//! team-recsys = ["NVIDIA A100-SXM4-80GB"]
//! [[scenario.add_nodes]]                 # more nodes of a model (GPUs per node as the pool's)
//! model = "NVIDIA H100 80GB HBM3"
//! count = 2
//! [[scenario.remove_nodes]]              # by name, or the last `count` of a model
//! model = "NVIDIA L4"
//! count = 1
//! [[scenario.mig]]                       # a node's MIG layout, per GPU ([] = whole GPUs)
//! nodes = ["gpu-node-05"]
//! layout = ["3g.40gb", "4g.40gb"]
//! [[scenario.cohorts]]                   # Kueue cohort: members borrow unused nominal quota
//! name = "research-pool"
//! members = ["team-research", "team-batch"]
//! borrowing_limit = 8                    # GPUs over its nominal quota a member may borrow
//! [[scenario.windows]]                   # a namespace may start pods only in these hours
//! namespace = "team-batch"
//! hours = "20:00-07:00"
//! days = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
//! tz = "UTC"
//!
//! [goals]                                # what `--optimize` aims for
//! max_p95_wait_minutes = 10              # for the pods of these classes
//! fast_classes = ["high"]
//! guaranteed = { team-llm = "25%" }      # quotas the search may not go under
//! max_quota_total = "136%"               # default: the recorded quotas' total
//! ```

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use super::model::{Cohort, NodeSpec, Setup, SharedQuota, TimeWindow, UnitGroup, GPU_RESOURCE};
use crate::domain::mig::mig_share;
use crate::domain::tariff_time::{parse_days, parse_hours, parse_timezone};

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("reading scenario file {path}")]
    Read { path: String, source: std::io::Error },
    #[error("scenario file {path}")]
    Parse { path: String, source: toml::de::Error },
    #[error("scenario file {path}: {key}: {message}")]
    Invalid { path: String, key: String, message: String },
}

/// A GPU count, or a share of the pool as "25%".
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(untagged)]
pub enum Amount {
    Gpus(u32),
    Share(String),
}

impl Amount {
    /// Whole GPUs, a share rounded to the nearest GPU of `pool_gpus`.
    pub fn gpus(&self, pool_gpus: f64) -> Result<u32, String> {
        match self {
            Amount::Gpus(n) => Ok(*n),
            Amount::Share(s) => {
                let pct: f64 = s
                    .trim()
                    .strip_suffix('%')
                    .and_then(|v| v.trim().parse().ok())
                    .ok_or_else(|| format!("must be a number of GPUs or a share such as \"25%\", got {s:?}"))?;
                if !(pct.is_finite() && (0.0..=1000.0).contains(&pct)) {
                    return Err(format!("a share must be between 0% and 1000%, got {s:?}"));
                }
                Ok((pct / 100.0 * pool_gpus).round() as u32)
            }
        }
    }
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScenarioFile {
    #[serde(default)]
    pub scenario: Vec<ScenarioSpec>,
    #[serde(default)]
    pub goals: Option<Goals>,
}

#[derive(Debug, Clone, Deserialize, Default, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ScenarioSpec {
    pub name: String,
    #[serde(default)]
    pub preemption: Option<bool>,
    #[serde(default)]
    pub quotas: BTreeMap<String, Amount>,
    #[serde(default)]
    pub model_quotas: BTreeMap<String, BTreeMap<String, Amount>>,
    #[serde(default)]
    pub priority: BTreeMap<String, String>,
    /// namespace -> the GPU models its whole-GPU pods may run on (instead of the inferred).
    #[serde(default)]
    pub affinity: BTreeMap<String, Vec<String>>,
    #[serde(default)]
    pub add_nodes: Vec<AddNodes>,
    #[serde(default)]
    pub remove_nodes: Vec<RemoveNodes>,
    #[serde(default)]
    pub mig: Vec<MigLayout>,
    #[serde(default)]
    pub cohorts: Vec<CohortSpec>,
    #[serde(default)]
    pub windows: Vec<WindowSpec>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct AddNodes {
    pub model: String,
    #[serde(default = "one")]
    pub count: u32,
    /// GPUs per node; default: as the pool's nodes of the model (else 8).
    #[serde(default)]
    pub gpus: Option<u32>,
    /// MIG profiles per GPU; default none (whole GPUs).
    #[serde(default)]
    pub mig: Vec<String>,
}

fn one() -> u32 {
    1
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RemoveNodes {
    #[serde(default)]
    pub names: Vec<String>,
    #[serde(default)]
    pub model: Option<String>,
    #[serde(default)]
    pub count: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct MigLayout {
    #[serde(default)]
    pub nodes: Vec<String>,
    #[serde(default)]
    pub model: Option<String>,
    pub layout: Vec<String>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct CohortSpec {
    pub name: String,
    pub members: Vec<String>,
    #[serde(default)]
    pub borrowing_limit: Option<u32>,
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WindowSpec {
    pub namespace: String,
    pub hours: String,
    #[serde(default = "all_days")]
    pub days: Vec<String>,
    #[serde(default = "utc")]
    pub tz: String,
}

fn all_days() -> Vec<String> {
    ["mon", "tue", "wed", "thu", "fri", "sat", "sun"].map(String::from).to_vec()
}

fn utc() -> String {
    "UTC".into()
}

#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Goals {
    #[serde(default = "ten")]
    pub max_p95_wait_minutes: f64,
    #[serde(default = "high")]
    pub fast_classes: Vec<String>,
    #[serde(default)]
    pub guaranteed: BTreeMap<String, Amount>,
    #[serde(default)]
    pub max_quota_total: Option<Amount>,
}

impl Default for Goals {
    fn default() -> Self {
        Goals { max_p95_wait_minutes: 10.0, fast_classes: high(), guaranteed: BTreeMap::new(), max_quota_total: None }
    }
}

fn ten() -> f64 {
    10.0
}

fn high() -> Vec<String> {
    vec!["high".into()]
}

pub fn load(path: &Path) -> Result<ScenarioFile, ScenarioError> {
    let p = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read { path: p.clone(), source })?;
    parse(&text, &p)
}

pub fn parse(text: &str, origin: &str) -> Result<ScenarioFile, ScenarioError> {
    let file: ScenarioFile = toml::from_str(text).map_err(|source| ScenarioError::Parse { path: origin.to_string(), source })?;
    let mut names = std::collections::BTreeSet::new();
    for (i, s) in file.scenario.iter().enumerate() {
        if s.name.trim().is_empty() || s.name == "baseline" || !names.insert(s.name.clone()) {
            return Err(ScenarioError::Invalid {
                path: origin.to_string(),
                key: format!("scenario[{i}].name"),
                message: format!("must be a non-empty name of its own, not \"baseline\" (got {:?})", s.name),
            });
        }
    }
    Ok(file)
}

/// The pool's GPUs: every physical GPU once (MIG instances and replicas by their share).
pub fn pool_gpus(setup: &Setup) -> f64 {
    setup.nodes.iter().flat_map(|n| n.units.iter()).map(|g| g.count as f64 * g.share).sum()
}

/// `base` with the scenario's changes; `teams` maps a team to its namespaces.
pub fn apply(base: &Setup, spec: &ScenarioSpec, index: usize, teams: &BTreeMap<String, Vec<usize>>, origin: &str) -> Result<Setup, ScenarioError> {
    let err =
        |key: String, message: String| ScenarioError::Invalid { path: origin.to_string(), key: format!("scenario[{index}] ({}).{key}", spec.name), message };
    let mut s = base.clone();
    let ns_of = |s: &Setup, name: &str| s.namespaces.iter().position(|n| n == name);
    let model_of = |s: &Setup, name: &str| s.models.iter().position(|m| m == name);

    // The pool first: shares of it are of the scenario's pool.
    for (k, r) in spec.remove_nodes.iter().enumerate() {
        let key = format!("remove_nodes[{k}]");
        for name in &r.names {
            let before = s.nodes.len();
            s.nodes.retain(|n| n.name != *name);
            if s.nodes.len() == before {
                return Err(err(format!("{key}.names"), format!("no node {name:?} in the pool")));
            }
        }
        if let Some(model) = &r.model {
            let m = model_of(&s, model).ok_or_else(|| err(format!("{key}.model"), format!("no GPU model {model:?} in the pool ({})", s.models.join(", "))))?;
            let count = r.count.ok_or_else(|| err(format!("{key}.count"), "how many nodes of the model to remove".into()))?;
            for _ in 0..count {
                let last = s
                    .nodes
                    .iter()
                    .rposition(|n| n.model == m)
                    .ok_or_else(|| err(format!("{key}.count"), format!("fewer than {count} nodes of {model:?} in the pool")))?;
                s.nodes.remove(last);
            }
        } else if r.names.is_empty() {
            return Err(err(key, "name the nodes (names = [...]) or a model and a count".into()));
        }
    }
    for (k, m) in spec.mig.iter().enumerate() {
        let key = format!("mig[{k}]");
        let mut targets: Vec<usize> = Vec::new();
        for name in &m.nodes {
            targets.push(s.nodes.iter().position(|n| n.name == *name).ok_or_else(|| err(format!("{key}.nodes"), format!("no node {name:?} in the pool")))?);
        }
        if let Some(model) = &m.model {
            let mi = model_of(&s, model).ok_or_else(|| err(format!("{key}.model"), format!("no GPU model {model:?} in the pool")))?;
            targets.extend(s.nodes.iter().enumerate().filter(|(_, n)| n.model == mi).map(|(i, _)| i));
        }
        if targets.is_empty() {
            return Err(err(key, "name the nodes (nodes = [...]) or a model".into()));
        }
        for t in targets {
            let gpus = physical_gpus(&s.nodes[t]);
            let model = s.models[s.nodes[t].model].clone();
            let units = layout_units(&mut s, gpus, &m.layout, &model).map_err(|e| err(format!("{key}.layout"), e))?;
            s.nodes[t].units = units;
        }
    }
    for (k, a) in spec.add_nodes.iter().enumerate() {
        let key = format!("add_nodes[{k}]");
        let m = match model_of(&s, &a.model) {
            Some(m) => m,
            None => {
                s.models.push(a.model.clone());
                for row in s.affinity.iter_mut() {
                    row.push(false);
                }
                for row in s.model_quota.iter_mut() {
                    row.push(None);
                }
                s.models.len() - 1
            }
        };
        let gpus = a.gpus.unwrap_or_else(|| s.nodes.iter().find(|n| n.model == m).map_or(8, |n| physical_gpus(n).round() as u32));
        if gpus == 0 || a.count == 0 {
            return Err(err(key, "count and gpus must be at least 1".into()));
        }
        let units = layout_units(&mut s, gpus as f64, &a.mig, &a.model).map_err(|e| err(format!("{key}.mig"), e))?;
        for i in 0..a.count {
            let name = format!("planned-{}-{}", k + 1, i + 1);
            s.nodes.push(NodeSpec { name, model: m, units: units.clone(), available_from: s.from, available_to: s.to });
        }
    }
    let pool = pool_gpus(&s);

    for (key, amount) in &spec.quotas {
        let gpus = amount.gpus(pool).map_err(|e| err(format!("quotas.{key}"), e))?;
        if let Some(i) = ns_of(&s, key) {
            s.quota[i] = Some(gpus);
        } else if let Some(members) = teams.get(key) {
            s.shared_quotas.push(SharedQuota { name: key.clone(), members: members.clone(), hard: gpus });
        } else {
            return Err(err(format!("quotas.{key}"), format!("no namespace or team {key:?} in the month (namespaces: {})", s.namespaces.join(", "))));
        }
    }
    for (ns, per_model) in &spec.model_quotas {
        let i = ns_of(&s, ns).ok_or_else(|| err(format!("model_quotas.{ns}"), format!("no namespace {ns:?} in the month")))?;
        for (model, amount) in per_model {
            let m = model_of(&s, model)
                .ok_or_else(|| err(format!("model_quotas.{ns}.{model}"), format!("no GPU model {model:?} in the pool ({})", s.models.join(", "))))?;
            s.model_quota[i][m] = Some(amount.gpus(pool).map_err(|e| err(format!("model_quotas.{ns}.{model}"), e))?);
        }
    }
    for (ns, class) in &spec.priority {
        let i = ns_of(&s, ns).ok_or_else(|| err(format!("priority.{ns}"), format!("no namespace {ns:?} in the month")))?;
        let c = s.classes.iter().position(|c| c.name == *class).ok_or_else(|| {
            err(
                format!("priority.{ns}"),
                format!(
                    "no priority class {class:?} (known: {}; add it to [plan.priority_classes])",
                    s.classes.iter().map(|c| c.name.as_str()).collect::<Vec<_>>().join(", ")
                ),
            )
        })?;
        s.class_override[i] = Some(c);
    }
    for (ns, models) in &spec.affinity {
        let i = ns_of(&s, ns).ok_or_else(|| err(format!("affinity.{ns}"), format!("no namespace {ns:?} in the month")))?;
        let mut allowed = vec![false; s.models.len()];
        for model in models {
            let m =
                model_of(&s, model).ok_or_else(|| err(format!("affinity.{ns}"), format!("no GPU model {model:?} in the pool ({})", s.models.join(", "))))?;
            allowed[m] = true;
        }
        s.affinity[i] = allowed;
    }
    if let Some(p) = spec.preemption {
        s.preemption = p;
    }
    for (k, c) in spec.cohorts.iter().enumerate() {
        let mut members = Vec::new();
        for m in &c.members {
            let i = ns_of(&s, m).ok_or_else(|| err(format!("cohorts[{k}].members"), format!("no namespace {m:?} in the month")))?;
            if s.quota[i].is_none() {
                return Err(err(format!("cohorts[{k}].members"), format!("{m:?} has no quota to lend or borrow against: give it one under quotas")));
            }
            if s.cohorts.iter().any(|c| c.members.iter().any(|x| x.0 == i)) {
                return Err(err(format!("cohorts[{k}].members"), format!("{m:?} is already in a cohort")));
            }
            members.push((i, c.borrowing_limit));
        }
        s.cohorts.push(Cohort { name: c.name.clone(), members });
    }
    for (k, w) in spec.windows.iter().enumerate() {
        let key = format!("windows[{k}]");
        let i = ns_of(&s, &w.namespace).ok_or_else(|| err(format!("{key}.namespace"), format!("no namespace {:?} in the month", w.namespace)))?;
        let (start_min, end_min) = parse_hours(&w.hours).map_err(|e| err(format!("{key}.hours"), e))?;
        let days = parse_days(&w.days).map_err(|e| err(format!("{key}.days"), e))?;
        let tz = parse_timezone(&w.tz).map_err(|e| err(format!("{key}.tz"), e))?;
        s.windows[i] = Some(TimeWindow { tz, start_min, end_min, days });
    }
    Ok(s)
}

fn physical_gpus(n: &NodeSpec) -> f64 {
    n.units.iter().map(|g| g.count as f64 * g.share).sum()
}

/// Units of `gpus` GPUs of `model` carved per `layout` (MIG profiles per GPU; empty: whole).
fn layout_units(s: &mut Setup, gpus: f64, layout: &[String], model: &str) -> Result<Vec<UnitGroup>, String> {
    let gpus = gpus.round() as u32;
    if layout.is_empty() {
        return Ok(vec![UnitGroup { resource: GPU_RESOURCE, count: gpus, share: 1.0 }]);
    }
    let mut total = 0.0;
    let mut units: Vec<UnitGroup> = Vec::new();
    for p in layout {
        if crate::domain::mig::parse_mig_slices(p).is_none() {
            return Err(format!("{p:?} is not a MIG profile such as \"3g.40gb\""));
        }
        let share = mig_share(p, model);
        total += share;
        let name = format!("nvidia.com/mig-{p}");
        let r = match s.resources.iter().position(|x| *x == name) {
            Some(r) => r,
            None => {
                s.resources.push(name);
                s.resources.len() - 1
            }
        };
        match units.iter_mut().find(|g| g.resource == r) {
            Some(g) => g.count += gpus,
            None => units.push(UnitGroup { resource: r, count: gpus, share }),
        }
    }
    if total > 1.0 + 1e-9 {
        return Err(format!("the profiles {layout:?} take more than one GPU ({:.2})", total));
    }
    Ok(units)
}

#[cfg(test)]
mod tests {
    use super::super::model::{Class, NodeSpec, Setup, UnitGroup};
    use super::*;

    fn base() -> Setup {
        let node = |name: &str, model| NodeSpec {
            name: name.into(),
            model,
            units: vec![UnitGroup { resource: 0, count: 8, share: 1.0 }],
            available_from: 0,
            available_to: 3_600_000,
        };
        Setup {
            from: 0,
            to: 3_600_000,
            step: 30_000,
            models: vec!["NVIDIA H100 80GB HBM3".into(), "NVIDIA L4".into()],
            resources: vec!["nvidia.com/gpu".into()],
            nodes: vec![node("h1", 0), node("h2", 0), node("l1", 1), node("l2", 1)],
            classes: vec![Class { name: "low".into(), value: 0, preempts: false }],
            namespaces: vec!["team-a".into(), "team-b".into()],
            class_override: vec![None, None],
            quota: vec![Some(8), None],
            model_quota: vec![vec![None, None], vec![None, None]],
            shared_quotas: vec![],
            cohorts: vec![],
            affinity: vec![vec![true, true], vec![true, true]],
            windows: vec![None, None],
            preemption: true,
        }
    }

    fn applied(text: &str) -> Result<Setup, ScenarioError> {
        let file = parse(text, "s.toml")?;
        let teams = BTreeMap::from([("ads".to_string(), vec![0, 1])]);
        apply(&base(), &file.scenario[0], 0, &teams, "s.toml")
    }

    #[test]
    fn quotas_as_gpus_shares_and_team_quotas() {
        let s = applied("[[scenario]]\nname = \"x\"\n[scenario.quotas]\nteam-a = \"25%\"\nteam-b = 3\nads = 10\n").unwrap();
        assert_eq!(s.quota, vec![Some(8), Some(3)], "25% of 32 GPUs");
        assert_eq!(s.shared_quotas, vec![SharedQuota { name: "ads".into(), members: vec![0, 1], hard: 10 }]);
    }

    #[test]
    fn pool_changes() {
        let s = applied("[[scenario]]\nname = \"x\"\n[[scenario.add_nodes]]\nmodel = \"NVIDIA H100 80GB HBM3\"\ncount = 2\n[[scenario.remove_nodes]]\nmodel = \"NVIDIA L4\"\ncount = 1\n[scenario.quotas]\nteam-a = \"50%\"\n").unwrap();
        assert_eq!(s.nodes.iter().map(|n| n.name.as_str()).collect::<Vec<_>>(), ["h1", "h2", "l1", "planned-1-1", "planned-1-2"]);
        assert_eq!(pool_gpus(&s), 40.0);
        assert_eq!(s.quota[0], Some(20), "a share is of the scenario's pool");
        let m = applied("[[scenario]]\nname = \"x\"\n[[scenario.mig]]\nnodes = [\"h1\"]\nlayout = [\"3g.40gb\", \"4g.40gb\"]\n").unwrap();
        assert_eq!(m.resources, ["nvidia.com/gpu", "nvidia.com/mig-3g.40gb", "nvidia.com/mig-4g.40gb"]);
        assert_eq!(m.nodes[0].units.iter().map(|g| (g.resource, g.count)).collect::<Vec<_>>(), [(1, 8), (2, 8)]);
        assert!((pool_gpus(&m) - 32.0).abs() < 1e-9, "7 of 7 slices per GPU");
    }

    #[test]
    fn errors_name_the_scenario_and_the_key() {
        let e = crate::error_chain::Chain(&applied("[[scenario]]\nname = \"x\"\n[scenario.quotas]\nteam-zz = 4\n").unwrap_err()).to_string();
        assert!(e.contains("scenario[0] (x).quotas.team-zz") && e.contains("no namespace or team"), "{e}");
        let e = crate::error_chain::Chain(&applied("[[scenario]]\nname = \"x\"\n[scenario.quotas]\nteam-a = \"lots\"\n").unwrap_err()).to_string();
        assert!(e.contains("quotas.team-a") && e.contains("\"25%\""), "{e}");
        let e = crate::error_chain::Chain(&parse("[[scenario]]\nname = \"x\"\nquotaz = {}\n", "s.toml").unwrap_err()).to_string();
        assert!(e.contains("s.toml") && e.contains("quotaz"), "{e}");
        let e = crate::error_chain::Chain(
            &applied("[[scenario]]\nname = \"x\"\n[[scenario.mig]]\nnodes = [\"h1\"]\nlayout = [\"4g.40gb\", \"4g.40gb\"]\n").unwrap_err(),
        )
        .to_string();
        assert!(e.contains("mig[0].layout") && e.contains("more than one GPU"), "{e}");
        let e =
            crate::error_chain::Chain(&applied("[[scenario]]\nname = \"x\"\n[[scenario.windows]]\nnamespace = \"team-b\"\nhours = \"25-7\"\n").unwrap_err())
                .to_string();
        assert!(e.contains("windows[0].hours"), "{e}");
        let e = crate::error_chain::Chain(
            &applied("[[scenario]]\nname = \"x\"\n[[scenario.cohorts]]\nname = \"c\"\nmembers = [\"team-a\", \"team-b\"]\n").unwrap_err(),
        )
        .to_string();
        assert!(e.contains("cohorts[0].members") && e.contains("team-b"), "{e}");
        let e = crate::error_chain::Chain(&parse("[[scenario]]\nname = \"baseline\"\n", "s.toml").unwrap_err()).to_string();
        assert!(e.contains("scenario[0].name"), "{e}");
    }
}
