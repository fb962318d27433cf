//! `.env`, `options.env` and `${VAR}` interpolation.

use keel_workspace::{LoadError, Origin};

use crate::support::{Load, MODEL_AND_AGENT, env, located, workspace};

const MODEL: &str = "\
apiVersion: keel/v1
kind: Model
metadata: { name: default }
spec:
  provider: openai
  baseUrl: \"${BASE_URL:-https://api.openai.com/v1}\"
  model: ${MODEL_NAME}
  apiKeyEnv: KEY_${SUFFIX:-DEFAULT}
";

#[test]
fn dotenv_provides_variables_and_given_env_wins() {
    let ws = workspace();
    ws.write("config/model.yaml", MODEL);
    ws.write(
        ".env",
        "# settings\nMODEL_NAME=from-dotenv\nBASE_URL=http://dotenv:1234/v1\n",
    );
    let loaded = ws.load_ok(&env(&[("BASE_URL", "http://given:1/v1")]));
    let model = &loaded.models["default"];
    assert_eq!(model.model.as_deref(), Some("from-dotenv"));
    assert_eq!(model.base_url.as_deref(), Some("http://given:1/v1"));
    assert_eq!(model.api_key_env.as_deref(), Some("KEY_DEFAULT"));
    assert_eq!(loaded.env["MODEL_NAME"], "from-dotenv");
    assert_eq!(loaded.env["BASE_URL"], "http://given:1/v1");

    let origin = |path: &str| {
        loaded
            .explain()
            .iter()
            .find(|e| e.path == path)
            .unwrap()
            .origin
            .clone()
    };
    assert_eq!(
        origin("Model/default.spec.model"),
        Origin::Env {
            var: "MODEL_NAME".into(),
            file: "config/model.yaml".into(),
            line: 7
        }
    );
    assert_eq!(
        origin("Model/default.spec.apiKeyEnv"),
        Origin::File {
            file: "config/model.yaml".into(),
            line: 8
        },
        "a default written in the file comes from the file"
    );
}

#[test]
fn defaults_apply_without_dotenv() {
    let ws = workspace();
    ws.write("config/model.yaml", MODEL);
    let loaded = ws.load_ok(&env(&[("MODEL_NAME", "m"), ("SUFFIX", "X")]));
    let model = &loaded.models["default"];
    assert_eq!(model.base_url.as_deref(), Some("https://api.openai.com/v1"));
    assert_eq!(model.api_key_env.as_deref(), Some("KEY_X"));
}

#[test]
fn a_missing_variable_without_default_is_an_error_naming_it() {
    let ws = workspace();
    ws.write("config/model.yaml", MODEL);
    let diagnostics = ws.diagnostics(&env(&[]));
    assert_eq!(
        located(&diagnostics),
        ["config/model.yaml:7:10: environment variable `MODEL_NAME` is not set"]
    );
    let hint = diagnostics[0].hint.as_deref().unwrap();
    assert!(hint.contains(".env"), "{hint}");
    assert!(hint.contains("${MODEL_NAME:-default}"), "{hint}");
}

#[test]
fn dollar_dollar_escapes_and_malformed_references_are_errors() {
    let ws = workspace();
    ws.write("config/a.yaml", MODEL_AND_AGENT);
    ws.write(
        "config/b.yaml",
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: b }\nspec:\n  model: default\n  instructions: \"costs $$5, see ${DOC\"\n",
    );
    let diagnostics = ws.diagnostics(&env(&[]));
    assert_eq!(
        located(&diagnostics),
        ["config/b.yaml:6:17: `${` is not closed with `}`"]
    );

    ws.write(
        "config/b.yaml",
        "apiVersion: keel/v1\nkind: Agent\nmetadata: { name: b }\nspec:\n  model: default\n  instructions: \"costs $$5\"\n",
    );
    let loaded = ws.load_ok(&env(&[]));
    assert_eq!(loaded.agents["b"].instructions, "costs $5");
}

#[test]
fn a_broken_dotenv_line_is_located() {
    let ws = workspace();
    ws.write("config/a.yaml", MODEL_AND_AGENT);
    ws.write(".env", "GOOD=1\nthis line is broken\n");
    let err = ws.load_with(&env(&[])).unwrap_err();
    let LoadError::Invalid(diagnostics) = err else {
        panic!("{err:?}")
    };
    assert_eq!(diagnostics.len(), 1);
    assert_eq!(diagnostics[0].file, std::path::PathBuf::from(".env"));
    assert_eq!(diagnostics[0].line, 2);
}
