//! kube-state-metrics' series: pods, their phases, requests and claims, nodes and their
//! capacity, namespaces and quotas.

use super::*;

impl<W: Write> OmWriter<'_, W> {
    /// Steps at which kube-state-metrics saw `pod`: from creation to deletion, within the window.
    pub(super) fn pod_steps(&self, pod: &SimPod) -> std::ops::Range<i64> {
        let (ws, we) = self.sim.params.window_ms();
        let step = self.model.step_ms;
        let first = pod.created.max(ws);
        let first = ws + (first - ws + step - 1).div_euclid(step) * step;
        let gone = pod.finished.map_or(we, |f| (f + DELETE_AFTER_MS).min(we));
        first..gone.max(first)
    }

    pub(super) fn ksm(&mut self) -> io::Result<()> {
        let sim = self.sim;
        let step = self.model.step_ms;
        let ksm = "instance=\"10.0.0.5:8080\",job=\"kube-state-metrics\"";
        let pods: Vec<usize> = (0..sim.schedule.pods.len()).filter(|&i| !self.pod_steps(&sim.schedule.pods[i]).is_empty()).collect();
        let id_labels = |p: &SimPod| format!("namespace=\"{}\",pod=\"{}\",uid=\"{}\"", esc(sim.namespaces[p.ns].name), esc(&p.name), p.uid);
        let node_name = |p: &SimPod| p.node.map(|n| sim.cluster.nodes[n].name.clone()).unwrap_or_default();
        let at = |t: Option<i64>, ts: i64| t.filter(|&t| t <= ts);
        let on_dra = |p: &SimPod| p.node.is_some_and(|n| sim.cluster.nodes[n].dra);
        let owners = sim.owners();

        // Families with one series per pod whose value is a time (or 1).
        type ValueFn<'x> = Box<dyn Fn(&SimPod, i64) -> Option<String> + 'x>;
        let simple: Vec<(&str, &str, ValueFn)> = vec![
            ("kube_pod_info", "Information about pod.", Box::new(|_p, _ts| Some("1".into()))),
            ("kube_pod_created", "Unix creation timestamp", Box::new(|p, _ts| Some(go_g((p.created / 1000) as f64)))),
            (
                "kube_pod_status_scheduled_time",
                "Unix timestamp when pod moved into scheduled status",
                Box::new(move |p, ts| at(p.scheduled, ts).map(|t| go_g((t / 1000) as f64))),
            ),
            ("kube_pod_start_time", "Start time in unix timestamp for a pod.", Box::new(move |p, ts| at(p.started, ts).map(|t| go_g((t / 1000) as f64)))),
            (
                "kube_pod_completion_time",
                "Completion time in unix timestamp for a pod.",
                Box::new(move |p, ts| at(p.finished, ts).map(|t| go_g((t / 1000) as f64))),
            ),
        ];
        for (name, help, value) in &simple {
            self.family(name, help)?;
            for &i in &pods {
                let p = &sim.schedule.pods[i];
                let mut labels = id_labels(p);
                if *name == "kube_pod_info" {
                    // The node label is empty until the pod is bound: a new series then.
                    // created_by_*: the controller ownerReference (kube_pod_owner's).
                    let (kind, owner) = owners[i].owner.as_ref().map_or(("", ""), |(k, n)| (*k, n.as_str()));
                    let mut before = labels.clone();
                    write!(
                        before,
                        ",node=\"\",created_by_kind=\"{kind}\",created_by_name=\"{}\",priority_class=\"{}\",{ksm}",
                        esc(owner),
                        p.priority.class_name()
                    )
                    .expect("string write");
                    write!(
                        labels,
                        ",node=\"{}\",created_by_kind=\"{kind}\",created_by_name=\"{}\",priority_class=\"{}\",{ksm}",
                        node_name(p),
                        esc(owner),
                        p.priority.class_name()
                    )
                    .expect("string write");
                    for ts in self.pod_steps(p).step_by(step as usize) {
                        let l = if at(p.scheduled, ts).is_some() { &labels } else { &before };
                        // series are contiguous: unbound samples come first in time
                        self.sample(name, l, "1", ts)?;
                    }
                    continue;
                }
                write!(labels, ",{ksm}").expect("string write");
                for ts in self.pod_steps(p).step_by(step as usize) {
                    if let Some(v) = value(p, ts) {
                        self.sample(name, &labels, &v, ts)?;
                    }
                }
            }
        }

        self.family("kube_pod_status_phase", "The pods current phase.")?;
        for &i in &pods {
            let p = &sim.schedule.pods[i];
            for phase in PHASES {
                let labels = format!("{},phase=\"{phase}\",{ksm}", id_labels(p));
                for ts in self.pod_steps(p).step_by(step as usize) {
                    let now = phase_at(p, ts);
                    self.sample("kube_pod_status_phase", &labels, if now == phase { "1" } else { "0" }, ts)?;
                }
            }
        }

        self.family("kube_pod_container_resource_requests", "The number of requested request resource by a container.")?;
        for &i in &pods {
            let p = &sim.schedule.pods[i];
            let ns = &sim.namespaces[p.ns];
            let gpu_res = p.resource.name().replace(['.', '/', '-'], "_");
            let mut reqs = vec![("cpu", "core", p.cpu_request), ("memory", "byte", p.mem_request_bytes as f64)];
            // A pod on a DRA node asks for its devices in a ResourceClaim, not here.
            if !on_dra(p) {
                reqs.insert(0, (gpu_res.as_str(), "integer", p.gpu_request as f64));
            }
            // A HAMi pod also asks for its share's cores (percent) and framebuffer (MiB), from
            // its spec: pending too.
            if let Some(pct) = p.resource.hami_pct() {
                reqs.push(("nvidia_com_gpucores", "integer", pct as f64));
                reqs.push(("nvidia_com_gpumem", "integer", hami_gpumem_mib(pct)));
            }
            for (res, unit, v) in reqs {
                // Requests come from the pod spec, so pending pods have them too: with an empty
                // node label until the pod is bound, then a new series with the node.
                let before = format!("{},container=\"{}\",node=\"\",resource=\"{res}\",unit=\"{unit}\",{ksm}", id_labels(p), ns.container);
                let bound = format!("{},container=\"{}\",node=\"{}\",resource=\"{res}\",unit=\"{unit}\",{ksm}", id_labels(p), ns.container, node_name(p));
                for ts in self.pod_steps(p).step_by(step as usize) {
                    let l = if at(p.scheduled, ts).is_some() { &bound } else { &before };
                    self.sample("kube_pod_container_resource_requests", l, &go_g(v), ts)?;
                }
            }
        }

        // kube-state-metrics 2.20's pod-to-claim link, one series per pod.spec.resourceClaims
        // entry: the pod's claim from a template named after what it asks for.
        self.family("kube_pod_resourceclaim_info", "Information about a DRA ResourceClaim referenced by a pod.")?;
        for &i in pods.iter().filter(|&&i| on_dra(&sim.schedule.pods[i])) {
            let p = &sim.schedule.pods[i];
            let template = format!("{}-x{}", p.resource.name().trim_start_matches("nvidia.com/").replace(['.', '/'], "-"), p.gpu_request);
            let labels =
                format!("{},claim_name=\"gpu\",resourceclaim_name=\"{}\",resourceclaim_template_name=\"{template}\",{ksm}", id_labels(p), esc(&dra_claim(p)));
            for ts in self.pod_steps(p).step_by(step as usize) {
                self.sample("kube_pod_resourceclaim_info", &labels, "1", ts)?;
            }
        }

        self.family("kube_pod_status_reason", "The pod status reasons")?;
        for &i in &pods {
            let p = &sim.schedule.pods[i];
            for reason in STATUS_REASONS {
                let labels = format!("{},reason=\"{reason}\",{ksm}", id_labels(p));
                for ts in self.pod_steps(p).step_by(step as usize) {
                    let evicted = reason == "Evicted" && p.reason == Some("Preempted") && at(p.finished, ts).is_some();
                    self.sample("kube_pod_status_reason", &labels, if evicted { "1" } else { "0" }, ts)?;
                }
            }
        }

        self.family("kube_pod_container_status_last_terminated_reason", "Describes the last reason the container was in terminated state.")?;
        for &i in &pods {
            let p = &sim.schedule.pods[i];
            let Some(reason @ ("OOMKilled" | "Error" | "Completed")) = p.reason else { continue };
            let labels = format!("{},container=\"{}\",reason=\"{reason}\",{ksm}", id_labels(p), sim.namespaces[p.ns].container);
            for ts in self.pod_steps(p).step_by(step as usize) {
                if at(p.finished, ts).is_some() {
                    self.sample("kube_pod_container_status_last_terminated_reason", &labels, "1", ts)?;
                }
            }
        }

        self.family("kube_pod_labels", "Kubernetes labels converted to Prometheus labels.")?;
        for &i in &pods {
            let p = &sim.schedule.pods[i];
            let mut labels = id_labels(p);
            for (key, value) in &owners[i].labels {
                write!(labels, ",label_{}=\"{}\"", crate::domain::ksm_label::sanitised(key), esc(value)).expect("string write");
            }
            write!(labels, ",{ksm}").expect("string write");
            for ts in self.pod_steps(p).step_by(step as usize) {
                self.sample("kube_pod_labels", &labels, "1", ts)?;
            }
        }
        self.owner_families(&pods, &owners, ksm)?;
        self.queue_families(&owners)?;

        self.family("kube_resourcequota", "Information about resource quota.")?;
        for (n, ns) in sim.namespaces.iter().enumerate() {
            for kind in ["hard", "used"] {
                let labels = format!("namespace=\"{}\",resource=\"requests.nvidia.com/gpu\",resourcequota=\"gpu-quota\",type=\"{kind}\",{ksm}", esc(ns.name));
                let samples: Vec<(i64, u32)> =
                    sim.schedule.quotas.iter().filter(|q| q.ns == n).map(|q| (q.ts, if kind == "hard" { q.hard } else { q.used })).collect();
                let (ws, we) = sim.params.window_ms();
                for (ts, v) in samples.into_iter().filter(|(ts, _)| *ts >= ws && *ts < we) {
                    self.sample("kube_resourcequota", &labels, &go_g(v as f64), ts)?;
                }
            }
        }

        self.family("kube_namespace_labels", "Kubernetes labels converted to Prometheus labels.")?;
        let (ws, we) = sim.params.window_ms();
        for ns in &sim.namespaces {
            let labels = format!("namespace=\"{}\",label_cost_centre=\"{}\",label_team=\"{}\",{ksm}", esc(ns.name), esc(ns.cost_centre()), esc(ns.team));
            let mut ts = ws;
            while ts < we {
                self.sample("kube_namespace_labels", &labels, "1", ts)?;
                ts += step;
            }
        }

        // A node reports capacity while it is there, for the GPUs there (a board out is one
        // GPU fewer until the new one is in).
        self.family("kube_node_status_capacity", "The capacity for different resources of a node.")?;
        for node in &sim.cluster.nodes {
            let mut res: BTreeMap<String, Vec<usize>> = BTreeMap::new();
            for &u in &node.units {
                let name = match sim.cluster.units[u].mig_profile {
                    Some(p) => format!("nvidia_com_mig_{}", p.replace('.', "_")),
                    None if sim.cluster.units[u].time_sliced => "nvidia_com_gpu_shared".into(),
                    None => "nvidia_com_gpu".into(),
                };
                res.entry(name).or_default().push(u);
            }
            for (r, units) in res {
                let labels = format!("node=\"{}\",resource=\"{r}\",unit=\"integer\",{ksm}", node.name);
                let mut ts = ws;
                while ts < we {
                    let node_there = node.units.iter().any(|&u| sim.cluster.life_of(u).exists(ts));
                    let mut n = units.iter().filter(|&&u| sim.cluster.life_of(u).exists(ts)).count();
                    // HAMi advertises HAMI_SPLIT vGPUs per GPU as nvidia.com/gpu.
                    if units.first().is_some_and(|&u| sim.cluster.units[u].hami) {
                        n = n / HAMI_SLOTS_PCT.len() * HAMI_SPLIT;
                    }
                    if node_there {
                        self.sample("kube_node_status_capacity", &labels, &n.to_string(), ts)?;
                    }
                    ts += step;
                }
            }
        }
        Ok(())
    }

    /// `kube_pod_owner` (one series per pod: its controller ownerReference, or the empty owner
    /// of a bare pod) and the hops above it that kube-state-metrics exports
    /// (`kube_replicaset_owner`, `kube_job_owner`), each a series from the first step one of its
    /// pods was seen to the last (`shared/reference/owner-chains.md` §1, §5).
    fn owner_families(&mut self, pods: &[usize], owners: &[crate::simulate::owners::Ownership], ksm: &str) -> io::Result<()> {
        let sim = self.sim;
        let step = self.model.step_ms;
        self.family("kube_pod_owner", "Information about the Pod's owner.")?;
        let mut hops: BTreeMap<(&str, &str, String), (&crate::simulate::owners::Hop, i64, i64)> = BTreeMap::new();
        for &i in pods {
            let p = &sim.schedule.pods[i];
            let ns = sim.namespaces[p.ns].name;
            let (kind, name, controller) = owners[i].owner.as_ref().map_or(("", "", ""), |(k, n)| (*k, n.as_str(), "true"));
            let labels = format!(
                "namespace=\"{}\",pod=\"{}\",uid=\"{}\",owner_kind=\"{kind}\",owner_name=\"{}\",owner_is_controller=\"{controller}\",{ksm}",
                esc(ns),
                esc(&p.name),
                p.uid,
                esc(name)
            );
            let steps = self.pod_steps(p);
            for ts in steps.clone().step_by(step as usize) {
                self.sample("kube_pod_owner", &labels, "1", ts)?;
            }
            if let Some(hop) = &owners[i].hop {
                let e = hops.entry((hop.family, ns, hop.name.clone())).or_insert((hop, steps.start, steps.end));
                e.1 = e.1.min(steps.start);
                e.2 = e.2.max(steps.end);
            }
        }
        for family in ["kube_replicaset_owner", "kube_job_owner"] {
            self.family(family, "Information about the owner.")?;
            for ((_, ns, name), (hop, first, end)) in hops.iter().filter(|((f, _, _), _)| *f == family) {
                let labels = format!(
                    "namespace=\"{}\",{}=\"{}\",owner_kind=\"{}\",owner_name=\"{}\",owner_is_controller=\"true\",{ksm}",
                    esc(ns),
                    hop.id_label,
                    esc(name),
                    hop.owner_kind,
                    esc(&hop.owner_name)
                );
                for ts in (*first..*end).step_by(step as usize) {
                    self.sample(family, &labels, "1", ts)?;
                }
            }
        }
        Ok(())
    }
}

fn phase_at(p: &SimPod, ts: i64) -> &'static str {
    if p.finished.is_some_and(|f| f <= ts) {
        if p.reason == Some("Completed") {
            "Succeeded"
        } else {
            "Failed"
        }
    } else if p.started.is_some_and(|s| s <= ts) {
        "Running"
    } else {
        "Pending"
    }
}
