//! What a config key is when the file does not set it (the table in docs/configuration.md).

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::types::*;
use crate::domain::dcgm_field::Field;

impl Default for FocusConfig {
    fn default() -> Self {
        FocusConfig {
            provider_name: "Internal GPU platform".into(),
            publisher_name: "Internal GPU platform".into(),
            invoice_issuer_name: "Internal GPU platform".into(),
            billing_account_id: "gpu-pool".into(),
            billing_account_name: "Shared GPU pool".into(),
            cluster: "default".into(),
        }
    }
}

impl Default for IdleConfig {
    fn default() -> Self {
        IdleConfig { util_threshold_pct: 5.0, min_minutes: 30, zombie_mem_mib: 1024.0 }
    }
}

impl Default for PlanConfig {
    /// The classes of the simulated cluster (`gpuledger demo`): only `high` evicts.
    fn default() -> Self {
        let class = |value, preempts| PriorityClassEntry { value, preempts };
        PlanConfig {
            priority_classes: [("low", class(0, false)), ("medium", class(100, false)), ("high", class(1000, true))]
                .into_iter()
                .map(|(n, c)| (n.to_string(), c))
                .collect(),
            scenarios: Vec::new(),
        }
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig { reports_dir: PathBuf::from("reports"), collect: true, min_completeness_pct: 99.0, pdf: true }
    }
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            listen: "127.0.0.1:5432".into(),
            users_file: None,
            tls_cert: None,
            tls_key: None,
            max_connections: 64,
            statement_timeout_secs: 300,
            tls: Default::default(),
            login_timeout_secs: 10,
        }
    }
}

impl Default for S3Config {
    fn default() -> Self {
        S3Config {
            endpoint: None,
            region: None,
            path_style: false,
            allow_http: false,
            credentials_file: None,
            profile: None,
            lock_ttl_secs: 300,
            retries: 4,
            retry_timeout_secs: 30,
        }
    }
}

impl Default for MetricNames {
    fn default() -> Self {
        MetricNames {
            gpu_util: Field::Util.default_name().into(),
            engine_active: Field::EngineActive.default_name().into(),
            fb_used: Field::FbUsed.default_name().into(),
            fb_free: Field::FbFree.default_name().into(),
            power: Field::Power.default_name().into(),
            energy: Field::Energy.default_name().into(),
            temp: Field::Temp.default_name().into(),
            xid: Field::Xid.default_name().into(),
            pod_info: "kube_pod_info".into(),
            pod_created: "kube_pod_created".into(),
            pod_scheduled_time: "kube_pod_status_scheduled_time".into(),
            pod_start_time: "kube_pod_start_time".into(),
            pod_completion_time: "kube_pod_completion_time".into(),
            pod_phase: "kube_pod_status_phase".into(),
            pod_requests: "kube_pod_container_resource_requests".into(),
            pod_status_reason: "kube_pod_status_reason".into(),
            pod_last_terminated_reason: "kube_pod_container_status_last_terminated_reason".into(),
            pod_labels: "kube_pod_labels".into(),
            resourcequota: "kube_resourcequota".into(),
            node_capacity: "kube_node_status_capacity".into(),
            kueue_pending: "kueue_pending_workloads".into(),
            namespace_labels: "kube_namespace_labels".into(),
            pod_resourceclaim_info: "kube_pod_resourceclaim_info".into(),
            pod_owner: "kube_pod_owner".into(),
            replicaset_owner: "kube_replicaset_owner".into(),
            job_owner: "kube_job_owner".into(),
            deployment_owner: "kube_deployment_owner".into(),
            pod_annotations: "kube_pod_annotations".into(),
            kuberay_cluster_info: "kuberay_cluster_info".into(),
            kueue_cluster_queue_info: "kueue_cluster_queue_info".into(),
            kueue_nominal_quota: "kueue_cluster_queue_nominal_quota".into(),
            kueue_borrowing_limit: "kueue_cluster_queue_borrowing_limit".into(),
            kueue_resource_usage: "kueue_cluster_queue_resource_usage".into(),
            kueue_resource_pending: "kueue_cluster_queue_resource_pending".into(),
            volcano_deserved: "volcano_queue_deserved_scalar_resources".into(),
            volcano_capacity: "volcano_queue_capacity_scalar_resources".into(),
            volcano_allocated: "volcano_queue_allocated_scalar_resources".into(),
            volcano_request: "volcano_queue_request_scalar_resources".into(),
            kai_deserved_gpus: "kai_queue_deserved_gpus".into(),
            kai_allocated_gpus: "kai_queue_allocated_gpus".into(),
            hami_core_allocated: "hami_vgpu_core_allocated_ratio".into(),
            hami_memory_allocated: "hami_vgpu_memory_allocated_bytes".into(),
            hami_memory_limit: "hami_gpu_memory_limit_bytes".into(),
            hami_container_util: "hami_container_device_utilization_ratio".into(),
            hami_last_kernel: "hami_container_last_kernel_elapsed_seconds".into(),
        }
    }
}

