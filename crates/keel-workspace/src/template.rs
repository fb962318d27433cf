//! Workflow templates: minijinja with strict undefined (a name that is not there is an
//! error, never an empty string). A string that is exactly one `{{ expression }}` keeps the
//! expression's type (a list stays a list); any other string renders to text. Objects and
//! lists are rendered value by value.

use minijinja::{Environment, UndefinedBehavior};
use serde_json::Value;

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    env
}

/// Whether `source` parses as a template; the error names what is wrong.
pub fn check(source: &str) -> Result<(), String> {
    let env = environment();
    match whole_expression(source) {
        Some(expr) => env.compile_expression(expr).map(drop),
        None => env.template_from_str(source).map(drop),
    }
    .map_err(|e| describe(&e))
}

/// Whether `expr` parses as an expression (a map's `items`).
pub fn check_expression(expr: &str) -> Result<(), String> {
    environment()
        .compile_expression(expr)
        .map(drop)
        .map_err(|e| describe(&e))
}

/// `value` with every string rendered against `context`.
pub fn render(value: &Value, context: &Value) -> Result<Value, String> {
    let env = environment();
    let ctx = minijinja::Value::from(minijinja::value::Serde(context));
    render_with(&env, value, &ctx)
}

/// The value of expression `expr` against `context`.
pub fn eval(expr: &str, context: &Value) -> Result<Value, String> {
    let env = environment();
    let ctx = minijinja::Value::from(minijinja::value::Serde(context));
    evaluate(&env, expr, &ctx)
}

fn render_with(
    env: &Environment<'static>,
    value: &Value,
    ctx: &minijinja::Value,
) -> Result<Value, String> {
    Ok(match value {
        Value::String(text) => match whole_expression(text) {
            Some(expr) => evaluate(env, expr, ctx)?,
            None if text.contains("{{") || text.contains("{%") => Value::String(
                env.render_str(text, ctx.clone())
                    .map_err(|e| describe(&e))?,
            ),
            None => value.clone(),
        },
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|item| render_with(env, item, ctx))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), render_with(env, v, ctx)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

fn evaluate(
    env: &Environment<'static>,
    expr: &str,
    ctx: &minijinja::Value,
) -> Result<Value, String> {
    let value = env
        .compile_expression(expr)
        .and_then(|e| e.eval(ctx.clone()))
        .map_err(|e| describe(&e))?;
    if value.is_undefined() {
        return Err(format!("`{expr}` is undefined"));
    }
    serde_json::to_value(&value).map_err(|e| format!("`{expr}` is not a JSON value: {e}"))
}

/// The expression of a string that is exactly `{{ expression }}`.
fn whole_expression(text: &str) -> Option<&str> {
    let inner = text.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}")).then(|| inner.trim())
}

fn describe(error: &minijinja::Error) -> String {
    let mut text = error.kind().to_string();
    if let Some(detail) = error.detail() {
        text.push_str(": ");
        text.push_str(detail);
    }
    if let Some(line) = error.line() {
        text.push_str(&format!(" (template line {line})"));
    }
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_whole_expression_keeps_its_type_and_text_renders() {
        let ctx = json!({"input": {"files": ["a", "b"], "n": 2}, "outputs": {}});
        assert_eq!(
            render(&json!("{{ input.files }}"), &ctx).unwrap(),
            json!(["a", "b"])
        );
        assert_eq!(
            render(
                &json!({"p": "{{ input.n }} files: {{ input.files | join(', ') }}"}),
                &ctx
            )
            .unwrap(),
            json!({"p": "2 files: a, b"})
        );
        assert_eq!(eval("input.files | length", &ctx).unwrap(), json!(2));
    }

    #[test]
    fn an_undefined_name_is_an_error() {
        let ctx = json!({"input": {}, "outputs": {}});
        assert!(render(&json!("{{ outputs.missing.field }}"), &ctx).is_err());
        assert!(render(&json!("x {{ nothing }}"), &ctx).is_err());
        assert!(check("{{ unclosed").is_err());
    }
}
