"""The generated schema check: never says valid where jsonschema says invalid, and knows its limits."""

from __future__ import annotations

import itertools
import math

import jsonschema
import pytest

from torch_matrix.edges.fastcheck import Unsupported, compile_checker, source_and_constants

SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["kind"],
    "properties": {
        "kind": {"const": "k"},
        "n": {"type": "number", "minimum": 0},
        "mixed": {"enum": ["a", 1, None, True]},
        "names": {"type": "array", "items": {"$ref": "#/$defs/name"}},
        "tree": {"$ref": "#/$defs/tree"},
    },
    "additionalProperties": {"type": "integer"},
    "$defs": {
        "name": {"type": "string", "minLength": 2, "pattern": "^[a-z]+$"},
        "tree": {
            "type": "object",
            "additionalProperties": False,
            "properties": {"child": {"$ref": "#/$defs/tree"}, "leaf": {"type": "boolean"}},
        },
    },
}

VALUES = [
    None,
    True,
    False,
    0,
    1,
    -1,
    1.0,
    2.5,
    math.nan,
    math.inf,
    "",
    "a",
    "k",
    "ab",
    "aB",
    [],
    ["ab"],
    ["a"],
    ["ab", 3],
    {},
    {"leaf": True},
    {"leaf": 1},
    {"child": {"leaf": False}},
    {"child": {"x": 1}},
]
KEYS = ["kind", "n", "mixed", "names", "tree", "other"]


def documents():
    yield from VALUES
    for key, value in itertools.product(KEYS, VALUES):
        yield {"kind": "k", key: value}
        yield {key: value}
    for first, second in itertools.product(VALUES, VALUES[:12]):
        yield {"kind": "k", "n": second, "mixed": first, "other": second}


def test_fast_yes_only_where_jsonschema_agrees_and_it_says_yes_often():
    fast, strict = compile_checker(SCHEMA), jsonschema.Draft202012Validator(SCHEMA)
    accepted = 0
    for document in documents():
        if fast(document):
            assert strict.is_valid(document), document
            accepted += 1
    assert accepted > 20
    assert fast(
        {
            "kind": "k",
            "n": 0,
            "mixed": None,
            "names": ["ab"],
            "tree": {"child": {"leaf": True}},
            "other": 3,
        }
    )


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "oneOf": [{}]},  # a keyword it does not know
        {"type": ["string", "null"]},
        {"$ref": "https://example.com/other.json"},
        {"$ref": "#/$defs/missing"},
        {"const": {"a": 1}},
        {"pattern": "("},
    ],
)
def test_unknown_forms_are_refused_not_guessed(schema):
    with pytest.raises(Unsupported):
        compile_checker(schema)


def test_generated_source_is_plain_python():
    source, constants = source_and_constants(SCHEMA)
    assert source.startswith("def check(v):")
    compile(source, "<test>", "exec")
    assert constants
