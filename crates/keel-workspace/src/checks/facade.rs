//! An agent's `facade.clamp`: each `{min, max}` bound has `min` at most `max`.

use crate::Diagnostic;
use crate::yaml::Node;

/// The bounds of `facade.clamp` that are `{min, max}` pairs.
const BOUNDS: [&str; 4] = ["temperature", "topP", "presencePenalty", "frequencyPenalty"];

pub(super) fn check_clamp(agent: &str, spec: &Node, out: &mut Vec<Diagnostic>) {
    let Some(clamp) = spec.get("facade").and_then(|f| f.get("clamp")) else {
        return;
    };
    for name in BOUNDS {
        let Some(bounds) = clamp.get(name) else {
            continue;
        };
        let value = |key: &str| bounds.get(key).and_then(Node::as_f64);
        if let (Some(min), Some(max)) = (value("min"), value("max"))
            && min > max
        {
            out.push(bounds.loc.error(
                format!(
                    "agent `{agent}`: `facade.clamp.{name}` has min {min} above max {max}, so no value fits"
                ),
                Some("make `min` at most `max`".into()),
            ));
        }
    }
}
