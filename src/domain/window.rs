//! Report windows: `--month YYYY-MM`, `--from T --to T` with T as RFC 3339 or `YYYY-MM-DD` (UTC).

use chrono::{DateTime, Datelike, Duration, NaiveDate, NaiveTime, Utc};

/// A half-open UTC interval `[start, end)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
}

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum WindowError {
    #[error("{arg}: expected RFC 3339 (2026-10-01T00:00:00Z) or YYYY-MM-DD, got {value:?}")]
    BadTime { arg: &'static str, value: String },
    #[error("--month: expected YYYY-MM or `last`, got {0:?}")]
    BadMonth(String),
    #[error("empty window: --from {from} is not before --to {to}")]
    Empty { from: String, to: String },
}

pub fn parse_time(arg: &'static str, value: &str) -> Result<DateTime<Utc>, WindowError> {
    if let Ok(t) = DateTime::parse_from_rfc3339(value) {
        return Ok(t.with_timezone(&Utc));
    }
    if let Ok(d) = NaiveDate::parse_from_str(value, "%Y-%m-%d") {
        return Ok(d.and_time(NaiveTime::MIN).and_utc());
    }
    Err(WindowError::BadTime { arg, value: value.to_string() })
}

/// Milliseconds since the epoch at the start (00:00 UTC) of `day`.
pub fn day_start_ms(day: NaiveDate) -> i64 {
    day.and_time(NaiveTime::MIN).and_utc().timestamp_millis()
}

pub fn first_of_month(year: i32, month: u32) -> Option<NaiveDate> {
    NaiveDate::from_ymd_opt(year, month, 1)
}

impl Window {
    pub fn new(start: DateTime<Utc>, end: DateTime<Utc>) -> Result<Window, WindowError> {
        if start >= end {
            return Err(WindowError::Empty { from: start.to_rfc3339(), to: end.to_rfc3339() });
        }
        Ok(Window { start, end })
    }

    /// `YYYY-MM`, or `last` for the calendar month before `now`.
    pub fn month(spec: &str, now: DateTime<Utc>) -> Result<Window, WindowError> {
        let first = if spec == "last" {
            let this = first_of_month(now.year(), now.month()).expect("valid");
            let prev = this - Duration::days(1);
            first_of_month(prev.year(), prev.month()).expect("valid")
        } else {
            // Exactly YYYY-MM: chrono alone would take `2026-1`.
            let b = spec.as_bytes();
            if b.len() != 7 || b[4] != b'-' || !b.iter().enumerate().all(|(i, c)| i == 4 || c.is_ascii_digit()) {
                return Err(WindowError::BadMonth(spec.into()));
            }
            NaiveDate::parse_from_str(&format!("{spec}-01"), "%Y-%m-%d").map_err(|_| WindowError::BadMonth(spec.into()))?
        };
        let next = if first.month() == 12 { first_of_month(first.year() + 1, 1) } else { first_of_month(first.year(), first.month() + 1) }.expect("valid");
        Ok(Window { start: first.and_time(NaiveTime::MIN).and_utc(), end: next.and_time(NaiveTime::MIN).and_utc() })
    }

    /// The window's label for report folders: `YYYY-MM` for a calendar month, else `FROM_TO`.
    pub fn label(&self) -> String {
        let s = self.start.date_naive();
        if s.day() == 1 && self.start.time() == NaiveTime::MIN {
            if let Ok(m) = Window::month(&s.format("%Y-%m").to_string(), self.start) {
                if m == *self {
                    return s.format("%Y-%m").to_string();
                }
            }
        }
        format!("{}_{}", self.start.format("%Y%m%dT%H%M%SZ"), self.end.format("%Y%m%dT%H%M%SZ"))
    }

    /// The window before this one, to compare with: the calendar month before a calendar
    /// month, else a window of the same length that ends where this one starts.
    pub fn previous(&self) -> Window {
        let s = self.start.date_naive();
        if s.format("%Y-%m").to_string() == self.label() {
            let prev = s - Duration::days(1);
            let first = first_of_month(prev.year(), prev.month()).expect("valid");
            return Window { start: first.and_time(NaiveTime::MIN).and_utc(), end: self.start };
        }
        Window { start: self.start - (self.end - self.start), end: self.start }
    }

    /// First and last `date=` partitions that can hold rows of the window.
    pub fn date_bounds(&self) -> (NaiveDate, NaiveDate) {
        let last = (self.end - Duration::milliseconds(1)).date_naive();
        (self.start.date_naive(), last)
    }

    /// The first and last whole UTC day inside the window, if it holds one.
    pub fn whole_days(&self) -> Option<(NaiveDate, NaiveDate)> {
        let start = self.start.date_naive();
        let first = if self.start.time() == NaiveTime::MIN { start } else { start.succ_opt()? };
        let last = self.end.date_naive().pred_opt()?;
        (first <= last).then_some((first, last))
    }

    pub fn seconds(&self) -> i64 {
        (self.end - self.start).num_seconds()
    }

    /// The window cut at UTC midnights into pieces of at most `days` days (whole days, so no
    /// day's rows are split between pieces), in order, without gaps or overlaps.
    pub fn pieces(&self, days: i64) -> Vec<Window> {
        let mut pieces = Vec::new();
        let mut start = self.start;
        while start < self.end {
            let next = (start.date_naive() + Duration::days(days.max(1))).and_time(NaiveTime::MIN).and_utc();
            let end = next.min(self.end);
            pieces.push(Window { start, end });
            start = end;
        }
        pieces
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_are_whole_days_covering_the_window() {
        use chrono::TimeZone;
        let month = Window::month("2026-10", Utc::now()).unwrap();
        let starts: Vec<u32> = month.pieces(7).iter().map(|p| p.start.day()).collect();
        assert_eq!(starts, vec![1, 8, 15, 22, 29]);
        assert_eq!(month.pieces(7).last().unwrap().end, month.end);
        assert_eq!(month.pieces(1).len(), 31);
        let odd = Window::new(Utc.with_ymd_and_hms(2026, 10, 3, 13, 0, 0).unwrap(), Utc.with_ymd_and_hms(2026, 10, 11, 2, 0, 0).unwrap()).unwrap();
        let p = odd.pieces(7);
        assert_eq!(p.len(), 2);
        assert_eq!((p[0].start, p[0].end), (odd.start, Utc.with_ymd_and_hms(2026, 10, 10, 0, 0, 0).unwrap()));
        assert_eq!((p[1].start, p[1].end), (Utc.with_ymd_and_hms(2026, 10, 10, 0, 0, 0).unwrap(), odd.end));
        for w in odd.pieces(1).windows(2) {
            assert_eq!(w[0].end, w[1].start, "no gap, no overlap");
        }
        assert_eq!(odd.pieces(1).len(), 9);
    }

    #[test]
    fn the_previous_window() {
        let now = Utc::now();
        let march = Window::month("2026-03", now).unwrap();
        assert_eq!(march.previous(), Window::month("2026-02", now).unwrap(), "28 days before 31");
        assert_eq!(Window::month("2026-01", now).unwrap().previous(), Window::month("2025-12", now).unwrap());
        let odd = Window::new(parse_time("f", "2026-10-03T12:00:00Z").unwrap(), parse_time("t", "2026-10-05").unwrap()).unwrap();
        let before = odd.previous();
        assert_eq!((before.start, before.end), (parse_time("f", "2026-10-02T00:00:00Z").unwrap(), odd.start), "36 hours before");
    }

    #[test]
    fn month_windows() {
        let now = parse_time("now", "2026-01-15").unwrap();
        let w = Window::month("last", now).unwrap();
        assert_eq!(w.start, parse_time("x", "2025-12-01").unwrap());
        assert_eq!(w.end, parse_time("x", "2026-01-01").unwrap());
        assert_eq!(w.label(), "2025-12");
        let feb = Window::month("2028-02", now).unwrap();
        assert_eq!(feb.seconds(), 29 * 86400);
        assert!(Window::month("2026-13", now).is_err());
        let odd = Window::new(parse_time("f", "2026-01-02T06:00:00Z").unwrap(), parse_time("t", "2026-01-03").unwrap()).unwrap();
        assert_eq!(odd.label(), "20260102T060000Z_20260103T000000Z");
        assert_eq!(odd.date_bounds(), (NaiveDate::from_ymd_opt(2026, 1, 2).unwrap(), NaiveDate::from_ymd_opt(2026, 1, 2).unwrap()));
    }

    #[test]
    fn bad_times_name_the_argument() {
        let e = parse_time("--from", "yesterday").unwrap_err();
        assert!(e.to_string().contains("--from"));
        assert!(Window::new(parse_time("a", "2026-01-02").unwrap(), parse_time("b", "2026-01-01").unwrap()).is_err());
    }
}
