//! Deterministic randomness: a SplitMix64 stream for the schedule and a stateless hash for
//! per-sample noise, so any sample can be recomputed on its own (the OpenMetrics writer and
//! the ledger recompute the same values the lake writer saw).

#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        mix(self.0)
    }

    /// Uniform in [0, 1).
    pub fn f64(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    pub fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.f64()
    }

    /// Uniform integer in [lo, hi].
    pub fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next_u64() % ((hi - lo + 1) as u64)) as i64
    }

    /// Log-uniform in [lo, hi].
    pub fn log_uniform(&mut self, lo: f64, hi: f64) -> f64 {
        (lo.ln() + (hi.ln() - lo.ln()) * self.f64()).exp()
    }

    /// Poisson-distributed count with mean `lambda` (Knuth; lambda is small per step).
    pub fn poisson(&mut self, lambda: f64) -> u32 {
        if lambda <= 0.0 {
            return 0;
        }
        let l = (-lambda).exp();
        let mut k = 0;
        let mut p = 1.0;
        loop {
            p *= self.f64();
            if p <= l {
                return k;
            }
            k += 1;
        }
    }

    /// Index picked with the given weights.
    pub fn weighted(&mut self, weights: &[f64]) -> usize {
        let total: f64 = weights.iter().sum();
        let mut x = self.f64() * total;
        for (i, w) in weights.iter().enumerate() {
            if x < *w {
                return i;
            }
            x -= w;
        }
        weights.len() - 1
    }
}

pub fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Stateless uniform in [0, 1) from (seed, a, b, channel).
pub fn hash01(seed: u64, a: u64, b: u64, channel: u64) -> f64 {
    let h = mix(seed ^ mix(a.wrapping_mul(0x100_0000_01B3) ^ mix(b ^ (channel << 56))));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// Stateless approximately normal noise (mean 0, sd 1): sum of four uniforms.
pub fn hash_normal(seed: u64, a: u64, b: u64, channel: u64) -> f64 {
    let s: f64 = (0..4).map(|i| hash01(seed, a, b, channel * 8 + i)).sum();
    (s - 2.0) * (3.0f64).sqrt()
}
