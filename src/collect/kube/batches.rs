//! The collected kube-state-metrics as the lake's rows: `pods` by the day they were created,
//! `pending_samples`, `quotas`, `namespace_labels` and the node gauges.

use super::*;

impl KubeState {
    /// GPU pods by the day they were created.
    pub fn pods_by_day(&self) -> BTreeMap<NaiveDate, RecordBatch> {
        let mut days: BTreeMap<NaiveDate, Vec<(&String, &Pod)>> = BTreeMap::new();
        for (uid, p) in &self.pods {
            if Self::gpu_request(p).1 <= 0 {
                continue;
            }
            let created = p.created.or(p.first_seen).unwrap_or(self.from);
            let day = chrono::DateTime::from_timestamp_millis(created).expect("valid").date_naive();
            days.entry(day).or_default().push((uid, p));
        }
        days.into_iter().map(|(d, pods)| (d, self.pods_batch(&pods))).collect()
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
