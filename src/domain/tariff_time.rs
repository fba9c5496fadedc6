//! When a power tariff band is in force: local hours and weekdays in a time zone, from an
//! effective date. Parsed once, from the config's text, into typed values.

use chrono::{NaiveDate, Weekday};
use chrono_tz::Tz;

pub fn parse_timezone(name: &str) -> Result<Tz, String> {
    name.parse::<Tz>().map_err(|_| format!("must be an IANA time zone such as \"UTC\" or \"Europe/Berlin\", got {name:?}"))
}

/// "22:00-06:00" or "22-06" -> minutes of the local day [start, end); end may be 24:00, and
/// an end before the start wraps past midnight. Minutes must be multiples of 15.
pub fn parse_hours(text: &str) -> Result<(u32, u32), String> {
    let bad = || format!("must look like \"22:00-06:00\" (local, 15-minute steps), got {text:?}");
    let (a, b) = text.split_once('-').ok_or_else(bad)?;
    let minute = |s: &str| -> Option<u32> {
        let s = s.trim();
        let (h, m) = match s.split_once(':') {
            Some((h, m)) => (h.parse::<u32>().ok()?, m.parse::<u32>().ok()?),
            None => (s.parse::<u32>().ok()?, 0),
        };
        (m < 60 && m % 15 == 0 && (h < 24 || (h == 24 && m == 0))).then_some(h * 60 + m)
    };
    let (start, end) = (minute(a).ok_or_else(bad)?, minute(b).ok_or_else(bad)?);
    if start == end || start == 24 * 60 {
        return Err(format!("{} (an empty band)", bad()));
    }
    Ok((start, end))
}

pub fn parse_days(days: &[String]) -> Result<Vec<Weekday>, String> {
    if days.is_empty() {
        return Err("must name at least one day (mon ... sun)".into());
    }
    days.iter().map(|d| d.trim().parse::<Weekday>().map_err(|_| format!("unknown day {d:?}; use mon, tue, wed, thu, fri, sat, sun"))).collect()
}

/// A tariff band, typed: its price, the local minutes of the day `[start, end)` (wrapping past
/// midnight when `end < start`), its weekdays and the local date it is in force from.
#[derive(Debug, Clone, PartialEq)]
pub struct TimeBand {
    pub name: String,
    pub price: f64,
    pub start: u32,
    pub end: u32,
    pub days: Vec<Weekday>,
    pub effective_from: NaiveDate,
}

impl TimeBand {
    /// A band from the config's text: `hours` as [`parse_hours`], `days` as [`parse_days`].
    pub fn parse(name: &str, price: f64, hours: &str, days: &[String], effective_from: NaiveDate) -> Result<TimeBand, String> {
        let (start, end) = parse_hours(hours)?;
        Ok(TimeBand { name: name.to_string(), price, start, end, days: parse_days(days)?, effective_from })
    }

    /// Whether the band covers local minute `minute` of a `day`.
    pub fn covers(&self, minute: u32, day: Weekday) -> bool {
        let in_hours = if self.start < self.end { minute >= self.start && minute < self.end } else { minute >= self.start || minute < self.end };
        in_hours && self.days.contains(&day)
    }
}

/// Two bands in force from the same date, at different prices, that cover the same local time:
/// `(i, j, when)` for the first such pair (indices, `j` the later), e.g. `(0, 1, "mon 22:00")`.
/// The first band would silently decide the price, so the config is refused instead; bands at
/// one price may overlap (a weekend band over the nightly one).
pub fn first_overlap(bands: &[TimeBand]) -> Option<(usize, usize, String)> {
    const DAYS: [Weekday; 7] = [Weekday::Mon, Weekday::Tue, Weekday::Wed, Weekday::Thu, Weekday::Fri, Weekday::Sat, Weekday::Sun];
    for j in 0..bands.len() {
        for i in 0..j {
            if bands[i].effective_from != bands[j].effective_from || bands[i].price == bands[j].price {
                continue;
            }
            for day in DAYS {
                for minute in (0..24 * 60).step_by(15) {
                    if bands[i].covers(minute, day) && bands[j].covers(minute, day) {
                        let name = format!("{day}").to_lowercase();
                        return Some((i, j, format!("{name} {:02}:{:02}", minute / 60, minute % 60)));
                    }
                }
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hours_parse_and_reject() {
        assert_eq!(parse_hours("22:00-06:00"), Ok((1320, 360)));
        assert_eq!(parse_hours("7-19"), Ok((420, 1140)));
        assert_eq!(parse_hours("00:00-24:00"), Ok((0, 1440)));
        assert!(parse_hours("22:10-06:00").is_err());
        assert!(parse_hours("25-06").is_err());
        assert!(parse_hours("06-06").is_err());
        assert!(parse_hours("night").is_err());
    }
}
