//! Power tariffs: a flat rate plus time-of-use bands (local hours and weekdays in a time
//! zone, with effective dates), resolved onto a 15-minute UTC grid. The grid is what SQL
//! joins against (`power_tariff`), so a rollup prices each sample with one equi-join.

use chrono::{DateTime, Datelike, TimeZone, Timelike, Utc};
use chrono_tz::Tz;

use crate::config::PowerPricing;
use crate::domain::tariff_time::TimeBand;
use crate::domain::units::BUCKET_MS;

/// The rate in force at an instant.
#[derive(Debug, Clone, PartialEq)]
pub struct Rate {
    pub band: String,
    pub price_per_kwh: f64,
}

/// A validated tariff, ready to resolve instants.
#[derive(Debug, Clone)]
pub struct Tariff {
    tz: Tz,
    flat: f64,
    /// Sorted by effective date; each date's bands in config order.
    bands: Vec<TimeBand>,
}

impl Tariff {
    /// The loaded config's tariff (resolved into typed values when it was loaded).
    pub fn from_config(p: &PowerPricing) -> Tariff {
        let mut bands = p.resolved.bands.clone();
        bands.sort_by_key(|b| b.effective_from); // stable: config order within a date
        Tariff { tz: p.resolved.timezone, flat: p.price_per_kwh, bands }
    }

    /// The band set with the latest effective date (local) on or before `t`; the first band
    /// covering the local time wins, else the flat rate.
    pub fn rate_at(&self, t: DateTime<Utc>) -> Rate {
        let local = t.with_timezone(&self.tz);
        let date = local.date_naive();
        let current = self.bands.iter().filter(|b| b.effective_from <= date).map(|b| b.effective_from).max();
        let minute = local.hour() * 60 + local.minute();
        let day = local.weekday();
        current
            .and_then(|d| self.bands.iter().filter(|b| b.effective_from == d).find(|b| b.covers(minute, day)))
            .map(|b| Rate { band: b.name.clone(), price_per_kwh: b.price })
            .unwrap_or(Rate { band: "flat".into(), price_per_kwh: self.flat })
    }

    /// The resolved grid over `[from, to)` (UTC, both on bucket edges): (bucket start ms, rate).
    pub fn grid(&self, from: i64, to: i64) -> Vec<(i64, Rate)> {
        let start = from.div_euclid(BUCKET_MS) * BUCKET_MS;
        (0..)
            .map(|i| start + i * BUCKET_MS)
            .take_while(|t| *t < to)
            .map(|t| (t, self.rate_at(Utc.timestamp_millis_opt(t).single().expect("valid instant"))))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::TariffBand;

    fn power(tz: &str, bands: &[(&str, f64, &str, &[&str], &str)]) -> PowerPricing {
        let mut p = raw_power(tz, bands);
        p.resolved = crate::config::ResolvedTariff {
            timezone: crate::domain::tariff_time::parse_timezone(tz).unwrap(),
            bands: p.tariff.iter().map(|b| TimeBand::parse(&b.name, b.price_per_kwh, &b.hours, &b.days, b.effective_from).unwrap()).collect(),
        };
        p
    }

    fn raw_power(tz: &str, bands: &[(&str, f64, &str, &[&str], &str)]) -> PowerPricing {
        PowerPricing {
            timezone: tz.into(),
            tariff: bands
                .iter()
                .map(|(name, price, hours, days, from)| TariffBand {
                    name: name.to_string(),
                    price_per_kwh: *price,
                    hours: hours.to_string(),
                    days: days.iter().map(|d| d.to_string()).collect(),
                    effective_from: from.parse().unwrap(),
                })
                .collect(),
            ..PowerPricing::default()
        }
    }

    fn at(s: &str) -> DateTime<Utc> {
        s.parse().unwrap()
    }

    #[test]
    fn night_band_in_local_time_with_dst() {
        let all = ["mon", "tue", "wed", "thu", "fri", "sat", "sun"];
        let t = Tariff::from_config(&power(
            "Europe/Berlin",
            &[("night", 0.08, "22:00-06:00", &all, "2026-10-15"), ("day", 0.15, "06:00-22:00", &all, "2026-10-15")],
        ));
        // Before the tariff starts: the flat rate.
        assert_eq!(t.rate_at(at("2026-10-14T21:00:00Z")).band, "flat"); // 23:00 local, Oct 14
                                                                        // 2026-10-20 is CEST (UTC+2): 20:00Z is 22:00 local, night; 19:45Z is day.
        assert_eq!(t.rate_at(at("2026-10-20T20:00:00Z")).band, "night");
        assert_eq!(t.rate_at(at("2026-10-20T19:45:00Z")).band, "day");
        // After the change to CET (2026-10-25), 22:00 local is 21:00Z.
        assert_eq!(t.rate_at(at("2026-10-27T21:00:00Z")).band, "night");
        assert_eq!(t.rate_at(at("2026-10-27T20:45:00Z")).band, "day");
        assert_eq!(t.rate_at(at("2026-10-27T05:00:00Z")).band, "day");
        assert_eq!(t.rate_at(at("2026-10-27T04:45:00Z")).band, "night");
        // The tariff starts at local midnight of its date (22:00Z the day before, CEST).
        assert_eq!(t.rate_at(at("2026-10-14T22:00:00Z")).band, "night");
    }

    #[test]
    fn weekend_band_and_grid() {
        let t = Tariff::from_config(&power("UTC", &[("weekend", 0.05, "00:00-24:00", &["sat", "sun"], "2026-01-01")]));
        // 2026-10-03 is a Saturday.
        assert_eq!(t.rate_at(at("2026-10-03T12:00:00Z")).price_per_kwh, 0.05);
        assert_eq!(t.rate_at(at("2026-10-02T23:45:00Z")).price_per_kwh, 0.12);
        let from = at("2026-10-02T23:30:00Z").timestamp_millis();
        let g = t.grid(from, from + 4 * BUCKET_MS);
        assert_eq!(g.iter().map(|(_, r)| r.band.as_str()).collect::<Vec<_>>(), ["flat", "flat", "weekend", "weekend"]);
    }
}
