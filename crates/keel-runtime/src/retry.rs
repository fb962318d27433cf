//! Backoff for retryable model failures: exponential from `initialBackoff`, capped at
//! `maxBackoff`, with jitter; a server's `Retry-After` is honoured instead when present.

use std::time::Duration;

use keel_workspace::RetryPolicy;

/// The longest `Retry-After` we honour; anything longer is treated as this.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(300);

/// How long to wait before attempt `attempt + 1`, after attempt `attempt` (1-based) failed.
pub fn backoff(policy: &RetryPolicy, attempt: u32, retry_after: Option<Duration>) -> Duration {
    if let Some(wait) = retry_after {
        return wait.min(MAX_RETRY_AFTER);
    }
    let initial = policy.initial_backoff.0;
    let cap = policy.max_backoff.0.max(initial);
    let exp = attempt.saturating_sub(1).min(20);
    let base = initial.saturating_mul(1u32 << exp).min(cap);
    // "Equal jitter": half fixed, half random, so waits never collapse to zero.
    let half = base / 2;
    half + half.mul_f64(fastrand::f64())
}

#[cfg(test)]
mod tests {
    use keel_workspace::Duration as D;

    use super::*;

    fn policy() -> RetryPolicy {
        RetryPolicy {
            max_attempts: 5,
            initial_backoff: D::from_millis(100),
            max_backoff: D::from_millis(300),
        }
    }

    #[test]
    fn grows_exponentially_within_jitter_and_caps() {
        for _ in 0..100 {
            let first = backoff(&policy(), 1, None);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let second = backoff(&policy(), 2, None);
            assert!(second >= Duration::from_millis(100) && second <= Duration::from_millis(200));
            let tenth = backoff(&policy(), 10, None);
            assert!(tenth >= Duration::from_millis(150) && tenth <= Duration::from_millis(300));
        }
    }

    #[test]
    fn honours_retry_after() {
        assert_eq!(
            backoff(&policy(), 1, Some(Duration::from_secs(2))),
            Duration::from_secs(2)
        );
        assert_eq!(
            backoff(&policy(), 1, Some(Duration::from_secs(10_000))),
            MAX_RETRY_AFTER
        );
    }
}
