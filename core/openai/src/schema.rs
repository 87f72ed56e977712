//! The JSON Schema of Agent Zero's tool request, built from the profile's tools for
//! `response_format`, and written with its keys in the order given: a server that turns the
//! schema into a grammar makes the model write the keys in that order, so `tool_name` and
//! `tool_args`, constrained to the tools that exist, come before `thoughts` (bounded) unless
//! the model's `thoughts` says otherwise.

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::{json, Value};

use super::config::{ModelConfig, Thoughts};
use toolhost::ToolSpec;

/// JSON whose objects keep the order their keys were given in (serde_json's `Value` sorts
/// them); a leaf is any `Value`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Ordered {
    /// An object, keys in order.
    Object(Vec<(&'static str, Ordered)>),
    /// An array.
    Array(Vec<Ordered>),
    /// Anything else, written as serde_json writes it.
    Leaf(Value),
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, out: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Object(entries) => {
                let mut map = out.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(key, value)?;
                }
                map.end()
            }
            Self::Array(items) => {
                let mut seq = out.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(item)?;
                }
                seq.end()
            }
            Self::Leaf(value) => value.serialize(out),
        }
    }
}

impl From<Value> for Ordered {
    fn from(value: Value) -> Self {
        Self::Leaf(value)
    }
}

/// How `tool_name` and `tool_args` are constrained.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// `tool_name` one of the names, `tool_args` any object.
    Names,
    /// One branch per tool (`oneOf`): its name as a `const`, its parameters as `tool_args`.
    Tools,
}

/// The schema of a tool request for `tools` in `form`, bounded as `config` says. Without
/// tools, `tool_name` is any string.
pub(crate) fn request_schema(config: &ModelConfig, tools: &[ToolSpec], form: Form) -> Ordered {
    let names: Vec<Value> = tools.iter().map(|t| Value::from(t.name.as_str())).collect();
    match form {
        Form::Tools if !tools.is_empty() => {
            let branches = tools
                .iter()
                .map(|t| {
                    let name = json!({"type": "string", "const": t.name});
                    request_object(config, name, arguments(config, &t.parameters))
                })
                .collect();
            Ordered::Object(vec![("oneOf", Ordered::Array(branches))])
        }
        _ => {
            let name = match names.is_empty() {
                true => json!({"type": "string"}),
                false => json!({"type": "string", "enum": names}),
            };
            request_object(config, name, json!({"type": "object"}))
        }
    }
}

/// One request object: `thoughts`, `headline`, `tool_name`, `tool_args`, all required,
/// nothing else; `thoughts` and `headline` last, first (Agent Zero's order) or left out, as
/// `config.thoughts` says.
fn request_object(config: &ModelConfig, name: Value, args: Value) -> Ordered {
    let thoughts = json!({
        "type": "array",
        "items": {"type": "string", "maxLength": config.max_thought_chars},
        "minItems": 1,
        "maxItems": config.max_thoughts,
    });
    let headline = json!({"type": "string", "maxLength": config.max_headline_chars});
    let call = [("tool_name", name.into()), ("tool_args", args.into())];
    let notes = [("thoughts", thoughts.into()), ("headline", headline.into())];
    let keys: Vec<(&'static str, Ordered)> = match config.thoughts {
        Thoughts::First => notes.into_iter().chain(call).collect(),
        Thoughts::Last => call.into_iter().chain(notes).collect(),
        Thoughts::None => call.into_iter().collect(),
    };
    let required: Vec<&str> = keys.iter().map(|(key, _)| *key).collect();
    Ordered::Object(vec![
        ("type", json!("object").into()),
        ("properties", Ordered::Object(keys)),
        ("required", json!(required).into()),
        ("additionalProperties", json!(false).into()),
    ])
}

/// The most branches one tool's optional arguments are spread over (`optional_args`): up to
/// four optional properties each get every combination; a tool with more keeps its schema as
/// it is.
const MAX_ARG_BRANCHES: usize = 16;

