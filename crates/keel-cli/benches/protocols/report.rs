//! The bench's figures: the surfaces, a request's three timings, a round's percentiles and
//! the added latency over `/v1`, and the summary over the rounds; what machine this was.

use crate::stats::median;
use std::collections::BTreeMap;
use std::time::Duration;

/// The ways in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Surface {
    /// `POST /v1/chat/completions` with `stream: true`: the baseline.
    V1,
    /// The same with `X-Keel-Session` naming a new session: a session's first turn, as every
    /// A2A task without a context and every ACP prompt here is.
    V1Session,
    Agui,
    A2a,
    Acp,
}

impl Surface {
    pub(crate) const ALL: [Surface; 5] = [
        Surface::V1,
        Surface::V1Session,
        Surface::Agui,
        Surface::A2a,
        Surface::Acp,
    ];

    pub(crate) fn name(self) -> &'static str {
        match self {
            Surface::V1 => "/v1",
            Surface::V1Session => "/v1+session",
            Surface::Agui => "AG-UI",
            Surface::A2a => "A2A",
            Surface::Acp => "ACP",
        }
    }
}

/// One request's timings, from sending it.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Sample {
    /// The first event of its stream.
    pub(crate) first: Duration,
    /// The first piece of the answer's text.
    pub(crate) text: Duration,
    /// The end of the run.
    pub(crate) end: Duration,
}

/// A round's requests.
#[derive(Default)]
pub(crate) struct Round {
    pub(crate) samples: BTreeMap<Surface, Vec<Sample>>,
    /// What went wrong, and how often.
    pub(crate) errors: BTreeMap<String, usize>,
}

/// p50 and p90 of one timing, in ms.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spread {
    p50: f64,
    p90: f64,
}

/// A surface's figures in a round.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Figures {
    first: Spread,
    text: Spread,
    end: Spread,
}

/// The figures of every surface in a round.
pub(crate) type RoundFigures = BTreeMap<Surface, Figures>;

impl Round {
    pub(crate) fn failed(&self) -> usize {
        self.errors.values().sum()
    }

    pub(crate) fn print_errors(&self) {
        for (error, count) in &self.errors {
            println!("    ERROR ×{count}: {error}");
        }
    }

    pub(crate) fn figures(&self) -> RoundFigures {
        self.samples
            .iter()
            .map(|(surface, samples)| {
                let spread = |pick: fn(&Sample) -> Duration| {
                    let mut values: Vec<Duration> = samples.iter().map(pick).collect();
                    values.sort();
                    Spread {
                        p50: percentile(&values, 0.50),
                        p90: percentile(&values, 0.90),
                    }
                };
                let figures = Figures {
                    first: spread(|s| s.first),
                    text: spread(|s| s.text),
                    end: spread(|s| s.end),
                };
                (*surface, figures)
            })
            .collect()
    }

    pub(crate) fn print(&self, label: &str) {
        let counts: Vec<String> = self
            .samples
            .iter()
            .map(|(surface, samples)| format!("{} {}", surface.name(), samples.len()))
            .collect();
        println!("{label} (requests: {})", counts.join(", "));
        print_table(&self.figures(), |figures, surface, pick| {
            added(figures, surface, pick)
        });
    }
}

/// `surface`'s p50 minus `/v1`'s of the same round, in ms.
fn added(figures: &RoundFigures, surface: Surface, pick: fn(&Figures) -> Spread) -> Option<f64> {
    let base = figures.get(&Surface::V1)?;
    let own = figures.get(&surface)?;
    Some(pick(own).p50 - pick(base).p50)
}

type Pick = fn(&Figures) -> Spread;

const PICKS: [Pick; 3] = [|f| f.first, |f| f.text, |f| f.end];

/// One line per surface: p50 / p90 of each timing, and the added p50s `add` gives.
fn print_table(figures: &RoundFigures, add: impl Fn(&RoundFigures, Surface, Pick) -> Option<f64>) {
    println!(
        "  {:<11}  {:>19}  {:>19}  {:>19}   added p50 over /v1: first event / first text / end",
        "", "first event p50/p90", "first text p50/p90", "end of run p50/p90",
    );
    for (surface, own) in figures {
        let spreads: Vec<String> = PICKS
            .iter()
            .map(|pick| {
                let spread = pick(own);
                format!("{:>8.3} / {:>7.3}", spread.p50, spread.p90)
            })
            .collect();
        let added: Vec<String> = PICKS
            .iter()
            .map(|pick| match add(figures, *surface, *pick) {
                Some(ms) if *surface != Surface::V1 => format!("{ms:+.3}"),
                _ => "—".to_owned(),
            })
            .collect();
        println!(
            "  {:<11}  {}  {}  {} ms   {} ms",
            surface.name(),
            spreads[0],
            spreads[1],
            spreads[2],
            added.join(" / "),
        );
    }
}

/// The median over the rounds of every figure, and of every round's added latency (with its
/// range over the rounds); returns the medians.
pub(crate) fn print_summary(rounds: &[RoundFigures]) -> RoundFigures {
    println!("median of {} round(s), ms", rounds.len());
    let mut summary = RoundFigures::new();
    for surface in Surface::ALL {
        let of = |pick: Pick, p90: bool| {
            median(rounds.iter().filter_map(|round| {
                let spread = pick(round.get(&surface)?);
                Some(if p90 { spread.p90 } else { spread.p50 })
            }))
        };
        let spread = |pick: Pick| Spread {
            p50: of(pick, false),
            p90: of(pick, true),
        };
        summary.insert(
            surface,
            Figures {
                first: spread(PICKS[0]),
                text: spread(PICKS[1]),
                end: spread(PICKS[2]),
            },
        );
    }
    // The added latency is each round's (against the same round's /v1), then the median.
    let per_round = |surface: Surface, pick: Pick| -> Vec<f64> {
        rounds
            .iter()
            .filter_map(|round| added(round, surface, pick))
            .collect()
    };
    print_table(&summary, |_, surface, pick| {
        Some(median(per_round(surface, pick).into_iter()))
    });
    println!("added p50 over /v1 per round (min … max), ms:");
    for surface in &Surface::ALL[1..] {
        let surface = *surface;
        let ranges: Vec<String> = PICKS
            .iter()
            .zip(["first event", "first text", "end of run"])
            .map(|(pick, label)| {
                let values = per_round(surface, *pick);
                let low = values.iter().copied().fold(f64::INFINITY, f64::min);
                let high = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                format!("{label} {low:+.3} … {high:+.3}")
            })
            .collect();
        println!("  {:<11}  {}", surface.name(), ranges.join(";  "));
    }
    summary
}

/// A surface's p50 of the end of run, in ms.
pub(crate) fn end_p50(figures: &RoundFigures, surface: Surface) -> Option<f64> {
    figures.get(&surface).map(|f| f.end.p50)
}

fn percentile(sorted: &[Duration], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let index = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[index].as_secs_f64() * 1000.0
}

/// The CPU model, how many CPUs this process may use, and the kernel.
pub(crate) fn machine() -> String {
    let model = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines().find_map(|l| {
                Some(
                    l.strip_prefix("model name")?
                        .split_once(':')?
                        .1
                        .trim()
                        .to_owned(),
                )
            })
        })
        .unwrap_or_else(|| "unknown CPU".to_owned());
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map_or_else(|_| "?".to_owned(), |k| k.trim().to_owned());
    format!(
        "{model}, {cpus} CPU(s), Linux {kernel}; load average {}",
        load_average()
    )
}

/// The 1, 5 and 15 minute load averages.
pub(crate) fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "?".to_owned())
}
