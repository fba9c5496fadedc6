//! The collected kube-state-metrics as the lake's rows: `pods` by the day they were created,
//! `pending_samples`, `quotas`, `namespace_labels` and the node gauges.

use super::*;

impl KubeState {
    /// GPU pods by the day they were created (the day of their rows in `pods`, `pod_owners`
    /// and `pod_labels`).
    fn gpu_pods_by_day(&self) -> BTreeMap<NaiveDate, Vec<(&String, &Pod)>> {
        let mut days: BTreeMap<NaiveDate, Vec<(&String, &Pod)>> = BTreeMap::new();
        for (uid, p) in &self.pods {
            if Self::gpu_request(p).1 <= 0 {
                continue;
            }
            let day = chrono::DateTime::from_timestamp_millis(self.created_of(p)).expect("valid").date_naive();
            days.entry(day).or_default().push((uid, p));
        }
        days
    }

    fn created_of(&self, p: &Pod) -> i64 {
        p.created.or(p.first_seen).unwrap_or(self.from)
    }

    /// GPU pods by the day they were created.
    pub fn pods_by_day(&self) -> BTreeMap<NaiveDate, RecordBatch> {
        self.gpu_pods_by_day().into_iter().map(|(d, pods)| (d, self.pods_batch(&pods))).collect()
    }

    /// A GPU pod's top-level workload (`domain::workload`).
    fn workload_of(&self, p: &Pod) -> crate::domain::workload::Resolved {
        let owner = p.owner.as_ref().map(|(k, n, _)| (k.as_str(), n.as_str()));
        crate::domain::workload::resolve(&p.namespace, &p.pod, owner, &p.labels, &self.owner_series)
    }

    /// `pod_owners` and `pod_labels` of the GPU pods, by the day they were created.
    pub fn owners_and_labels_by_day(&self) -> BTreeMap<NaiveDate, [RecordBatch; 2]> {
        self.gpu_pods_by_day()
            .into_iter()
            .map(|(d, pods)| {
                let mut owners = PodOwnersBuilder::new();
                let mut labels = PodLabelsBuilder::new();
                for (uid, p) in pods {
                    let created = self.created_of(p);
                    let w = self.workload_of(p);
                    owners.push(&PodOwnerRow {
                        created,
                        namespace: &p.namespace,
                        pod: &p.pod,
                        uid,
                        owner_kind: p.owner.as_ref().map(|(k, _, _)| k.as_str()),
                        owner_name: p.owner.as_ref().map(|(_, n, _)| n.as_str()),
                        chain: &w.chain,
                        workload_kind: &w.kind,
                        workload_name: &w.name,
                        inferred: w.inferred,
                    });
                    for (source, map) in [("label", &p.labels), ("annotation", &p.annotations)] {
                        for (key, value) in map {
                            labels.push(&PodLabelRow { created, namespace: &p.namespace, pod: &p.pod, uid, source, key, value });
                        }
                    }
                }
                (d, [owners.finish(), labels.finish()])
            })
            .collect()
    }

