//! A tool's JSON Schema, compiled once per loaded build: defaults filled in, then every failure
//! listed in one `validation` error.

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{ValidationError, Validator};
use serde_json::{Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use plugin_api::ToolError;

use crate::sync::lock;

/// How many failures one error lists before it says how many more there are.
const MAX_LISTED: usize = 20;
/// How deep defaults are filled into nested objects.
const MAX_DEFAULT_DEPTH: usize = 8;

/// Validators compiled in this process, by their schema's JSON text: a tool's schema is
/// compiled once, not again at every load of a new build of it (a reload) or in every host.
/// Compiling depends on the schema alone (remote references are never fetched), so a validator
/// is shared by every tool whose schema is the same. Bounded: emptied when full.
fn compiled(schema: &Value) -> Result<Arc<Validator>, String> {
    const MAX_CACHED: usize = 256;
    static CACHE: Mutex<Option<HashMap<String, Arc<Validator>>>> = Mutex::new(None);
    let key = schema.to_string();
    let cached = lock(&CACHE).as_ref().and_then(|c| c.get(&key).cloned());
    if let Some(validator) = cached {
        return Ok(validator);
    }
    // Compiled outside the lock.
    let validator = Arc::new(jsonschema::validator_for(schema).map_err(|e| {
        let at = e.instance_path().as_str();
        match at.is_empty() {
            true => format!("its parameters schema does not compile: {e}"),
            false => format!("its parameters schema does not compile at {at}: {e}"),
        }
    })?);
    let mut cache = lock(&CACHE);
    let cache = cache.get_or_insert_with(HashMap::new);
    if cache.len() >= MAX_CACHED {
        cache.clear();
    }
    cache.insert(key, validator.clone());
    Ok(validator)
}

/// A tool's compiled argument schema.
pub(crate) struct ArgumentSchema {
    schema: Value,
    validator: Arc<Validator>,
    /// Whether any object of the schema has a `default` (else nothing is filled in).
    has_defaults: bool,
}

impl ArgumentSchema {
    /// A schema that accepts any arguments.
    pub(crate) fn any() -> Self {
        Self::compile(&Value::Object(Map::new())).unwrap_or_else(|_| unreachable!("{{}} compiles"))
    }

    /// Compiles `schema` (drafts 2020-12, 2019-09, 7, 6 and 4, from its `$schema`); remote
    /// references are not fetched. The error says what is wrong, for a "skipped" line.
    pub(crate) fn compile(schema: &Value) -> Result<Self, String> {
        let validator = compiled(schema)?;
        Ok(Self {
            schema: schema.clone(),
            validator,
            has_defaults: has_default(schema, 0),
        })
    }

    /// Fills in the schema's defaults, then checks the arguments. The error lists every
    /// failing path, with what was expected and what was given.
    pub(crate) fn check(&self, args: &mut Map<String, Value>) -> Result<(), ToolError> {
        if self.has_defaults {
            fill_defaults(&self.schema, &self.schema, args, 0);
        }
        let instance = Value::Object(std::mem::take(args));
        // The common case, valid arguments, without collecting errors.
        let valid = self.validator.is_valid(&instance);
        let instance = match (valid, instance) {
            (true, Value::Object(map)) => {
                *args = map;
                return Ok(());
            }
            (_, instance) => instance,
        };
        let mut failures: Vec<String> = Vec::new();
        let mut more = 0usize;
        for error in self.validator.iter_errors(&instance) {
            match failures.len() < MAX_LISTED {
                true => failures.push(describe(&self.schema, &error)),
                false => more += 1,
            }
        }
        if let Value::Object(map) = instance {
            *args = map;
        }
        if failures.is_empty() {
            return Ok(());
        }
        let mut message = format!("invalid arguments: {}", failures.join("; "));
        if more > 0 {
            message.push_str(&format!("; and {more} more"));
        }
        Err(ToolError::validation(message))
    }
}

/// Checks a tool's structured content against its output schema: the error lists every
/// failing path, as for arguments.
pub(crate) fn check_output(schema: &Value, value: &Value) -> Result<(), String> {
    let validator =
        compiled(schema).map_err(|e| e.replace("its parameters schema", "its output schema"))?;
    if validator.is_valid(value) {
        return Ok(());
    }
    let failures: Vec<String> = validator
        .iter_errors(value)
        .take(MAX_LISTED)
        .map(|error| describe(schema, &error))
        .collect();
    Err(failures.join("; "))
}

/// One failure: `/units: must be one of "metric", "imperial", got "kelvin"`. `schema` is the
/// whole schema, to name the properties an object may have.
fn describe(schema: &Value, error: &ValidationError<'_>) -> String {
    let path = match error.instance_path().as_str() {
        "" => "/".to_owned(),
        path => path.to_owned(),
    };
    let got = brief(error.instance());
    let what = match error.kind() {
        ValidationErrorKind::Enum { options } => {
            let options: Vec<String> = match options.as_ref() {
                Value::Array(items) => items.iter().map(brief).collect(),
                other => vec![brief(other)],
            };
            format!("must be one of {}, got {got}", options.join(", "))
        }
        ValidationErrorKind::Type { kind } => {
            let expected = match kind {
                TypeKind::Single(t) => t.to_string(),
                TypeKind::Multiple(set) => {
                    let names: Vec<String> = set.iter().map(|t| t.to_string()).collect();
                    names.join(" or ")
                }
            };
            format!("must be of type {expected}, got {got}")
        }
        ValidationErrorKind::Required { property } => {
            format!("missing required property {property}")
        }
        ValidationErrorKind::AdditionalProperties { unexpected } => {
            let unknown: Vec<String> = unexpected.iter().map(|u| format!("\"{u}\"")).collect();
            // The object's schema is where `additionalProperties` sits.
            let at = error.schema_path().as_str();
            let known: Vec<String> = at
                .strip_suffix("/additionalProperties")
                .and_then(|parent| schema.pointer(parent))
                .map(|object| resolve(schema, object))
                .and_then(|object| object.get("properties")?.as_object())
                .map(|props| props.keys().map(|k| format!("\"{k}\"")).collect())
                .unwrap_or_default();
            let plural = if unknown.len() == 1 { "" } else { "s" };
            let unknown = unknown.join(", ");
            match known.is_empty() {
                true => format!("unknown argument{plural} {unknown}"),
                false => format!(
                    "unknown argument{plural} {unknown}: the arguments are {}",
                    known.join(", ")
                ),
            }
        }
        _ => format!("{error}"),
    };
    format!("{path}: {what}")
}

/// A short quotation of a value.
fn brief(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(60) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text,
    }
}

