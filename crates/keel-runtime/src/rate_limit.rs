//! A model's rate limits (`Model.limits`), shared by every run of the process: requests and
//! tokens per window, and requests in flight. A round that would exceed them waits for room
//! — cancellable with its run, recorded as `runtime.model.queued` — instead of failing; a
//! provider's `Retry-After` on a rate-limited answer holds every run of the model back until
//! then.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use keel_workspace::ModelLimitsSpec;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// The limits of one model and what its window holds.
#[derive(Debug)]
pub(crate) struct ModelLimiter {
    requests: Option<usize>,
    tokens: Option<u64>,
    per: Duration,
    window: Mutex<Window>,
    in_flight: Option<Arc<Semaphore>>,
}

#[derive(Debug, Default)]
struct Window {
    /// When each request of the window was admitted.
    requests: VecDeque<Instant>,
    /// When each answer of the window came, and its tokens.
    tokens: VecDeque<(Instant, u64)>,
    /// No request before this (a provider's `Retry-After`).
    paused_until: Option<Instant>,
}

impl ModelLimiter {
    pub(crate) fn new(spec: &ModelLimitsSpec) -> Self {
        Self {
            requests: spec.requests.map(|n| n as usize),
            tokens: spec.tokens,
            per: spec.per.0.max(Duration::from_millis(1)),
            window: Mutex::default(),
            in_flight: spec
                .max_concurrent
                .map(|n| Arc::new(Semaphore::new(n as usize))),
        }
    }

    /// Waits until a request fits the limits and admits it; returns how long it waited and
    /// its place among the requests in flight (held until the attempt ends).
    pub(crate) async fn admit(&self) -> (Duration, Option<OwnedSemaphorePermit>) {
        let started = Instant::now();
        let permit = match &self.in_flight {
            Some(slots) => slots.clone().acquire_owned().await.ok(),
            None => None,
        };
        loop {
            let wait = {
                let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
                let now = Instant::now();
                match self.room_at(&mut window, now) {
                    None => {
                        window.requests.push_back(now);
                        return (started.elapsed(), permit);
                    }
                    Some(until) => until.saturating_duration_since(now),
                }
            };
            tokio::time::sleep(wait.max(Duration::from_millis(1))).await;
        }
    }

    /// `None` when a request fits now, else when it may.
    fn room_at(&self, window: &mut Window, now: Instant) -> Option<Instant> {
        let start = now.checked_sub(self.per);
        let expired = |at: Instant| start.is_some_and(|start| at <= start);
        while window.requests.front().is_some_and(|at| expired(*at)) {
            window.requests.pop_front();
        }
        while window.tokens.front().is_some_and(|(at, _)| expired(*at)) {
            window.tokens.pop_front();
        }
        let mut until = window.paused_until.filter(|until| *until > now);
        if let Some(limit) = self.requests
            && window.requests.len() >= limit
        {
            let oldest = window.requests[window.requests.len() - limit];
            until = until.max(Some(oldest + self.per));
        }
        if let Some(limit) = self.tokens {
            let mut used: u64 = window.tokens.iter().map(|(_, n)| n).sum();
            // Room comes back as the oldest answers leave the window.
            for (at, n) in &window.tokens {
                if used < limit {
                    break;
                }
                used -= n;
                until = until.max(Some(*at + self.per));
            }
        }
        until
    }

    /// Counts an answer's tokens in the window.
    pub(crate) fn used(&self, tokens: u64) {
        if self.tokens.is_some() && tokens > 0 {
            let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
            window.tokens.push_back((Instant::now(), tokens));
        }
    }

    /// Holds every request back for `delay` (a provider's `Retry-After`).
    pub(crate) fn pause(&self, delay: Duration) {
        let until = Instant::now() + delay;
        let mut window = self.window.lock().unwrap_or_else(PoisonError::into_inner);
        window.paused_until = window.paused_until.max(Some(until));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limiter(requests: Option<u32>, tokens: Option<u64>, per_ms: u64) -> ModelLimiter {
        ModelLimiter::new(&ModelLimitsSpec {
            requests,
            tokens,
            per: keel_workspace::Duration(Duration::from_millis(per_ms)),
            max_concurrent: None,
        })
    }

    #[tokio::test]
    async fn requests_past_the_limit_wait_for_the_window_to_move() {
        let limiter = limiter(Some(2), None, 100);
        let started = Instant::now();
        limiter.admit().await;
        limiter.admit().await;
        limiter.admit().await;
        // The third waited for the first to leave the window (only a lower bound: the
        // machine may be slow, never fast).
        assert!(started.elapsed() >= Duration::from_millis(100));
    }

    #[tokio::test]
    async fn tokens_past_the_limit_wait_and_a_retry_after_holds_everyone_back() {
        let limiter = limiter(None, Some(100), 100);
        let started = Instant::now();
        limiter.admit().await;
        limiter.used(150);
        limiter.admit().await;
        assert!(started.elapsed() >= Duration::from_millis(100));
        limiter.pause(Duration::from_millis(50));
        let paused = Instant::now();
        limiter.admit().await;
        assert!(paused.elapsed() >= Duration::from_millis(50));
    }
}
