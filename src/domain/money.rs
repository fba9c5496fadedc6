//! Exact rounding for reports: values are exact rationals (integer / denominator); they are
//! rounded to a fixed number of decimals with the largest-remainder method, so the rounded
//! rows always add up to the rounded total.

/// Rounds `value / denom` to an integer count of `10^-decimals`, half away from zero.
pub fn round_ratio(value: i128, denom: i128, decimals: u32) -> i128 {
    let num = value * 10i128.pow(decimals);
    let q = num / denom;
    let r = num % denom;
    if 2 * r.abs() >= denom.abs() {
        q + num.signum() * denom.signum()
    } else {
        q
    }
}

/// Rounds every `values[i] / denom` to `decimals` places so that the rounded parts sum to the
/// rounded total; returns (parts, total), both in units of `10^-decimals`.
pub fn apportion(values: &[i128], denom: i128, decimals: u32) -> (Vec<i128>, i128) {
    let total_exact: i128 = values.iter().sum();
    let total = round_ratio(total_exact, denom, decimals);
    let scale = 10i128.pow(decimals);
    let mut parts: Vec<i128> = values.iter().map(|v| (v * scale).div_euclid(denom)).collect();
    let remainders: Vec<(i128, usize)> = values.iter().enumerate().map(|(i, v)| ((v * scale).rem_euclid(denom), i)).collect();
    let short = total - parts.iter().sum::<i128>();
    largest_remainder(&mut parts, remainders, short);
    (parts, total)
}

/// Splits `amount` over `weights` exactly (largest remainder, ties to the earlier index).
/// Weights must be non-negative with a positive sum, and small enough that amount % sum x
/// weight fits in i128 (weights in cents or 1e-4 GPU-hours are).
pub fn split(amount: i128, weights: &[i128]) -> Vec<i128> {
    let sum: i128 = weights.iter().sum();
    assert!(sum > 0, "split needs a positive weight");
    let (q, r) = (amount.div_euclid(sum), amount.rem_euclid(sum));
    // Overflow would make the parts nonsense (and the remainder loop endless): it is a bug in
    // the caller's weights, so it stops here.
    let rw = |w: &i128| r.checked_mul(*w).expect("split: weights too large for i128 (scale them down)");
    let mut parts: Vec<i128> = weights.iter().map(|w| q * w + rw(w) / sum).collect();
    let remainders: Vec<(i128, usize)> = weights.iter().enumerate().map(|(i, w)| (rw(w) % sum, i)).collect();
    let short = amount - parts.iter().sum::<i128>();
    largest_remainder(&mut parts, remainders, short);
    parts
}

/// The largest-remainder step both share: `short` units (either sign) go one at a time to the
/// parts with the largest `(remainder, index)` first (ties to the earlier index); units taken
/// back come from the smallest remainders first. Deterministic.
fn largest_remainder(parts: &mut [i128], mut remainders: Vec<(i128, usize)>, mut short: i128) {
    remainders.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut i = 0;
    while short > 0 && !remainders.is_empty() {
        parts[remainders[i % remainders.len()].1] += 1;
        short -= 1;
        i += 1;
    }
    while short < 0 && !remainders.is_empty() {
        let idx = remainders[remainders.len() - 1 - (i % remainders.len())].1;
        parts[idx] -= 1;
        short += 1;
        i += 1;
    }
}

/// Formats `units` of `10^-decimals` as a plain decimal string ("1234.50").
pub fn format_units(units: i128, decimals: u32) -> String {
    if decimals == 0 {
        return units.to_string();
    }
    let scale = 10i128.pow(decimals);
    let sign = if units < 0 { "-" } else { "" };
    let a = units.abs();
    format!("{sign}{}.{:0width$}", a / scale, a % scale, width = decimals as usize)
}

/// Active ISO 4217 currency codes (FOCUS' BillingCurrency must be one).
const ISO_4217: &str = "AED AFN ALL AMD ANG AOA ARS AUD AWG AZN BAM BBD BDT BGN BHD BIF BMD BND BOB BRL BSD BTN BWP BYN BZD \
CAD CDF CHF CLP CNY COP CRC CUC CUP CVE CZK DJF DKK DOP DZD EGP ERN ETB EUR FJD FKP GBP GEL GHS GIP GMD GNF GTQ GYD \
HKD HNL HTG HUF IDR ILS INR IQD IRR ISK JMD JOD JPY KES KGS KHR KMF KPW KRW KWD KYD KZT LAK LBP LKR LRD LSL LYD MAD \
MDL MGA MKD MMK MNT MOP MRU MUR MVR MWK MXN MYR MZN NAD NGN NIO NOK NPR NZD OMR PAB PEN PGK PHP PKR PLN PYG QAR RON \
RSD RUB RWF SAR SBD SCR SDG SEK SGD SHP SLE SLL SOS SRD SSP STN SVC SYP SZL THB TJS TMT TND TOP TRY TTD TWD TZS UAH \
UGX USD UYU UZS VES VND VUV WST XAF XCD XCG XOF XPF YER ZAR ZMW ZWG ZWL";

/// Whether `code` is an active ISO 4217 currency code (upper case, as FOCUS writes it).
pub fn is_iso4217(code: &str) -> bool {
    code.len() == 3 && ISO_4217.split_ascii_whitespace().any(|c| c == code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_exact_and_proportional() {
        let parts = split(1_000_003, &[1, 1, 1]);
        assert_eq!(parts.iter().sum::<i128>(), 1_000_003);
        assert_eq!(parts, vec![333_335, 333_334, 333_334]);
        let parts = split(-10, &[3, 1]);
        assert_eq!(parts.iter().sum::<i128>(), -10);
        assert_eq!(parts, vec![-7, -3]);
        let big = 3_600_000_000 * 1_000_000_000_000 * 123_456; // a currency unit of raw money x 123,456
        let parts = split(big, &[500_000_00, 250_000_00, 1]);
        assert_eq!(parts.iter().sum::<i128>(), big);
    }

    #[test]
    fn parts_sum_to_total() {
        // Three thirds of 1.00 must print as parts that add up to 1.00.
        let (parts, total) = apportion(&[1, 1, 1], 3, 2);
        assert_eq!(total, 100);
        assert_eq!(parts.iter().sum::<i128>(), 100);
        assert_eq!(parts, vec![34, 33, 33]);
        let (parts, total) = apportion(&[17142857, 12857143], 3_600_000_000, 4);
        assert_eq!(parts.iter().sum::<i128>(), total);
    }

    #[test]
    fn rounding_and_format() {
        assert_eq!(round_ratio(5, 10, 0), 1);
        assert_eq!(round_ratio(-5, 10, 0), -1);
        assert_eq!(round_ratio(4, 10, 0), 0);
        assert_eq!(format_units(123450, 2), "1234.50");
        assert_eq!(format_units(-5, 2), "-0.05");
        assert_eq!(format_units(7, 0), "7");
    }
}
