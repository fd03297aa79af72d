#!/usr/bin/env python3
"""Writes schemas.json beside this script: the JSON Schema corpus of the structured-output test.

    tests/data/grammar/make_schemas.py        (rewrites tests/data/grammar/schemas.json)

Each entry is {"name", "prompt", "schema"}; grammar_corpus (tests/grammar) generates from every
schema on the default model (greedy and sampled with several seeds) and validate_corpus.py
checks each output with the `jsonschema` package, formats included. The corpus covers every
construct lib/grammar supports: type (single and lists), properties/required,
additionalProperties (false, true, a schema), min/maxProperties, items, prefixItems, minItems/maxItems, enum,
const, anyOf, oneOf, $ref/$defs (also recursive and "definitions"), minLength/maxLength,
integer minimum/maximum/exclusive bounds, pattern, formats date/time/date-time/uuid, and
"any JSON value". Strings, repetitions in patterns and the number of extra members are bounded
(maxLength, {m,n}, maxProperties) where a small model would otherwise ramble past the token
budget: an unbounded construct is still in the corpus (json-string, "+" in patterns, "*" of
additionalProperties without maxProperties in nested values), just not everywhere.
"""
import json
import os

S = {"type": "string", "maxLength": 24}  # a short string


def obj(props, required=None, **extra):
    s = {"type": "object", "properties": props}
    s["required"] = list(props) if required is None else required
    s.update(extra)
    return s


schemas = []


def add(name, prompt, schema, sampled=True):
    """sampled=False: greedy only (see the note at additional_true)."""
    entry = {"name": name, "prompt": prompt, "schema": schema}
    if not sampled:
        entry["sampled"] = False
    schemas.append(entry)


# primitives
add("string", "Name a fruit.", {"type": "string", "maxLength": 30})
add("integer", "How many legs does a spider have?", {"type": "integer"})
add("number", "What is pi, roughly?", {"type": "number"})
add("boolean", "Is the sky blue?", {"type": "boolean"})
add("null", "Say nothing.", {"type": "null"})
add("type_list", "Give a name or nothing.", {"type": ["string", "null"], "maxLength": 20})
# Any value holds unbounded strings too: after the 4-bit weights (W4A8) a sampled run (seed 2)
# repeated an emoji until max_tokens, as additional_true's did below, so greedy only.
add("any_value", "Give any JSON value describing a cat.", {}, sampled=False)
add("any_object", "Describe a cat as a JSON object.", {"type": "object", "additionalProperties": {"type": ["integer", "boolean"]}, "maxProperties": 4})
# objects
add("npc", "The blacksmith greets a knight.", obj({
    "say": {"type": "string", "maxLength": 60},
    "action": {"enum": ["give", "attack", "flee", "trade"]},
    "item": {"type": ["string", "null"], "maxLength": 20}}))