impl Default for LabelNames {
    fn default() -> Self {
        let v = |xs: &[&str]| xs.iter().map(|x| x.to_string()).collect();
        LabelNames {
            node: v(&["Hostname", "hostname", "kubernetes_node"]),
            namespace: v(&["namespace", "pod_namespace"]),
            pod: v(&["pod", "pod_name"]),
            container: v(&["container", "container_name"]),
            exporter_pods: v(&["nvidia-dcgm-exporter", "dcgm-exporter"]),
            team: v(&["label_team", "label_cost_center"]),
            namespace_team: v(&["label_team"]),
            namespace_cost_centre: v(&["label_cost_centre", "label_cost_center", "label_costcenter"]),
        }
    }
}

impl Default for LakeConfig {
    fn default() -> Self {
        LakeConfig { path: PathBuf::from("lake"), s3: S3Config::default() }
    }
}

impl Default for PrometheusConfig {
    fn default() -> Self {
        PrometheusConfig {
            url: "http://127.0.0.1:9090".into(),
            step_secs: 30,
            lookback_secs: 300,
            replica_labels: ["prometheus_replica", "replica", "__replica__"].map(String::from).to_vec(),
            cluster_label: None,
            cluster_name: crate::domain::units::DEFAULT_CLUSTER.to_string(),
            lag_secs: 300,
            initial_days: 7,
            chunk_secs: 6 * 3600,
            timeout_secs: 120,
            retries: 5,
            backoff_ms: 500,
            concurrency: 4,
            bearer_token_file: None,
            bearer_token_env: None,
            basic_auth_user: None,
            basic_auth_password_file: None,
            ca_file: None,
            headers: BTreeMap::new(),
            metrics: MetricNames::default(),
            labels: LabelNames::default(),
        }
    }
}

impl Default for PowerPricing {
    fn default() -> Self {
        PowerPricing {
            price_per_kwh: 0.12,
            pue: 1.3,
            effective_from: epoch_date(),
            carbon_g_per_kwh: None,
            timezone: "UTC".into(),
            tariff: Vec::new(),
            resolved: ResolvedTariff::default(),
        }
    }
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            memory_limit: MemorySize::of_bytes(1 << 30),
            url: None,
            query_timeout_secs: 3600,
            spill_limit: MemorySize::of_bytes(4 << 30),
            max_result_rows: 10_000_000,
            max_result_bytes: MemorySize::of_bytes(256 << 20),
        }
    }
}

impl Default for PricingConfig {
    fn default() -> Self {
        PricingConfig {
            currency: "USD".into(),
            basis: CostBasis::Cloud,
            idle_policy: SpreadPolicy::Separate,
            shared_namespaces: Vec::new(),
            shared_policy: SpreadPolicy::Separate,
            power: PowerPricing::default(),
            gpu: default_gpu_prices(),
            cpu: Vec::new(),
            memory: Vec::new(),
        }
    }
}

/// Flat on-demand list prices per GPU-hour used when the config names none (and by the demo).
pub fn default_gpu_prices() -> Vec<GpuPrice> {
    [("NVIDIA H100 80GB HBM3", 6.88), ("NVIDIA A100-SXM4-80GB", 3.67), ("NVIDIA L4", 0.80)]
        .into_iter()
        .map(|(model, price)| GpuPrice { model: model.into(), mig_profile: None, price_per_hour: price, effective_from: epoch_date() })
        .collect()
}
