//! Building providers from `Model` documents.

use std::collections::BTreeMap;

use keel_models::{ProviderError, provider_from_spec};
use keel_test_support::{MockLlm, MockResponse, TempWorkspace, WorkspaceBuilder};
use keel_workspace::{ModelParamsSpec, ModelSpec, ProviderKind};

use crate::{assemble, events, request};

fn spec(provider: ProviderKind) -> ModelSpec {
    ModelSpec {
        provider,
        base_url: None,
        model: None,
        api_key_env: None,
        script: None,
        cassette: None,
        matching: Default::default(),
        cache: Default::default(),
        stream: true,
        timeout: None,
        params: ModelParamsSpec::default(),
        fallbacks: None,
        limits: None,
        context_window: None,
        max_output_tokens: None,
        pricing: None,
        tokenizer: Default::default(),
    }
}

#[tokio::test]
async fn an_openai_spec_reads_its_key_from_the_environment() {
    let mock = MockLlm::start().await;
    mock.push(MockResponse::text(["hi"]));
    let mut spec = spec(ProviderKind::Openai);
    spec.base_url = Some(mock.base_url());
    spec.model = Some("gpt-4o-mini".into());
    spec.api_key_env = Some("MY_KEY".into());
    spec.params.temperature = Some(0.3);
    let env = BTreeMap::from([("MY_KEY".to_owned(), "sk-from-env".to_owned())]);

    let provider = provider_from_spec("default", &spec, std::path::Path::new("/"), &env).unwrap();
    let answer = assemble(&events(provider.as_ref(), request(true)).await);

    assert_eq!(answer.text, "hi");
    assert_eq!(provider.provider_name(), "openai");
    assert_eq!(provider.model_name(), "gpt-4o-mini");
    let sent = mock.last_request().unwrap();
    assert_eq!(sent.header("authorization"), Some("Bearer sk-from-env"));
    assert_eq!(sent.body["model"], "gpt-4o-mini");
    assert_eq!(sent.body["temperature"], 0.3);
}

#[test]
fn a_named_but_missing_key_variable_is_a_clear_error() {
    let mut spec = spec(ProviderKind::Openai);
    spec.model = Some("gpt-4o-mini".into());
    spec.api_key_env = Some("OPENAI_API_KEY".into());

    let error = provider_from_spec(
        "default",
        &spec,
        std::path::Path::new("/"),
        &BTreeMap::new(),
    )
    .err()
    .unwrap();

    assert_eq!(
        error,
        ProviderError::MissingApiKey {
            model: "default".into(),
            var: "OPENAI_API_KEY".into()
        }
    );
    assert!(error.to_string().contains("`OPENAI_API_KEY`"));
}

#[test]
fn an_openai_spec_without_a_model_name_is_an_error() {
    let error = provider_from_spec(
        "m",
        &spec(ProviderKind::Openai),
        std::path::Path::new("/"),
        &BTreeMap::new(),
    )
    .err()
    .unwrap();
    assert!(
        matches!(error, ProviderError::MissingField { field: "model", .. }),
        "{error}"
    );
}

#[test]
fn a_scripted_spec_reads_its_script_relative_to_the_root_at_once() {
    let ws = TempWorkspace::new();
    ws.write(
        "resources/s.json",
        r#"{"conversations":[{"steps":[{"text":"hi"}]}]}"#,
    );
    let mut good = spec(ProviderKind::Scripted);
    good.script = Some("resources/s.json".into());
    let mut missing = spec(ProviderKind::Scripted);
    missing.script = Some("resources/missing.json".into());

    let provider = provider_from_spec("offline", &good, ws.path(), &BTreeMap::new()).unwrap();
    let error = provider_from_spec("offline", &missing, ws.path(), &BTreeMap::new())
        .err()
        .unwrap();

    assert_eq!(provider.model_name(), "offline");
    assert!(matches!(error, ProviderError::ScriptRead { .. }), "{error}");
}

#[test]
fn an_anthropic_model_needs_its_model_name() {
    let error = provider_from_spec(
        "claude",
        &spec(ProviderKind::Anthropic),
        std::path::Path::new("/"),
        &BTreeMap::new(),
    )
    .err()
    .unwrap();
    assert!(
        matches!(
            error,
            ProviderError::MissingField {
                provider: "anthropic",
                field: "model",
                ..
            }
        ),
        "{error}"
    );
}

#[tokio::test]
async fn provider_for_builds_the_named_model_of_a_loaded_workspace() {
    let ws = WorkspaceBuilder::new()
        .model(
            "offline",
            "{ provider: scripted, script: resources/model.yaml }",
        )
        .model(
            "remote",
            "{ provider: openai, model: gpt-4o-mini, apiKeyEnv: KEEL_TEST_UNSET_KEY }",
        )
        .file(
            "resources/model.yaml",
            "conversations:\n  - steps:\n      - text: \"offline: {{input}}\"\n",
        )
        .build();
    let options = keel_workspace::LoadOptions {
        overlays: Vec::new(),
        env: BTreeMap::new(),
        ..Default::default()
    };
    let workspace = keel_workspace::Workspace::load_with(ws.path(), &options).unwrap();

    let offline = keel_models::provider_for(&workspace, "offline").unwrap();
    let remote = keel_models::provider_for(&workspace, "remote")
        .err()
        .unwrap();
    let unknown = keel_models::provider_for(&workspace, "nope").err().unwrap();

    let answer = assemble(&events(offline.as_ref(), request(true)).await);
    assert_eq!(answer.text, "offline: What is the weather in Paris?");
    assert_eq!(
        remote,
        ProviderError::MissingApiKey {
            model: "remote".into(),
            var: "KEEL_TEST_UNSET_KEY".into()
        }
    );
    assert_eq!(unknown, ProviderError::UnknownModel("nope".into()));
}

#[test]
fn a_replay_spec_reads_its_cassette_and_names_what_is_wrong_with_a_bad_one() {
    let ws = TempWorkspace::new();
    ws.write(
        "tests/good.json",
        r#"{"format": "keel.cassette/1", "exchanges": [{"step": 1, "model": "claude-test",
            "provider": "anthropic", "answer": {"outcome": "answered", "chunks": ["hi"],
            "usage": {"promptTokens": 1, "completionTokens": 1, "totalTokens": 2},
            "stopReason": "stop"}}]}"#,
    );
    ws.write("tests/junk.json", "{\n  \"format\": 3\n}");
    ws.write(
        "tests/future.json",
        r#"{"format": "keel.cassette/9", "exchanges": []}"#,
    );
    let replay = |file: &str| {
        let mut spec = spec(ProviderKind::Replay);
        spec.cassette = Some(file.into());
        provider_from_spec("recorded", &spec, ws.path(), &BTreeMap::new())
    };
    let provider = replay("tests/good.json").unwrap();
    assert_eq!(
        (provider.provider_name(), provider.model_name()),
        ("anthropic", "claude-test"),
        "named like the model that answered"
    );
    for (file, says) in [
        ("tests/missing.json", "No such file"),
        ("tests/junk.json", "not a cassette (line 2, column"),
        (
            "tests/future.json",
            "format `keel.cassette/9` is not `keel.cassette/1`",
        ),
    ] {
        let error = replay(file).err().unwrap();
        assert!(
            matches!(error, ProviderError::CassetteRead { .. }),
            "{error}"
        );
        let message = error.to_string();
        assert!(
            message.contains(file) && message.contains(says),
            "{message}"
        );
    }
}
