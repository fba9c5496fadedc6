//! Sizes in the config and on the command line (`engine.memory_limit`, `--memory-limit`, ...).

/// Parses "1G", "512M", "64K", "1073741824" or "0" (unbounded) into bytes.
pub fn parse_size(text: &str) -> std::result::Result<Option<usize>, String> {
    let t = text.trim();
    if t.is_empty() || t == "0" {
        return Ok(None);
    }
    let (num, mult) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 1usize << 10),
        Some('M') => (&t[..t.len() - 1], 1 << 20),
        Some('G') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: f64 = num.trim().parse().map_err(|_| format!("expected a size like 512M or 2G, got {text:?}"))?;
    if !(n.is_finite() && n > 0.0) {
        return Err(format!("expected a positive size, got {text:?}"));
    }
    Ok(Some((n * mult as f64) as usize))
}

/// A size as configured (`engine.memory_limit`, `engine.spill_limit`, ...), parsed once when
/// the config is read: bytes, or unbounded ("0").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemorySize(Option<usize>);

impl MemorySize {
    pub fn parse(text: &str) -> std::result::Result<MemorySize, String> {
        parse_size(text).map(MemorySize)
    }

    pub const fn of_bytes(bytes: usize) -> MemorySize {
        MemorySize(Some(bytes))
    }

    /// The bytes, or None for unbounded.
    pub fn limit(self) -> Option<usize> {
        self.0
    }
}