/// Sets each missing property that has a `default` in the schema, in nested objects too.
fn fill_defaults(root: &Value, schema: &Value, args: &mut Map<String, Value>, depth: usize) {
    if depth > MAX_DEFAULT_DEPTH {
        return;
    }
    let schema = resolve(root, schema);
    let Some(Value::Object(properties)) = schema.get("properties") else {
        return;
    };
    for (key, property) in properties {
        match args.get_mut(key) {
            None => {
                // Next to a `$ref` (as schemars writes it), or in the schema it points to.
                let default = property
                    .get("default")
                    .or_else(|| resolve(root, property).get("default"));
                if let Some(default) = default {
                    args.insert(key.clone(), default.clone());
                }
            }
            Some(Value::Object(inner)) => fill_defaults(root, property, inner, depth + 1),
            Some(_) => {}
        }
    }
}

/// Whether `schema` has a `default` anywhere (`$defs` included; no deeper than JSON parses).
fn has_default(schema: &Value, depth: usize) -> bool {
    if depth > 128 {
        return false;
    }
    match schema {
        Value::Object(map) => {
            map.contains_key("default") || map.values().any(|v| has_default(v, depth + 1))
        }
        Value::Array(items) => items.iter().any(|v| has_default(v, depth + 1)),
        _ => false,
    }
}

/// A local `$ref` (`#/$defs/X`, `#/definitions/X`) followed once; anything else as it is.
fn resolve<'a>(root: &'a Value, schema: &'a Value) -> &'a Value {
    match schema.get("$ref").and_then(Value::as_str) {
        Some(pointer) if pointer.starts_with("#/") => root.pointer(&pointer[1..]).unwrap_or(schema),
        _ => schema,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn schema() -> ArgumentSchema {
        ArgumentSchema::compile(&json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "top": {"type": "integer"},
                "units": {"enum": ["metric", "imperial"], "default": "metric"},
                "options": {"$ref": "#/$defs/Options"},
                "mode": {"$ref": "#/$defs/Mode", "default": "fast"}
            },
            "required": ["city"],
            "$defs": {"Mode": {"enum": ["fast", "slow"]}, "Options": {"type": "object", "properties": {"lang": {"type": "string", "default": "en"}}}}
        }))
        .unwrap()
    }

    #[test]
    fn every_failure_is_listed_with_its_path() {
        let mut args = json!({"top": "2", "units": "kelvin"})
            .as_object()
            .unwrap()
            .clone();
        let error = schema().check(&mut args).unwrap_err();
        assert_eq!(error.kind(), plugin_api::ErrorKind::Validation);
        let message = error.message();
        assert!(
            message.contains("/: missing required property \"city\""),
            "{message}"
        );
        assert!(
            message.contains("/top: must be of type integer, got \"2\""),
            "{message}"
        );
        assert!(
            message.contains("/units: must be one of \"metric\", \"imperial\", got \"kelvin\""),
            "{message}"
        );
    }

    #[test]
    fn an_unknown_argument_is_refused_with_the_known_names() {
        let strict = ArgumentSchema::compile(&json!({
            "type": "object",
            "properties": {"topic": {"type": "string"}, "top": {"type": "integer"}},
            "additionalProperties": false
        }))
        .unwrap();
        let mut args = json!({"topp": 3}).as_object().unwrap().clone();
        let error = strict.check(&mut args).unwrap_err();
        assert_eq!(
            error.message(),
            "invalid arguments: /: unknown argument \"topp\": the arguments are \"top\", \"topic\""
        );
    }

    #[test]
    fn defaults_are_filled_in_nested_objects_too() {
        let mut args = json!({"city": "Oslo", "options": {}})
            .as_object()
            .unwrap()
            .clone();
        schema().check(&mut args).unwrap();
        assert_eq!(
            Value::Object(args),
            json!({"city": "Oslo", "units": "metric", "mode": "fast", "options": {"lang": "en"}})
        );
    }

    #[test]
    fn a_schema_that_does_not_compile_says_why() {
        let error = ArgumentSchema::compile(&json!({"type": "objekt"}))
            .err()
            .unwrap();
        assert!(error.contains("does not compile"), "{error}");
        assert!(ArgumentSchema::compile(
            &json!({"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"})
        )
        .is_ok());
    }
}
