//! The `keel` binary's log: `tracing` events on stderr, filtered by `KEEL_LOG` (an
//! `EnvFilter`, default `warn`), in the format `KEEL_LOG_FORMAT` names.
//!
//! - `text` (or unset, or empty): tracing-subscriber's human format, coloured only when stderr
//!   is a terminal and `NO_COLOR` is unset.
//! - `json`: one JSON object per line ([`JsonLines`]), for log collectors:
//!   `{"timestamp","level","target","message", the event's own fields…, "trace_id","span_id",
//!   "request_id"}`. The three ids come from the spans the event happened in, innermost first
//!   (the runtime opens `keel.run` with all three and inner spans with their own `span_id`);
//!   an id no span has is left out. The span fields are kept in each span's extensions when it
//!   is opened or recorded, so writing an event only walks its scope.
//! - anything else: an error on stderr naming the variable and the accepted values, then text.
//!   Setting up the log never stops the program.
//!
//! In `json`, spans carrying one of those ids are recorded whatever `KEEL_LOG` says
//! ([`CorrelatedSpans`]): the runtime's spans are `info`, and a `warn` inside a run must still
//! say which run and trace it belongs to under the default `warn` filter.

use std::ffi::OsStr;
use std::fmt;
use std::io::Write;
use std::time::SystemTime;

use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::LevelFilter;
use tracing_subscriber::fmt::MakeWriter;
use tracing_subscriber::layer::{Context, Filter, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::util::SubscriberInitExt;

use crate::out;

/// The variable that chooses the format.
const FORMAT_VAR: &str = "KEEL_LOG_FORMAT";

/// The span fields a JSON line carries, in the order it writes them.
const CORRELATION_FIELDS: [&str; 3] = ["trace_id", "span_id", "request_id"];

/// Keys of the line itself: an event field with one of these names is written as
/// `field.<name>` rather than overwrite it.
const LINE_KEYS: [&str; 3] = ["timestamp", "level", "target"];

/// Installs the global subscriber on stderr. Called once, before the async runtime starts; a
/// subscriber already installed (there is none in the binary) is left alone.
pub(crate) fn init() {
    let filter = EnvFilter::try_from_env("KEEL_LOG").unwrap_or_else(|_| EnvFilter::new("warn"));
    let format =
        LogFormat::parse(std::env::var_os(FORMAT_VAR).as_deref()).unwrap_or_else(|message| {
            out::error(&message);
            LogFormat::Text
        });
    match format {
        LogFormat::Text => {
            // Colour only on a terminal: a log redirected to a file or a pipe stays plain text.
            let colour = std::io::IsTerminal::is_terminal(&std::io::stderr())
                && std::env::var_os("NO_COLOR").is_none();
            let _ = tracing_subscriber::fmt()
                .with_env_filter(filter)
                .with_writer(std::io::stderr)
                .with_ansi(colour)
                .with_target(false)
                .try_init();
        }
        LogFormat::Json => {
            let _ = json_subscriber(filter, std::io::stderr).try_init();
        }
    }
}

/// What `KEEL_LOG_FORMAT` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

impl LogFormat {
    /// The format a value of `KEEL_LOG_FORMAT` names (`None`: unset), or the message that says
    /// what is wrong with it.
    fn parse(value: Option<&OsStr>) -> Result<Self, String> {
        match value.map(OsStr::to_string_lossy).as_deref() {
            None | Some("" | "text") => Ok(Self::Text),
            Some("json") => Ok(Self::Json),
            Some(other) => Err(format!(
                "{FORMAT_VAR} is {other:?}, which is not a log format (accepted: text, json); \
                 logging as text"
            )),
        }
    }
}

/// The JSON-lines subscriber: [`JsonLines`] writing to `make_writer`, behind `filter`.
fn json_subscriber<W>(filter: EnvFilter, make_writer: W) -> impl Subscriber + Send + Sync
where
    W: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    tracing_subscriber::registry()
        .with(JsonLines { make_writer }.with_filter(CorrelatedSpans { env: filter }))
}

/// `KEEL_LOG`'s filter, except that spans carrying a correlation id (a field named like one of
/// [`CORRELATION_FIELDS`]) are always enabled, so the events inside them can name them.
/// Whether such a span has the fields is known from its call site: other spans and all events
/// are filtered exactly as `KEEL_LOG` says.
struct CorrelatedSpans {
    env: EnvFilter,
}

