//! Every rule a loaded config must meet, each error naming its key.

use super::error::{ConfigError, Result};
use super::types::{Config, ResolvedTariff, SpreadPolicy};
use crate::domain::tariff_time::{first_overlap, parse_days, parse_hours, parse_timezone, TimeBand};

/// A Prometheus base URL that can work: http or https, a host, no spaces (the `--url` flags
/// are checked the same way as the config key).
pub fn check_prometheus_url(url: &str) -> std::result::Result<(), String> {
    let shown = crate::redact::url_userinfo(url);
    let parsed = url::Url::parse(url).map_err(|e| format!("{shown:?} is not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(format!("must start with http:// or https://, got {shown:?}"));
    }
    if parsed.host_str().is_none_or(str::is_empty) || url.chars().any(char::is_whitespace) {
        return Err(format!("{shown:?} has no valid host"));
    }
    Ok(())
}

impl Config {
    /// Checks every rule; returns the tariff resolved into typed values (the one thing here
    /// that is parsed from text), for the loaded config to keep.
    pub(super) fn validate(&self, origin: &str) -> Result<ResolvedTariff> {
        let invalid = |key: &str, message: String| ConfigError::Invalid { path: origin.to_string(), key: key.to_string(), message };
        if self.prometheus.step_secs == 0 || self.prometheus.step_secs > 3600 {
            return Err(invalid("prometheus.step_secs", format!("must be 1..=3600, got {}", self.prometheus.step_secs)));
        }
        check_prometheus_url(&self.prometheus.url).map_err(|m| invalid("prometheus.url", m))?;
        let pr = &self.prometheus;
        if pr.chunk_secs < pr.step_secs as u64 || pr.chunk_secs % pr.step_secs as u64 != 0 || pr.chunk_secs > 86_400 {
            return Err(invalid("prometheus.chunk_secs", format!("must be a multiple of step_secs, at most 86400, got {}", pr.chunk_secs)));
        }
        if pr.cluster_name.is_empty() {
            return Err(invalid("prometheus.cluster_name", "must not be empty".to_string()));
        }
        if pr.cluster_label.as_deref().is_some_and(|l| l.is_empty() || !l.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')) {
            return Err(invalid("prometheus.cluster_label", format!("must be a Prometheus label name, got {:?}", pr.cluster_label.as_deref().unwrap_or(""))));
        }
        if pr.lookback_secs == 0 || pr.lookback_secs > 3600 {
            return Err(invalid("prometheus.lookback_secs", format!("must be 1..=3600, got {}", pr.lookback_secs)));
        }
        if 86_400 % pr.step_secs != 0 {
            return Err(invalid("prometheus.step_secs", format!("must divide a day (86400 s), got {}", pr.step_secs)));
        }
        if pr.concurrency == 0 || pr.concurrency > 64 {
            return Err(invalid("prometheus.concurrency", format!("must be 1..=64, got {}", pr.concurrency)));
        }
        if pr.timeout_secs == 0 {
            return Err(invalid("prometheus.timeout_secs", "must be at least 1".into()));
        }
        if pr.bearer_token_file.is_some() as u8 + pr.bearer_token_env.is_some() as u8 + pr.basic_auth_user.is_some() as u8 > 1 {
            return Err(invalid("prometheus", "set at most one of bearer_token_file, bearer_token_env, basic_auth_user".into()));
        }
        if crate::redact::userinfo(&pr.url).is_some() {
            if let Some(other) = [
                (pr.bearer_token_file.is_some(), "bearer_token_file"),
                (pr.bearer_token_env.is_some(), "bearer_token_env"),
                (pr.basic_auth_user.is_some(), "basic_auth_user"),
            ]
            .iter()
            .find(|(set, _)| *set)
            .map(|(_, k)| k)
            {
                return Err(invalid(
                    "prometheus.url",
                    format!("has credentials (user@ or user:password@) and prometheus.{other} is set too: one would be dropped; keep one of them"),
                ));
            }
        }
        if !(1..=600).contains(&self.serve.login_timeout_secs) {
            return Err(invalid("serve.login_timeout_secs", format!("must be 1..=600, got {}", self.serve.login_timeout_secs)));
        }
        let p = &self.pricing.power;
        if !(p.price_per_kwh.is_finite() && p.price_per_kwh >= 0.0) {
            return Err(invalid("pricing.power.price_per_kwh", format!("must be a finite number >= 0, got {}", p.price_per_kwh)));
        }
        if !(p.pue.is_finite() && (1.0..=5.0).contains(&p.pue)) {
            return Err(invalid("pricing.power.pue", format!("must be between 1.0 and 5.0, got {}", p.pue)));
        }
        if !crate::domain::money::is_iso4217(&self.pricing.currency) {
            return Err(invalid("pricing.currency", format!("must be an ISO 4217 code such as USD, got {:?}", self.pricing.currency)));
        }
        let mut seen = std::collections::BTreeSet::new();
        for (i, g) in self.pricing.gpu.iter().enumerate() {
            let key = format!("pricing.gpu[{i}]");
            if g.model.trim().is_empty() {
                return Err(invalid(&format!("{key}.model"), "must not be empty".into()));
            }
            if !(g.price_per_hour.is_finite() && g.price_per_hour >= 0.0) {
                return Err(invalid(&format!("{key}.price_per_hour"), format!("must be a finite number >= 0, got {}", g.price_per_hour)));
            }
            if let Some(p) = &g.mig_profile {
                if crate::domain::mig::parse_mig_slices(p).is_none() {
                    return Err(invalid(&format!("{key}.mig_profile"), format!("must be a MIG profile such as \"3g.40gb\", got {p:?}")));
                }
            }
            if !seen.insert((g.model.clone(), g.mig_profile.clone(), g.effective_from)) {
                return Err(invalid(&key, format!("duplicate price for {:?} effective {}", g.model, g.effective_from)));
            }
        }
        for (name, rates) in [("pricing.cpu", &self.pricing.cpu), ("pricing.memory", &self.pricing.memory)] {
            let mut dates = std::collections::BTreeSet::new();
            for (i, r) in rates.iter().enumerate() {
                if !(r.price_per_hour.is_finite() && r.price_per_hour >= 0.0) {
                    return Err(invalid(&format!("{name}[{i}].price_per_hour"), format!("must be a finite number >= 0, got {}", r.price_per_hour)));
                }
                if !dates.insert(r.effective_from) {
                    return Err(invalid(&format!("{name}[{i}]"), format!("two rates effective {}", r.effective_from)));
                }
            }
        }
        if let Some(c) = p.carbon_g_per_kwh {
            if !(c.is_finite() && c >= 0.0) {
                return Err(invalid("pricing.power.carbon_g_per_kwh", format!("must be a number >= 0, got {c}")));
            }
        }
        let timezone = parse_timezone(&p.timezone).map_err(|m| invalid("pricing.power.timezone", m))?;
        let mut bands = Vec::with_capacity(p.tariff.len());
        for (i, band) in p.tariff.iter().enumerate() {
            let key = format!("pricing.power.tariff[{i}]");
            if !(band.price_per_kwh.is_finite() && band.price_per_kwh >= 0.0) {
                return Err(invalid(&format!("{key}.price_per_kwh"), format!("must be a finite number >= 0, got {}", band.price_per_kwh)));
            }
            parse_hours(&band.hours).map_err(|m| invalid(&format!("{key}.hours"), m))?;
            parse_days(&band.days).map_err(|m| invalid(&format!("{key}.days"), m))?;
            if band.name.trim().is_empty() {
                return Err(invalid(&format!("{key}.name"), "must not be empty".into()));
            }
            bands.push(TimeBand::parse(&band.name, band.price_per_kwh, &band.hours, &band.days, band.effective_from).map_err(|m| invalid(&key, m))?);
        }
        if let Some((i, j, when)) = first_overlap(&bands) {
            return Err(invalid(
                &format!("pricing.power.tariff[{j}]"),
                format!(
                    "{:?} ({}/kWh) overlaps tariff[{i}] {:?} ({}/kWh) at {when} (both from {}): which price applies would depend on their order",
                    p.tariff[j].name, p.tariff[j].price_per_kwh, p.tariff[i].name, p.tariff[i].price_per_kwh, p.tariff[j].effective_from
                ),
            ));
        }
        for (i, ns) in self.pricing.shared_namespaces.iter().enumerate() {
            if ns.trim().is_empty() || ns == "__unallocated__" {
                return Err(invalid(&format!("pricing.shared_namespaces[{i}]"), format!("must name a namespace, got {ns:?}")));
            }
        }
        if let SpreadPolicy::Owner(owner) = self.idle_policy() {
            if self.pricing.shared_namespaces.contains(&owner) {
                return Err(invalid("pricing.idle_policy", format!("owner {owner:?} is itself a shared namespace")));
            }
        }
        if let SpreadPolicy::Owner(owner) = self.shared_policy() {
            if self.pricing.shared_namespaces.contains(&owner) {
                return Err(invalid("pricing.shared_policy", format!("owner {owner:?} is itself a shared namespace")));
            }
        }
        for (ns, entry) in &self.teams {
            if entry.team().trim().is_empty() {
                return Err(invalid(&format!("teams.{ns}"), "team must not be empty".into()));
            }
        }
        if !(self.run.min_completeness_pct.is_finite() && (0.0..=100.0).contains(&self.run.min_completeness_pct)) {
            return Err(invalid("run.min_completeness_pct", format!("must be between 0 and 100, got {}", self.run.min_completeness_pct)));
        }
        if !(self.idle.util_threshold_pct.is_finite() && self.idle.util_threshold_pct > 0.0 && self.idle.util_threshold_pct <= 100.0) {
            return Err(invalid("idle.util_threshold_pct", format!("must be above 0 and at most 100, got {}", self.idle.util_threshold_pct)));
        }
        if !(self.idle.zombie_mem_mib.is_finite() && self.idle.zombie_mem_mib >= 0.0) {
            return Err(invalid("idle.zombie_mem_mib", format!("must be a number >= 0, got {}", self.idle.zombie_mem_mib)));
        }
        if self.engine.max_result_rows == 0 {
            return Err(invalid("engine.max_result_rows", "must be at least 1".into()));
        }
        Ok(ResolvedTariff { timezone, bands })
    }
}