/// A tool's parameters as `tool_args`: its object schema (each top-level string property
/// without a `maxLength` given `max_arg_chars`, if set), unless it refers to definitions
/// (`$ref`), which would not resolve inside a branch: then any object. Its optional
/// properties (those not `required`) are left out without `optional_args`; with it, each may
/// be written or left out in any grammar ([`optional`]).
fn arguments(config: &ModelConfig, parameters: &Value) -> Value {
    let is_object = parameters.get("type").is_some_and(|t| t == "object");
    if !is_object || parameters.to_string().contains("\"$ref\"") {
        return json!({"type": "object"});
    }
    let mut parameters = parameters.clone();
    let required: Vec<Value> = match parameters.get("required") {
        Some(Value::Array(names)) => names.clone(),
        _ => Vec::new(),
    };
    let Some(properties) = parameters
        .get_mut("properties")
        .and_then(Value::as_object_mut)
    else {
        return parameters;
    };
    if let Some(chars) = config.max_arg_chars {
        for property in properties.values_mut().filter_map(Value::as_object_mut) {
            let string = property.get("type").is_some_and(|t| t == "string");
            if string && !property.contains_key("maxLength") {
                property.insert("maxLength".to_owned(), json!(chars));
            }
        }
    }
    let optional: Vec<String> = properties
        .keys()
        .filter(|name| !required.contains(&Value::from(name.as_str())))
        .cloned()
        .collect();
    match config.optional_args {
        false => {
            properties.retain(|name, _| !optional.contains(name));
            parameters
        }
        true => self::optional(parameters, &optional),
    }
}