impl CorrelatedSpans {
    fn is_correlated(meta: &Metadata<'_>) -> bool {
        meta.is_span()
            && CORRELATION_FIELDS
                .iter()
                .any(|name| meta.fields().field(name).is_some())
    }
}

impl<S> Filter<S> for CorrelatedSpans
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn enabled(&self, meta: &Metadata<'_>, cx: &Context<'_, S>) -> bool {
        Self::is_correlated(meta) || Filter::<S>::enabled(&self.env, meta, cx)
    }

    fn callsite_enabled(&self, meta: &'static Metadata<'static>) -> Interest {
        match Self::is_correlated(meta) {
            true => Interest::always(),
            false => Filter::<S>::callsite_enabled(&self.env, meta),
        }
    }

    /// No hint: a correlated span may be of any level, and the tracing macros skip a call site
    /// above the hint before asking the filter. Each disabled call site still costs one cached
    /// look-up, and only in `json`.
    fn max_level_hint(&self) -> Option<LevelFilter> {
        None
    }

    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        Filter::<S>::on_new_span(&self.env, attrs, id, ctx);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        Filter::<S>::on_record(&self.env, id, values, ctx);
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        Filter::<S>::on_enter(&self.env, id, ctx);
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        Filter::<S>::on_exit(&self.env, id, ctx);
    }

    fn on_close(&self, id: Id, ctx: Context<'_, S>) {
        Filter::<S>::on_close(&self.env, id, ctx);
    }
}

/// The layer that writes each event as one JSON object and a newline, in one write (lines
/// from different threads never interleave).
struct JsonLines<W> {
    make_writer: W,
}

impl<S, W> Layer<S> for JsonLines<W>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    W: for<'w> MakeWriter<'w> + 'static,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let mut ids = SpanIds::default();
        attrs.record(&mut ids);
        if let Some(span) = ctx.span(id)
            && !ids.is_empty()
        {
            span.extensions_mut().replace(ids);
        }
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else {
            return;
        };
        let mut extensions = span.extensions_mut();
        match extensions.get_mut::<SpanIds>() {
            Some(ids) => values.record(ids),
            None => {
                let mut ids = SpanIds::default();
                values.record(&mut ids);
                if !ids.is_empty() {
                    extensions.replace(ids);
                }
            }
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut fields = EventFields::default();
        event.record(&mut fields);

        let mut line = Map::new();
        let timestamp = humantime::format_rfc3339_micros(SystemTime::now());
        line.insert("timestamp".into(), timestamp.to_string().into());
        line.insert("level".into(), meta.level().as_str().into());
        let target = fields.log_target.take();
        line.insert(
            "target".into(),
            target.as_deref().unwrap_or(meta.target()).into(),
        );
        line.insert(
            "message".into(),
            fields.message.take().unwrap_or_default().into(),
        );
        for (name, value) in fields.fields {
            let key = match LINE_KEYS.contains(&name) {
                true => format!("field.{name}"),
                false => name.to_owned(),
            };
            line.insert(key, value);
        }

        let mut ids = SpanIds::default();
        for span in ctx.event_scope(event).into_iter().flatten() {
            if let Some(inner) = span.extensions().get::<SpanIds>() {
                ids.fill_from(inner);
            }
        }
        for (name, id) in CORRELATION_FIELDS.into_iter().zip(ids.into_values()) {
            // The event's own field of that name, if any, is the innermost.
            if let Some(id) = id
                && !line.contains_key(name)
            {
                line.insert(name.to_owned(), id.into());
            }
        }

        let Ok(mut bytes) = serde_json::to_vec(&line) else {
            return;
        };
        bytes.push(b'\n');
        let _ = self.make_writer.make_writer_for(meta).write_all(&bytes);
    }
}

/// The correlation ids one span recorded (kept in its extensions), or, while an event's scope
/// is walked, the innermost of each found so far.
#[derive(Debug, Default)]
struct SpanIds {
    trace_id: Option<String>,
    span_id: Option<String>,
    request_id: Option<String>,
}

impl SpanIds {
    fn is_empty(&self) -> bool {
        self.trace_id.is_none() && self.span_id.is_none() && self.request_id.is_none()
    }