add("person", "Describe a person.", obj({"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 120}}))
add("optional_props", "Describe a book; the subtitle is optional.",
    obj({"title": S, "subtitle": S, "year": {"type": "integer", "minimum": 1400, "maximum": 2030}}, required=["title"]))
add("no_required", "Describe weather, any fields you like.", obj({"temp": {"type": "integer"}, "sky": S}, required=[]))
add("additional_false", "A point.", obj({"x": {"type": "integer"}, "y": {"type": "integer"}}, additionalProperties=False))
# Extra members of any value: nothing in the schema bounds a string in them, and sampled runs of
# the 135M model write one until max_tokens (seed 2 at temperature 0.7 did), so greedy only.
add("additional_true", "A record with an id and one short extra field.",
    obj({"id": {"type": "integer"}}, additionalProperties=True, maxProperties=3), sampled=False)
add("additional_schema", "Scores by player name.", obj({"game": S}, additionalProperties={"type": "integer", "minimum": 0, "maximum": 100}, maxProperties=4))
add("nested_object", "An address book entry.", obj({"name": S, "address": obj({"city": S, "zip": {"type": "string", "pattern": "^[0-9]{5}$"}})}))
add("deep_nesting", "A nested config.", obj({"a": obj({"b": obj({"c": obj({"d": {"type": "boolean"}})})})}))
add("many_props", "A product.", obj({k: v for k, v in [
    ("sku", {"type": "string", "pattern": "^[A-Z]{3}-[0-9]{4}$"}), ("name", S), ("price", {"type": "number"}),
    ("stock", {"type": "integer", "minimum": 0}), ("active", {"type": "boolean"}), ("tags", {"type": "array", "items": S, "maxItems": 3})]}))
add("unicode_keys", "Translate hello.", obj({"français": S, "日本語": S}))
add("empty_object", "An empty object.", {"type": "object", "additionalProperties": False})
# arrays
add("array_strings", "List three colours.", {"type": "array", "items": S, "minItems": 3, "maxItems": 3})
add("array_ints", "Some small primes.", {"type": "array", "items": {"type": "integer", "minimum": 2, "maximum": 97}, "minItems": 1, "maxItems": 6})
add("array_any", "A short list of anything.", {"type": "array", "maxItems": 4})
add("array_empty_ok", "Zero or more names.", {"type": "array", "items": S, "maxItems": 2})
add("array_min_only", "At least two animals.", {"type": "array", "items": {"enum": ["cat", "dog", "cow", "owl"]}, "minItems": 2, "maxItems": 8})
add("array_of_objects", "Two people.", {"type": "array", "items": obj({"name": S, "age": {"type": "integer", "minimum": 0, "maximum": 99}}), "minItems": 2, "maxItems": 2})
add("prefix_items", "A name and an age.", {"type": "array", "prefixItems": [S, {"type": "integer", "minimum": 0, "maximum": 99}], "items": False})
add("prefix_then_items", "An operator and numbers.", {"type": "array", "prefixItems": [{"enum": ["add", "mul"]}], "items": {"type": "integer"}, "minItems": 2, "maxItems": 4})
add("tuple_only", "A coordinate.", {"prefixItems": [{"type": "number"}, {"type": "number"}]})
add("nested_arrays", "A 2x2 matrix.", {"type": "array", "items": {"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 2}, "minItems": 2, "maxItems": 2})
add("max_items_zero", "An empty list.", {"type": "array", "maxItems": 0})
# enum and const
add("enum_strings", "Pick a direction.", {"enum": ["north", "south", "east", "west"]})
add("enum_mixed", "Pick a value.", {"enum": ["low", 2, True, None, {"k": [1]}]})
add("enum_typed", "Pick a size.", {"type": "string", "enum": ["S", "M", "L", 4]})
add("const_string", "Say the magic word.", {"const": "please"})
add("const_object", "The fixed config.", {"const": {"v": 1, "mode": "safe"}})
add("const_in_object", "A versioned message.", obj({"version": {"const": 2}, "text": S}))
# anyOf / oneOf
add("any_of", "An id: a number or a code.", {"anyOf": [{"type": "integer", "minimum": 0}, {"type": "string", "pattern": "^[a-z]{3}$"}]})
add("one_of_types", "True, false or nothing.", {"oneOf": [{"type": "boolean"}, {"type": "null"}]})
add("one_of_objects", "A shape.", {"oneOf": [
    obj({"kind": {"const": "circle"}, "r": {"type": "integer", "minimum": 1, "maximum": 9}}, additionalProperties=False),
    obj({"kind": {"const": "square"}, "side": {"type": "integer", "minimum": 1, "maximum": 9}}, additionalProperties=False)]})
add("nullable_ref", "Maybe a point.", {"$defs": {"p": obj({"x": {"type": "integer"}})}, "anyOf": [{"$ref": "#/$defs/p"}, {"type": "null"}]})
# $ref / $defs
add("ref_defs", "Two addresses.", {"$defs": {"addr": obj({"city": S})}, "type": "object",
    "properties": {"home": {"$ref": "#/$defs/addr"}, "work": {"$ref": "#/$defs/addr"}}, "required": ["home", "work"]})
add("ref_definitions", "A colour.", {"definitions": {"c": {"enum": ["red", "green"]}}, "$ref": "#/definitions/c"})
add("ref_recursive_tree", "A tree of two levels: a root with two leaves.", {"$defs": {"node": {"type": "object", "properties": {
    "v": {"type": "integer", "minimum": 0, "maximum": 9},
    "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 2}}, "required": ["v"], "additionalProperties": False}},
    "$ref": "#/$defs/node"})
add("ref_root", "A nested list of digits.", {"type": "array", "items": {"anyOf": [{"type": "integer", "minimum": 0, "maximum": 9}, {"$ref": "#"}]}, "maxItems": 3})
add("ref_pointer", "A user.", {"type": "object", "properties": {"name": S, "friend": {"$ref": "#/properties/name"}}, "required": ["name", "friend"]})
# strings: lengths, patterns, formats
add("min_max_length", "A nickname.", {"type": "string", "minLength": 3, "maxLength": 8})
add("exact_length", "A three-letter code.", {"type": "string", "minLength": 3, "maxLength": 3})
add("pattern_phone", "A phone number.", {"type": "string", "pattern": "^\\+?[0-9]{2,3}-[0-9]{3}-[0-9]{4}$"})
add("pattern_unanchored", "A product code.", {"type": "string", "pattern": "[A-Z]{2}[0-9]{2}"})
add("pattern_alternation", "A pet.", {"type": "string", "pattern": "^(cat|dog|bird)s?$"})
add("pattern_classes", "An identifier.", {"type": "string", "pattern": "^[a-zA-Z_]\\w{0,10}$"})
add("pattern_escapes", "A version string.", {"type": "string", "pattern": "^v\\d{1,3}\\.\\d{1,3}(\\.\\d+)?$"})
add("pattern_quote", "Quote a word.", {"type": "string", "pattern": "^say \"[a-z]{1,8}\"$"})
add("format_date", "Today's date.", {"type": "string", "format": "date"})
add("format_time", "A time of day.", {"type": "string", "format": "time"})
add("format_date_time", "A timestamp.", {"type": "string", "format": "date-time"})
add("format_uuid", "A random id.", {"type": "string", "format": "uuid"})
add("event", "An event.", obj({"title": S, "day": {"type": "string", "format": "date"}, "at": {"type": "string", "format": "time"}, "id": {"type": "string", "format": "uuid"}}))
# integer ranges
add("int_range_small", "A dice roll.", {"type": "integer", "minimum": 1, "maximum": 6})
add("int_range_negative", "A winter temperature.", {"type": "integer", "minimum": -40, "maximum": -1})
add("int_range_across_zero", "A small offset.", {"type": "integer", "minimum": -15, "maximum": 230})
add("int_exclusive", "A percentage strictly between 0 and 100.", {"type": "integer", "exclusiveMinimum": 0, "exclusiveMaximum": 100})
add("int_min_only", "A year after 1999.", {"type": "integer", "minimum": 2000})
add("int_max_only", "A debt, at most -1000.", {"type": "integer", "maximum": -1000})
add("int_wide", "A population.", {"type": "integer", "minimum": 1000, "maximum": 1000000})
# a realistic one: a tool call shape
add("tool_call", "Call the weather tool for Paris.", obj({
    "name": {"const": "get_weather"},
    "arguments": obj({"city": S, "unit": {"enum": ["celsius", "fahrenheit"]}}, required=["city"], additionalProperties=False)},
    additionalProperties=False))

names = [s["name"] for s in schemas]
assert len(names) == len(set(names)), "duplicate names"
assert len(schemas) >= 50
out = os.path.join(os.path.dirname(os.path.abspath(__file__)), "schemas.json")
with open(out, "w", encoding="utf-8") as f:
    json.dump(schemas, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(f"wrote {len(schemas)} schemas to {out}")