/// `parameters` as one branch (`oneOf`) per combination of its `optional` properties, each
/// branch listing exactly its properties, all `required`, nothing else allowed: a grammar
/// that makes every listed property required (node-llama-cpp's) can then leave one out, and
/// one that reads `required` (llama.cpp's) or a strict server (OpenAI's, which wants every
/// property required) reads the same thing. Without optional properties, or with more than
/// [`MAX_ARG_BRANCHES`] combinations, `parameters` as they are.
fn optional(parameters: Value, optional: &[String]) -> Value {
    let combinations = 1usize
        .checked_shl(optional.len() as u32)
        .unwrap_or(usize::MAX);
    if optional.is_empty() || combinations > MAX_ARG_BRANCHES {
        return parameters;
    }
    let Value::Object(object) = &parameters else {
        return parameters;
    };
    let all = object
        .get("properties")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let branches = (0..combinations).map(|chosen| {
        let mut branch = object.clone();
        let properties: serde_json::Map<String, Value> = all
            .iter()
            .filter(|(name, _)| match optional.iter().position(|o| o == *name) {
                Some(at) => chosen & (1 << at) != 0,
                None => true,
            })
            .map(|(name, schema)| (name.clone(), schema.clone()))
            .collect();
        let names: Vec<&String> = properties.keys().collect();
        branch.insert("required".to_owned(), json!(names));
        branch.insert("properties".to_owned(), Value::Object(properties));
        branch.insert("additionalProperties".to_owned(), json!(false));
        Value::Object(branch)
    });
    json!({"oneOf": branches.collect::<Vec<Value>>()})
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> ModelConfig {
        toml::from_str("base_url = \"http://x/v1\"\nmodel = \"m\"\nstructured_output = true")
            .unwrap()
    }

    fn tool(name: &str, parameters: Value) -> ToolSpec {
        ToolSpec {
            name: name.to_owned(),
            description: String::new(),
            parameters,
        }
    }

    #[test]
    fn keys_stay_in_agent_zeros_order_on_the_wire_and_thoughts_are_bounded() {
        let tools = [tool("greet", json!({"type": "object"}))];
        let mut first = config();
        first.thoughts = Thoughts::First;
        let text = serde_json::to_string(&request_schema(&first, &tools, Form::Names)).unwrap();
        let at = |key: &str| text.find(&format!("\"{key}\":")).unwrap();
        assert!(at("thoughts") < at("headline"), "{text}");
        assert!(at("headline") < at("tool_name") && at("tool_name") < at("tool_args"));
        let value: Value = serde_json::from_str(&text).unwrap();
        let thoughts = &value["properties"]["thoughts"];
        assert_eq!(
            (
                thoughts["maxItems"].clone(),
                thoughts["items"]["maxLength"].clone()
            ),
            (json!(2), json!(120))
        );
        assert_eq!(value["properties"]["tool_name"]["enum"], json!(["greet"]));
        assert_eq!(value["additionalProperties"], false);
    }

    #[test]
    fn the_tools_form_has_one_branch_per_tool_with_its_parameters() {
        let greet = json!({"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]});
        let referring = json!({"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}});
        let tools = [tool("greet", greet.clone()), tool("response", referring)];
        let value = serde_json::to_value(request_schema(&config(), &tools, Form::Tools)).unwrap();
        let branches = value["oneOf"].as_array().unwrap();
        assert_eq!(branches.len(), 2);
        assert_eq!(branches[0]["properties"]["tool_name"]["const"], "greet");
        assert_eq!(branches[0]["properties"]["tool_args"], greet);
        assert_eq!(
            branches[1]["properties"]["tool_args"],
            json!({"type": "object"})
        );
        // A string argument bounded where the tool sets no bound and the model asks for one.
        let mut bounded = config();
        bounded.max_arg_chars = Some(40);
        let value = serde_json::to_value(request_schema(&bounded, &tools, Form::Tools)).unwrap();
        let name = &value["oneOf"][0]["properties"]["tool_args"]["properties"]["name"];
        assert_eq!(name, &json!({"type": "string", "maxLength": 40}));
        // No tools: the names form with any name.
        let value = serde_json::to_value(request_schema(&config(), &[], Form::Tools)).unwrap();
        assert_eq!(value["properties"]["tool_name"], json!({"type": "string"}));
    }

    #[test]
    fn each_optional_argument_may_be_left_out_in_a_branch_of_its_own() {
        let times = json!({"type": "integer", "minimum": 1, "maximum": 1000});
        let greet = json!({"type": "object", "title": "GreetArgs", "required": ["name"],
            "properties": {"name": {"type": "string"}, "times": times}});
        let args = |config: &ModelConfig, parameters: &Value| {
            let tools = [tool("greet", parameters.clone())];
            let value = serde_json::to_value(request_schema(config, &tools, Form::Tools));
            value.unwrap()["oneOf"][0]["properties"]["tool_args"].clone()
        };
        // Kept (the default): one branch without `times`, one with it, each exact.
        let branch = |properties: Value, required: Value| {
            json!({"type": "object", "title": "GreetArgs", "required": required,
                "properties": properties, "additionalProperties": false})
        };
        let name = json!({"type": "string"});
        assert_eq!(
            args(&config(), &greet),
            json!({"oneOf": [
                branch(json!({"name": name}), json!(["name"])),
                branch(json!({"name": name, "times": times}), json!(["name", "times"])),
            ]})
        );
        // Four optional arguments: 16 branches, from none to all; five: the schema as it is.
        let many = |count: usize| {
            let properties: serde_json::Map<String, Value> = (0..count)
                .map(|i| (format!("o{i}"), json!({"type": "integer"})))
                .collect();
            json!({"type": "object", "properties": properties})
        };
        let four = args(&config(), &many(4));
        let branches = four["oneOf"].as_array().unwrap();
        assert_eq!(branches.len(), 16);
        assert_eq!(branches[0]["required"], json!([]));
        assert_eq!(branches[15]["required"], json!(["o0", "o1", "o2", "o3"]));
        assert_eq!(args(&config(), &many(5)), many(5));
        // Without optional arguments, the schema as it is.
        let required = json!({"type": "object", "required": ["name"],
            "properties": {"name": {"type": "string"}}});
        assert_eq!(args(&config(), &required), required);
        // Left out with `optional_args = false`.
        let mut required_only = config();
        required_only.optional_args = false;
        let left = args(&required_only, &greet);
        assert_eq!(left["properties"], json!({"name": {"type": "string"}}));
    }

    #[test]
    fn thoughts_go_first_last_or_nowhere_as_configured() {
        let tools = [tool("greet", json!({"type": "object"}))];
        let keys = |thoughts: &str| {
            let mut config = config();
            config.thoughts = toml::from_str::<toml::Table>(&format!("t = \"{thoughts}\""))
                .unwrap()["t"]
                .clone()
                .try_into()
                .unwrap();
            let schema = request_schema(&config, &tools, Form::Tools);
            let text = serde_json::to_string(&schema).unwrap();
            let value: Value = serde_json::from_str(&text).unwrap();
            let branch = &value["oneOf"][0];
            let mut keys: Vec<&str> = ["thoughts", "headline", "tool_name", "tool_args"]
                .into_iter()
                .filter(|k| branch["properties"].get(k).is_some())
                .collect();
            keys.sort_by_key(|k| text.find(&format!("\"{k}\":")).unwrap());
            assert_eq!(branch["required"], json!(keys), "{text}");
            keys.join(" ")
        };
        assert_eq!(keys("first"), "thoughts headline tool_name tool_args");
        assert_eq!(keys("last"), "tool_name tool_args thoughts headline");
        assert_eq!(keys("none"), "tool_name tool_args");
        assert_eq!(config().thoughts, Thoughts::Last);
    }
}
