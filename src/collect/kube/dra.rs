//! DRA: the GPUs a pod's ResourceClaims gave it, read as its request.

use super::*;

/// A DRA claim's devices as dcgm-exporter names them: whole GPUs, and MIG devices by profile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClaimDevices {
    pub whole: BTreeSet<String>,
    pub mig: BTreeMap<String, BTreeSet<String>>,
}

impl ClaimDevices {
    /// The device plugin's resource and count these devices are: MIG devices of the profile
    /// with the most of them (`nvidia.com/mig-<profile>`), else whole GPUs (`nvidia.com/gpu`).
    fn as_request(&self) -> Option<(String, i32)> {
        if let Some((profile, devices)) = self.mig.iter().max_by_key(|(_, d)| d.len()) {
            return Some((format!("nvidia.com/mig-{profile}"), devices.len() as i32));
        }
        (!self.whole.is_empty()).then(|| ("nvidia.com/gpu".to_string(), self.whole.len() as i32))
    }
}

/// What [`KubeState::set_dra`] found, for the run's log.
#[derive(Debug, Clone, Default)]
pub struct DraNote {
    /// Pods whose claims' devices dcgm-exporter named.
    pub seen: usize,
    /// Pods whose claims it never named (pending, or on a node it does not map), their
    /// request taken from other pods' claims of the same template.
    pub by_template: usize,
    /// Pods with claims and neither: no GPU request known (a claim for another device, or
    /// a template no pod was seen running with).
    pub unknown: usize,
}

impl KubeState {
    /// DRA: pods request no `nvidia.com/*` resource for devices a ResourceClaim gives them
    /// (kube-state-metrics#2979). Each pod with claims (`kube_pod_resourceclaim_info`) takes
    /// as its request the devices dcgm-exporter labelled with its claims (`devices`, by claim
    /// namespace and name), read as the device plugin's resource they are; a pod whose claims
    /// no series named (pending, or its node's exporter not mapping DRA) takes what the other
    /// pods' claims from the same template held. Inferred, and counted for the log.
    pub fn set_dra(&mut self, devices: &BTreeMap<(String, String), ClaimDevices>) -> DraNote {
        let mut note = DraNote::default();
        let mut by_template: BTreeMap<String, BTreeMap<(String, i32), usize>> = BTreeMap::new();
        for p in self.pods.values_mut() {
            let mut held = ClaimDevices::default();
            for (claim, _) in &p.claims {
                if let Some(d) = devices.get(&(p.namespace.clone(), claim.clone())) {
                    held.whole.extend(d.whole.iter().cloned());
                    for (profile, ds) in &d.mig {
                        held.mig.entry(profile.clone()).or_default().extend(ds.iter().cloned());
                    }
                }
            }
            p.dra = held.as_request();
            if let Some(r) = &p.dra {
                note.seen += 1;
                for (_, template) in &p.claims {
                    if let Some(t) = template {
                        *by_template.entry(t.clone()).or_default().entry(r.clone()).or_default() += 1;
                    }
                }
            }
        }
        for p in self.pods.values_mut().filter(|p| p.dra.is_none() && !p.claims.is_empty()) {
            // The request most pods of the template held.
            let guess = p
                .claims
                .iter()
                .filter_map(|(_, t)| t.as_ref())
                .filter_map(|t| by_template.get(t))
                .flat_map(|m| m.iter())
                .max_by_key(|(_, n)| **n)
                .map(|(r, _)| r.clone());
            match guess {
                Some(r) => {
                    p.dra = Some(r);
                    note.by_template += 1;
                }
                None => note.unknown += 1,
            }
        }
        note
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::s;
    use super::*;

    /// Two pods with claims from one template: one running (dcgm-exporter names its claim's two
    /// MIG devices), one pending (no device yet): both ask for two `mig-3g.40gb`; a third with a
    /// claim of another template nobody ran asks for nothing known.
    #[test]
    fn dra_claims_are_requests_of_the_devices_they_gave() {
        let cfg = PrometheusConfig::default();
        let mut k = KubeState::new(0, 600_000, 30);
        let claim = |pod: &'static str, uid: &'static str, claim: &'static str, template: &'static str| {
            s(
                &[
                    ("namespace", "ns"),
                    ("pod", pod),
                    ("uid", uid),
                    ("claim_name", "gpu"),
                    ("resourceclaim_name", claim),
                    ("resourceclaim_template_name", template),
                ],
                &[(0, 1.0)],
            )
        };
        k.add(
            KubeMetric::ResourceClaims,
            &[claim("run", "u1", "run-gpu", "mig-x2"), claim("wait", "u2", "wait-gpu", "mig-x2"), claim("nic", "u3", "nic-rdma", "rdma")],
            &cfg,
        );
        let mut devices = BTreeMap::new();
        let mig = ClaimDevices {
            whole: BTreeSet::new(),
            mig: BTreeMap::from([("3g.40gb".to_string(), BTreeSet::from(["gpu-0-mig-1".to_string(), "gpu-0-mig-2".to_string()]))]),
        };
        devices.insert(("ns".to_string(), "run-gpu".to_string()), mig);
        let note = k.set_dra(&devices);
        assert_eq!((note.seen, note.by_template, note.unknown), (1, 1, 1));
        let req = |uid: &str| KubeState::gpu_request(&k.pods[uid]);
        assert_eq!(req("u1"), (Some("nvidia.com/mig-3g.40gb".into()), 2));
        assert_eq!(req("u2"), (Some("nvidia.com/mig-3g.40gb".into()), 2), "by its template");
        assert_eq!(req("u3"), (None, 0));
    }
}
