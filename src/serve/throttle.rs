//! Failed logins slowed per source address: after [`FREE`] failed logins from one address
//! (forgotten [`FORGET`] after its last), its next logins start one per [`SPACING`], in
//! turn, however many connections it opens at once. Password guessing from one address goes
//! from hundreds a second to four; a user who mistyped twice is not slowed. A login that succeeds
//! forgives nothing (a known account must not reset the count for guessing another's).

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Duration;

use std::time::Instant;

/// Failures from an address that cost nothing.
pub const FREE: u32 = 3;
/// Time between two logins from an address past [`FREE`] failures.
const SPACING: Duration = Duration::from_millis(250);
/// An address's failures are forgotten this long after its last one.
const FORGET: Duration = Duration::from_secs(60);

#[derive(Debug)]
struct Recent {
    failures: u32,
    last_failure: Instant,
    next_turn: Instant,
}

/// Recent failed logins per source address.
#[derive(Debug, Default)]
pub struct FailedLogins {
    recent: Mutex<HashMap<IpAddr, Recent>>,
}

impl FailedLogins {
    /// How long a login from `addr` starting now waits for its turn (zero for an address
    /// without recent failures). Each waiting login takes the next turn.
    pub fn turn(&self, addr: IpAddr) -> Duration {
        self.turn_at(addr, Instant::now())
    }

    /// A login from `addr` failed (a wrong password, an unknown user); its failures so far.
    pub fn failed(&self, addr: IpAddr) -> u32 {
        self.failed_at(addr, Instant::now())
    }

    fn turn_at(&self, addr: IpAddr, now: Instant) -> Duration {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        recent.retain(|_, r| now.saturating_duration_since(r.last_failure) < FORGET);
        let Some(r) = recent.get_mut(&addr) else { return Duration::ZERO };
        if r.failures < FREE {
            return Duration::ZERO;
        }
        let turn = r.next_turn.max(now);
        r.next_turn = turn + SPACING;
        turn - now
    }

    fn failed_at(&self, addr: IpAddr, now: Instant) -> u32 {
        let mut recent = self.recent.lock().unwrap_or_else(|e| e.into_inner());
        let r = recent.entry(addr).or_insert(Recent { failures: 0, last_failure: now, next_turn: now });
        r.failures += 1;
        r.last_failure = now;
        r.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_past_the_free_ones_space_logins_from_that_address_only() {
        let logins = FailedLogins::default();
        let (a, b): (IpAddr, IpAddr) = ("10.0.0.1".parse().unwrap(), "10.0.0.2".parse().unwrap());
        let t0 = Instant::now();
        for _ in 0..FREE {
            assert_eq!(logins.turn_at(a, t0), Duration::ZERO);
            logins.failed_at(a, t0);
        }
        // Three logins at once from a: one turn each, in a row.
        assert_eq!([logins.turn_at(a, t0), logins.turn_at(a, t0), logins.turn_at(a, t0)], [Duration::ZERO, SPACING, SPACING * 2]);
        assert_eq!(logins.turn_at(b, t0), Duration::ZERO, "another address is not slowed");
        assert_eq!(logins.turn_at(a, t0 + SPACING), SPACING * 2, "turns already taken stay taken");
        assert_eq!(logins.turn_at(a, t0 + FORGET), Duration::ZERO, "forgotten a minute after the last failure");
        assert_eq!(logins.failed_at(a, t0 + FORGET), 1);
    }
}
