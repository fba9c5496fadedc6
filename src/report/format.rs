//! Numbers and headings as people read them on the month's page: thousands separators, money
//! to the cent, hours and kWh to one decimal, shares to one decimal, changes with their sign,
//! instants to the minute. Rounding is exact (half away from zero on the decimal units), so a
//! shown cost is the file's cost to the cent. The files themselves keep every digit.

use crate::domain::money::{format_units, round_ratio};

use super::render::Cell;

/// The decimals a column is shown with, where the page rounds it.
fn shown_decimals(column: &str) -> Option<u32> {
    if column.contains("cost") || column.contains("price") {
        Some(2)
    } else if column.contains("hours") || column.ends_with("_kwh") || column.ends_with("_pct") {
        Some(1)
    } else {
        None
    }
}

/// `units` at `decimals` with a comma between thousands: `1234567.891` as `1,234,567.891`.
fn grouped(units: i128, decimals: u32) -> String {
    let plain = format_units(units.abs(), decimals);
    let (int, frac) = match plain.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (plain.as_str(), None),
    };
    let mut out = String::with_capacity(plain.len() + int.len() / 3 + 1);
    if units < 0 {
        out.push('-');
    }
    for (i, ch) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(ch);
    }
    if let Some(f) = frac {
        out.push('.');
        out.push_str(f);
    }
    out
}

/// A cell of `column` as the page shows it.
pub fn cell_text(column: &str, cell: &Cell) -> String {
    let signed = column.contains("change");
    let with_sign = |units: i128, text: String| if signed && units > 0 { format!("+{text}") } else { text };
    match cell {
        Cell::Dec { units, decimals } => {
            let want = shown_decimals(column).unwrap_or(*decimals);
            let u = if want < *decimals { round_ratio(*units, 10i128.pow(decimals - want), 0) } else { units * 10i128.pow(want - decimals) };
            with_sign(u, grouped(u, want))
        }
        Cell::Int(v) if column == "hour" || column.ends_with("_id") => v.to_string(),
        Cell::Int(v) => with_sign(*v as i128, grouped(*v as i128, 0)),
        Cell::Time(ms) => chrono::DateTime::from_timestamp_millis(*ms).map_or_else(|| ms.to_string(), |t| t.format("%Y-%m-%d %H:%M").to_string()),
        Cell::Str(s) if s.len() == 20 && s.ends_with('Z') && s.as_bytes().get(10) == Some(&b'T') => format!("{} {}", &s[..10], &s[11..16]),
        other => other.text(),
    }
}

/// A number drawn on a chart axis: grouped, at `decimals`.
pub fn human_number(v: f64, decimals: u32) -> String {
    if !v.is_finite() {
        return String::new();
    }
    grouped((v * 10f64.powi(decimals as i32)).round() as i128, decimals)
}

/// A column's heading: words, not identifiers (`avg_util_pct` as `Avg util %`, `total_cost` as
/// `Total cost (USD)`).
pub fn heading(column: &str, currency: &str) -> String {
    let words: Vec<String> = column
        .split('_')
        .filter(|w| !w.is_empty())
        .map(|w| match w {
            "gpu" => "GPU".to_string(),
            "gpus" => "GPUs".to_string(),
            "cpu" => "CPU".to_string(),
            "pct" => "%".to_string(),
            "kwh" => "kWh".to_string(),
            "mib" => "MiB".to_string(),
            "fb" => "FB".to_string(),
            "mig" => "MIG".to_string(),
            "uuid" => "UUID".to_string(),
            "id" => "ID".to_string(),
            "oom" => "OOM".to_string(),
            "min" => "(min)".to_string(),
            "avg" => "avg".to_string(),
            w => w.to_string(),
        })
        .collect();
    let mut text = words.join(" ");
    if let Some(first) = text.get(..1) {
        text = first.to_uppercase() + &text[1..];
    }
    // Money: a column with the word `cost` (not `cost_centre`, not a share).
    let tokens: Vec<&str> = column.split('_').collect();
    if tokens.contains(&"cost") && !tokens.contains(&"centre") && !tokens.contains(&"pct") {
        text.push_str(&format!(" ({currency})"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dec(units: i128, decimals: u32) -> Cell {
        Cell::Dec { units, decimals }
    }

    #[test]
    fn money_hours_and_shares_as_finance_reads_them() {
        assert_eq!(cell_text("total_cost", &dec(20805120, 2)), "208,051.20");
        assert_eq!(cell_text("gpu_hours", &dec(97514500, 4)), "9,751.5");
        assert_eq!(cell_text("gpu_hours", &dec(97514499, 4)), "9,751.4");
        assert_eq!(cell_text("avg_util_pct", &dec(4240, 2)), "42.4");
        assert_eq!(cell_text("energy_kwh", &dec(-12345678, 4)), "-1,234.6");
        assert_eq!(cell_text("cost_change", &dec(123456, 2)), "+1,234.56");
        assert_eq!(cell_text("cost_change", &dec(-5, 2)), "-0.05");
        assert_eq!(cell_text("wait_min", &dec(54462, 2)), "544.62");
        assert_eq!(cell_text("pods", &Cell::Int(4675)), "4,675");
        assert_eq!(cell_text("hour", &Cell::Int(1500)), "1500");
        assert_eq!(cell_text("first_seen", &Cell::Str("2026-11-02T11:10:30Z".into())), "2026-11-02 11:10");
        assert_eq!(cell_text("total_cost", &dec(999, 2)), "9.99");
        assert_eq!(grouped(100000000, 2), "1,000,000.00");
        assert_eq!(grouped(-100, 0), "-100");
        assert_eq!(human_number(1612.6, 0), "1,613");
    }

    #[test]
    fn headings_are_words() {
        assert_eq!(heading("avg_util_pct", "USD"), "Avg util %");
        assert_eq!(heading("total_cost", "EUR"), "Total cost (EUR)");
        assert_eq!(heading("idle_gpu_hours", "USD"), "Idle GPU hours");
        assert_eq!(heading("p95_wait_min", "USD"), "P95 wait (min)");
        assert_eq!(heading("cost_diff_pct", "USD"), "Cost diff %");
        assert_eq!(heading("cost_charged", "USD"), "Cost charged (USD)");
        assert_eq!(heading("cost_centre", "USD"), "Cost centre");
        assert_eq!(heading("list_cost", "USD"), "List cost (USD)");
    }
}
