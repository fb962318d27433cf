//! Event fields a real run fills in: `runtime.prompt.assembled` before every model round
//! (sections in prompt order, sizes and hashes, never the text), the tool events' `toolId`,
//! `args` and `error`, and narration naming its provider, style and source event types.

use std::collections::HashMap;

use keel::{AdapterEvent, EventPayload, PromptSection};
use keel::{Message, RequestOptions, Runtime};
use keel_test_support::{MockLlm, MockResponse, MockToolCall, TempWorkspace};

use crate::common;

fn sections(events: &[keel::Event]) -> Vec<(u32, Vec<PromptSection>)> {
    events
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::PromptAssembled { step, sections } => Some((*step, sections.clone())),
            _ => None,
        })
        .collect()
}

fn names(sections: &[PromptSection]) -> Vec<(&str, u32)> {
    sections
        .iter()
        .map(|s| (s.name.as_str(), s.messages))
        .collect()
}

/// A workspace whose agent may `read_file`, and `runs` runs' worth of mock answers: a call
/// reading a missing file, then text.
fn runs_reading_a_missing_file(mock: &MockLlm, runs: usize) -> TempWorkspace {
    for _ in 0..runs {
        mock.push(MockResponse::tool_calls([MockToolCall::new(
            "call_1",
            "read_file",
            [r#"{"path":"missing.txt"}"#],
        )]));
        mock.push(MockResponse::text(["No such file."]));
    }
    common::workspace(&mock.base_url(), &["read_file"], "")
}

#[tokio::test]
async fn each_round_records_its_prompt_sections_and_the_tool_events_their_seed_fields() {
    let mock = MockLlm::start().await;
    let ws = runs_reading_a_missing_file(&mock, 1);
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let mut handle = runtime
        .request(RequestOptions {
            input: "Read missing.txt, the secret input".into(),
            history: vec![Message::user("Hello"), Message::assistant("Hi.", vec![])],
            ..Default::default()
        })
        .await
        .unwrap();
    let mut live = Vec::new();
    while let Some(event) = handle.next_event().await {
        live.push(event);
    }
    let response = handle.wait().await.unwrap();
    let events = common::stored(&runtime, &response).await;

    let rounds = sections(&events);
    assert_eq!(rounds.len(), 2, "one record per model round");
    assert_eq!(rounds[0].0, 1);
    assert_eq!(
        names(&rounds[0].1),
        [
            ("instructions", 1),
            ("history", 2),
            ("input", 1),
            ("tools", 1)
        ]
    );
    assert_eq!(rounds[1].0, 2);
    assert_eq!(
        names(&rounds[1].1),
        [
            ("instructions", 1),
            ("history", 2),
            ("input", 1),
            ("rounds", 2),
            ("tools", 1)
        ]
    );
    // What did not change between the rounds has the same size and hash.
    assert_eq!(rounds[0].1[..3], rounds[1].1[..3]);
    assert_eq!(rounds[0].1[3], rounds[1].1[4], "the tool definitions");
    for section in rounds.iter().flat_map(|(_, s)| s) {
        assert!(section.bytes > 0, "{section:?}");
        assert_eq!(section.sha256.len(), 64, "{section:?}");
    }
    // Each record comes right before its round's first attempt.
    let at = |step: u32| {
        events
            .iter()
            .position(|e| matches!(e.payload, EventPayload::ModelStarted { step: s, attempt: 1, .. } if s == step))
            .unwrap()
    };
    assert!(matches!(
        events[at(1) - 1].payload,
        EventPayload::PromptAssembled { step: 1, .. }
    ));
    assert!(matches!(
        events[at(2) - 1].payload,
        EventPayload::PromptAssembled { step: 2, .. }
    ));
    // Sizes and hashes only: the prompt's text is not in the record.
    for event in events
        .iter()
        .filter(|e| e.type_name() == "runtime.prompt.assembled")
    {
        let json = serde_json::to_string(event).unwrap();
        assert!(!json.contains("secret input"), "{json}");
        assert!(json.contains(r#""sessionId":null"#), "{json}");
    }

    let (ok, error, output) = events
        .iter()
        .find_map(|e| match &e.payload {
            EventPayload::Adapter {
                event:
                    AdapterEvent::ToolResult {
                        ok, error, output, ..
                    },
            } => Some((*ok, error.clone(), output.clone())),
            _ => None,
        })
        .unwrap();
    assert!(!ok);
    let error = error.expect("a failed call carries its error");
    assert!(output.contains(&error), "{output} / {error}");

    let types: HashMap<_, _> = live.iter().map(|e| (e.id.clone(), e.type_name())).collect();
    let narrated: Vec<_> = live
        .iter()
        .filter_map(|e| match &e.payload {
            EventPayload::Narration {
                provider,
                style,
                source_event_types,
                source_event_ids,
                ..
            } => Some((provider, style, source_event_types, source_event_ids)),
            _ => None,
        })
        .collect();
    assert!(!narrated.is_empty());
    for (provider, style, source_types, source_ids) in narrated {
        assert_eq!(provider, "template");
        assert_eq!(style, "concise");
        let expected: Vec<&str> = source_ids.iter().map(|id| types[id]).collect();
        assert_eq!(source_types, &expected);
    }
}

#[tokio::test]
async fn a_handle_that_skips_narration_gets_every_stored_event_and_no_narration() {
    let mock = MockLlm::start().await;
    let ws = runs_reading_a_missing_file(&mock, 2);
    let runtime = Runtime::builder().workspace(ws.path()).build().unwrap();
    let mut lives = Vec::new();
    for skip in [false, true] {
        let mut handle = runtime
            .request(RequestOptions {
                input: "Read missing.txt".into(),
                ..Default::default()
            })
            .await
            .unwrap();
        if skip {
            handle.skip_narration();
        }
        let mut live = Vec::new();
        while let Some(event) = handle.next_event().await {
            live.push(event);
        }
        let response = handle.wait().await.unwrap();
        let stored = common::stored(&runtime, &response).await;
        let narration = |e: &&keel::Event| matches!(e.payload, EventPayload::Narration { .. });
        let live_stored: Vec<_> = live.iter().filter(|e| !narration(e)).collect();
        assert_eq!(
            live_stored.iter().map(|e| &e.id).collect::<Vec<_>>(),
            stored.iter().map(|e| &e.id).collect::<Vec<_>>(),
            "every stored event reaches the handle, in order"
        );
        lives.push(live.iter().filter(narration).count());
    }
    assert!(lives[0] > 0, "a default handle gets narration");
    assert_eq!(lives[1], 0, "a handle that skips it gets none");
}