    /// Takes each id this one lacks from `outer`.
    fn fill_from(&mut self, outer: &Self) {
        for (mine, theirs) in [
            (&mut self.trace_id, &outer.trace_id),
            (&mut self.span_id, &outer.span_id),
            (&mut self.request_id, &outer.request_id),
        ] {
            if mine.is_none() {
                mine.clone_from(theirs);
            }
        }
    }

    /// The ids in [`CORRELATION_FIELDS`]' order.
    fn into_values(self) -> [Option<String>; 3] {
        [self.trace_id, self.span_id, self.request_id]
    }

    fn set(&mut self, field: &Field, value: String) {
        let slot = match field.name() {
            "trace_id" => &mut self.trace_id,
            "span_id" => &mut self.span_id,
            "request_id" => &mut self.request_id,
            _ => return,
        };
        *slot = Some(value);
    }
}

impl Visit for SpanIds {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.set(field, value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if CORRELATION_FIELDS.contains(&field.name()) {
            self.set(field, format!("{value:?}"));
        }
    }
}

/// An event's message and fields, as JSON values: numbers and booleans as themselves,
/// everything else as its text. Events bridged from the `log` crate carry their target in
/// `log.target` and their location in other `log.*` fields, which are dropped.
#[derive(Debug, Default)]
struct EventFields {
    message: Option<String>,
    log_target: Option<String>,
    fields: Vec<(&'static str, Value)>,
}

impl EventFields {
    fn push(&mut self, field: &Field, value: Value) {
        match field.name() {
            "message" => self.message = Some(value_text(value)),
            "log.target" => self.log_target = Some(value_text(value)),
            name if name.starts_with("log.") => {}
            name => self.fields.push((name, value)),
        }
    }
}

/// A value as text (a message given as something other than a string).
fn value_text(value: Value) -> String {
    match value {
        Value::String(text) => text,
        other => other.to_string(),
    }
}

impl Visit for EventFields {
    fn record_f64(&mut self, field: &Field, value: f64) {
        // NaN and the infinities have no JSON number.
        let value = serde_json::Number::from_f64(value)
            .map_or_else(|| Value::String(value.to_string()), Value::Number);
        self.push(field, value);
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.push(field, value.into());
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.push(field, value.into());
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.push(field, value.into());
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.push(field, value.into());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.push(field, format!("{value:?}").into());
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    /// A writer that keeps what the layer wrote.
    #[derive(Clone, Default)]
    struct Captured(Arc<Mutex<Vec<u8>>>);

    impl Captured {
        fn lines(&self) -> Vec<Value> {
            let bytes = self.0.lock().unwrap().clone();
            let text = String::from_utf8(bytes).unwrap();
            text.lines()
                .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
                .collect()
        }
    }

    impl Write for Captured {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'w> MakeWriter<'w> for Captured {
        type Writer = Self;

        fn make_writer(&'w self) -> Self::Writer {
            self.clone()
        }
    }

    /// The JSON lines `emit` logs under the filter `directives`.
    fn logged(directives: &str, emit: impl FnOnce()) -> Vec<Value> {
        let captured = Captured::default();
        let subscriber = json_subscriber(EnvFilter::new(directives), captured.clone());
        tracing::subscriber::with_default(subscriber, emit);
        captured.lines()
    }

    #[test]
    fn logging_json_line_takes_trace_from_the_run_span_and_span_id_from_the_innermost() {
        let lines = logged("debug", || {
            let run = tracing::info_span!(
                "keel.run",
                request_id = %"req_1",
                trace_id = %"0af7651916cd43dd8448eb211c80319c",
                span_id = %"b7ad6b7169203331"
            );
            let _run = run.enter();
            let round = tracing::info_span!("keel.round", span_id = %"00f067aa0ba902b7");
            let _round = round.enter();
            tracing::warn!(
                attempt = 2,
                retried = true,
                ratio = 0.5,
                model = "mock",
                "Model slow."
            );
        });

        assert_eq!(lines.len(), 1, "{lines:?}");
        let line = &lines[0];
        let keys: Vec<&str> = line
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(
            keys,
            [
                "timestamp",
                "level",
                "target",
                "message",
                "attempt",
                "retried",
                "ratio",
                "model",
                "trace_id",
                "span_id",
                "request_id"
            ]
        );
        assert_eq!(line["level"], "WARN");
        assert_eq!(line["target"], module_path!());
        assert_eq!(line["message"], "Model slow.");
        assert_eq!(line["attempt"], 2);
        assert_eq!(line["retried"], true);
        assert_eq!(line["ratio"], 0.5);
        assert_eq!(line["model"], "mock");
        assert_eq!(line["trace_id"], "0af7651916cd43dd8448eb211c80319c");
        assert_eq!(line["span_id"], "00f067aa0ba902b7");
        assert_eq!(line["request_id"], "req_1");
        let timestamp = line["timestamp"].as_str().unwrap();
        // RFC 3339, UTC, microseconds: 2024-05-01T12:34:56.123456Z
        assert_eq!(timestamp.len(), 27, "{timestamp}");
        assert!(timestamp.ends_with('Z'), "{timestamp}");
        assert!(humantime::parse_rfc3339(timestamp).is_ok(), "{timestamp}");
    }

    #[test]
    fn logging_json_line_outside_spans_has_no_ids_and_no_spans() {
        let lines = logged("info", || tracing::info!("Listening."));

        let line = lines[0].as_object().unwrap();
        let keys: Vec<&str> = line.keys().map(String::as_str).collect();
        assert_eq!(keys, ["timestamp", "level", "target", "message"]);
        assert_eq!(line["level"], "INFO");
    }

    #[test]
    fn logging_correlated_spans_are_kept_below_the_log_level() {
        let lines = logged("warn", || {
            let run = tracing::info_span!("keel.run", trace_id = %"t1", request_id = %"r1");
            let _run = run.enter();
            let step = tracing::debug_span!("keel.tool", span_id = %"s2");
            let _step = step.enter();
            tracing::info!("Filtered out.");
            tracing::warn!("Kept.");
        });

        assert_eq!(lines.len(), 1, "{lines:?}");
        assert_eq!(lines[0]["message"], "Kept.");
        assert_eq!(lines[0]["trace_id"], "t1");
        assert_eq!(lines[0]["span_id"], "s2");
        assert_eq!(lines[0]["request_id"], "r1");
    }

    #[test]
    fn logging_ids_recorded_after_the_span_opened_are_used() {
        let lines = logged("info", || {
            let run = tracing::info_span!("keel.run", trace_id = tracing::field::Empty);
            run.record("trace_id", "late");
            let _run = run.enter();
            tracing::info!(request_id = "from-event", "Started.");
        });

        assert_eq!(lines[0]["trace_id"], "late");
        // The event's own field is the innermost.
        assert_eq!(lines[0]["request_id"], "from-event");
        assert!(lines[0].get("span_id").is_none());
    }

    #[test]
    fn logging_json_line_escapes_control_characters_and_keeps_its_own_keys() {
        let lines = logged("info", || {
            let bytes: &[u8] = &[0xff, 0xfe];
            tracing::info!(
                raw = "nul\0 esc\u{1b}[31m quote\" backslash\\ newline\n",
                bytes = ?bytes,
                level = "mine",
                "Two\nlines."
            );
        });

        assert_eq!(lines.len(), 1);
        let line = &lines[0];
        assert_eq!(
            line["raw"],
            "nul\0 esc\u{1b}[31m quote\" backslash\\ newline\n"
        );
        assert_eq!(line["bytes"], "[255, 254]");
        assert_eq!(line["message"], "Two\nlines.");
        assert_eq!(line["level"], "INFO");
        assert_eq!(line["field.level"], "mine");
    }

    #[test]
    fn logging_format_variable_accepts_text_and_json_and_names_itself_otherwise() {
        assert_eq!(LogFormat::parse(None), Ok(LogFormat::Text));
        assert_eq!(LogFormat::parse(Some(OsStr::new(""))), Ok(LogFormat::Text));
        assert_eq!(
            LogFormat::parse(Some(OsStr::new("text"))),
            Ok(LogFormat::Text)
        );
        assert_eq!(
            LogFormat::parse(Some(OsStr::new("json"))),
            Ok(LogFormat::Json)
        );
        assert_eq!(
            LogFormat::parse(Some(OsStr::new("xml"))),
            Err(
                "KEEL_LOG_FORMAT is \"xml\", which is not a log format (accepted: text, json); \
                 logging as text"
                    .to_owned()
            )
        );
    }
}