    /// Of the GPU pods, how many had each hop inferred (`domain::workload`'s reasons), for the
    /// run's log.
    pub fn inferred_workloads(&self) -> BTreeMap<&'static str, usize> {
        let mut out = BTreeMap::new();
        for p in self.pods.values().filter(|p| Self::gpu_request(p).1 > 0) {
            if let Some(why) = self.workload_of(p).inferred {
                *out.entry(why).or_default() += 1;
            }
        }
        out
    }

    fn pods_batch(&self, pods: &[(&String, &Pod)]) -> RecordBatch {
        let mut rows = PodsBuilder::new();
        for (u, p) in pods {
            let (resource, gpus) = Self::gpu_request(p);
            let sum = |r: &str| p.requests.iter().filter(|((_, k), _)| k == r).map(|(_, v)| v).sum::<f64>();
            let phase = p.phase.as_ref().map(|(_, s)| s.as_str());
            let reason = match (&p.reason, phase) {
                (Some(r), _) => Some(r.as_str()),
                (None, Some("Succeeded")) => Some("Completed"),
                _ => None,
            };
            let done = p.finished.is_some() || matches!(phase, Some("Succeeded" | "Failed"));
            rows.push(&PodRow {
                namespace: &p.namespace,
                pod: &p.pod,
                uid: u,
                node: p.node.as_deref(),
                priority_class: p.priority_class.as_deref(),
                created: p.created.or(p.first_seen).unwrap_or(self.from),
                scheduled: p.scheduled,
                started: p.started,
                finished: p.finished,
                gpu_resource: resource.as_deref(),
                gpu_request: gpus,
                cpu_request: Some(sum("cpu")),
                mem_request_bytes: Some(sum("memory") as i64),
                phase,
                termination_reason: if done { reason } else { None },
                team: p.team.as_deref(),
                gpu_share_pct: Self::hami_share_pct(p),
            });
        }
        rows.finish()
    }

    /// Pending GPU pods per cell in `[c_start, c_end)`: cells in which the pod's phase was
    /// Pending and that ended before it was scheduled (`kube_pod_status_scheduled_time`). A pod
    /// the scheduler has placed stays Pending while its image is pulled and its containers
    /// created, but it waits for no GPU then: it holds one. (A scheduled time inside a cell
    /// leaves that cell out, as a pod created inside its first cell counts that one: whole
    /// steps either way.)
    pub fn pending_batch(&self, c_start: i64, c_end: i64) -> RecordBatch {
        let mut rows = PendingBuilder::new();
        for (u, p) in &self.pods {
            let (resource, gpus) = Self::gpu_request(p);
            if gpus <= 0 {
                continue;
            }
            let waiting = |cell: i64| p.scheduled.is_none_or(|s| cell + self.step <= s);
            for &cell in p.pending.iter().filter(|c| **c >= c_start && **c < c_end && waiting(**c)) {
                rows.push(&PendingRow {
                    ts: cell,
                    step_s: (self.step / 1000) as i32,
                    namespace: &p.namespace,
                    pod: &p.pod,
                    uid: u,
                    priority_class: p.priority_class.as_deref(),
                    gpu_resource: resource.as_deref(),
                    gpu_request: gpus,
                    reason: None,
                    gpu_share_pct: Self::hami_share_pct(p),
                });
            }
        }
        rows.finish()
    }

    pub fn quotas_batch(&self, c_start: i64, c_end: i64) -> RecordBatch {
        let mut rows = QuotasBuilder::new();
        for ((t, n, r), (h, u)) in self.quotas.range((c_start, String::new(), String::new())..) {
            if *t >= c_end {
                break;
            }
            rows.push(&QuotaRow { ts: *t, namespace: n, resource: r, hard: *h, used: *u });
        }
        rows.finish()
    }

    /// `namespace_labels` rows for hours in `[c_start, c_end)`.
    pub fn namespace_labels_batch(&self, c_start: i64, c_end: i64) -> RecordBatch {
        let mut ts = TimestampMillisecondBuilder::new().with_timezone("UTC");
        let mut ns = StringDictionaryBuilder::<Int32Type>::new();
        let mut team = StringDictionaryBuilder::<Int32Type>::new();
        let mut cc = StringDictionaryBuilder::<Int32Type>::new();
        for ((t, n), (tm, c)) in self.namespace_labels.range((c_start, String::new())..) {
            if *t >= c_end {
                break;
            }
            ts.append_value(*t);
            ns.append_value(n);
            team.append_option(tm.as_deref());
            cc.append_option(c.as_deref());
        }
        let columns: Vec<ArrayRef> = vec![Arc::new(ts.finish()), Arc::new(ns.finish()), Arc::new(team.finish()), Arc::new(cc.finish())];
        crate::lake::rows::table_batch(Table::NamespaceLabels.schema(), columns)
    }

    /// `node_capacity` or `kueue_pending` rows for cells in `[c_start, c_end)`.
    pub fn gauge_batch(&self, table: Table, c_start: i64, c_end: i64) -> RecordBatch {
        let map = if table == Table::NodeCapacity { &self.capacity } else { &self.kueue };
        let mut ts = TimestampMillisecondBuilder::new().with_timezone("UTC");
        let mut a = StringDictionaryBuilder::<Int32Type>::new();
        let mut b = StringDictionaryBuilder::<Int32Type>::new();
        let mut v = Float64Builder::new();
        for ((t, k1, k2), value) in map.range((c_start, String::new(), String::new())..) {
            if *t >= c_end {
                break;
            }
            ts.append_value(*t);
            a.append_value(k1);
            b.append_value(k2);
            v.append_value(*value);
        }
        let columns: Vec<ArrayRef> = vec![Arc::new(ts.finish()), Arc::new(a.finish()), Arc::new(b.finish()), Arc::new(v.finish())];
        crate::lake::rows::table_batch(table.schema(), columns)
    }
}
