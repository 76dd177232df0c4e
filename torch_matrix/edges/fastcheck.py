"""Compile a JSON Schema (the subset our published schemas use) into one plain Python function.

The function only ever says "surely valid" (True) or "ask jsonschema" (False): stricter than
the schema is harmless, laxer is a bug. jsonschema costs ~1 ms per cell result and a tree of
closures still ~50 us; generated straight-line code checks a result in a few microseconds,
which is what keeps a 2,000-cell report under a second.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

KNOWN_KEYWORDS = frozenset(
    {
        "$schema",
        "$id",
        "title",
        "description",
        "$defs",
        "$ref",
        "type",
        "const",
        "enum",
        "required",
        "properties",
        "additionalProperties",
        "items",
        "pattern",
        "minimum",
        "minLength",
    }
)
_SCALARS = (str, int, float, bool, type(None))
_TYPE_TESTS = {  # expression that is True when {v} does NOT have the JSON type
    "object": "type({v}) is not dict",
    "array": "type({v}) is not list",
    "string": "type({v}) is not str",
    "integer": "type({v}) is not int",
    "number": "type({v}) is not int and type({v}) is not float",
    "boolean": "type({v}) is not bool",
    "null": "{v} is not None",
}
_DEFS = "#/$defs/"


class Unsupported(Exception):
    """The schema uses something this compiler does not know: use jsonschema alone."""


def _only_if(kind: Any, test: str, json_type: str) -> str:
    """``test and `` unless the schema's ``type`` (``kind``) already guarantees it."""
    return (
        "" if kind == json_type or (json_type == "number" and kind == "integer") else f"{test} and "
    )


class _Writer:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root
        self.lines: list[str] = []
        self.constants: dict[str, Any] = {}
        self.defs: dict[str, str] = {}  # $defs name -> generated function name
        self.pending: list[str] = []
        self.counter = 0

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def constant(self, value: Any) -> str:
        key = self.name("_c")
        self.constants[key] = value
        return key

    def function_for_def(self, ref: Any) -> str:
        if not isinstance(ref, str) or not ref.startswith(_DEFS) or "/" in ref[len(_DEFS) :]:
            raise Unsupported(ref)
        key = ref[len(_DEFS) :]
        defs = self.root.get("$defs")
        if not isinstance(defs, dict) or key not in defs:
            raise Unsupported(ref)
        if key not in self.defs:
            self.defs[key] = self.name("_def")
            self.pending.append(key)
        return self.defs[key]

    def node(self, schema: Any, var: str, indent: str, out: list[str]) -> None:
        """Append statements that ``return False`` unless ``var`` surely matches ``schema``."""
        if schema is True:
            return
        if not isinstance(schema, dict) or set(schema) - KNOWN_KEYWORDS:
            raise Unsupported(schema)
        if "$ref" in schema:
            out.append(
                f"{indent}if not {self.function_for_def(schema['$ref'])}({var}): return False"
            )
        kind = schema.get("type")
        if "type" in schema:
            if not isinstance(kind, str) or kind not in _TYPE_TESTS:
                raise Unsupported(kind)
            out.append(f"{indent}if {_TYPE_TESTS[kind].format(v=var)}: return False")
        self.values(schema, var, indent, out)
        if "required" in schema:
            required = schema["required"]
            if not isinstance(required, list) or not all(isinstance(key, str) for key in required):
                raise Unsupported(required)
            if required:
                out.append(
                    f"{indent}if {_only_if(kind, f'type({var}) is dict', 'object')}not "
                    f"{self.constant(frozenset(required))} <= {var}.keys(): return False"
                )
        if "properties" in schema or "additionalProperties" in schema:
            self.properties(schema, var, indent, out, kind == "object")
        if "items" in schema:
            item = self.name("_i")
            body: list[str] = []
            self.node(schema["items"], item, indent + "        ", body)
            if body and kind == "array":
                out.append(f"{indent}for {item} in {var}:")
                out.extend(line[4:] for line in body)
            elif body:
                out.append(f"{indent}if type({var}) is list:")
                out.append(f"{indent}    for {item} in {var}:")
                out.extend(body)
        self.scalars(schema, kind, var, indent, out)

    def values(self, schema: dict[str, Any], var: str, indent: str, out: list[str]) -> None:
        """``const`` and ``enum``: the value itself, its type included (``True`` is not ``1``)."""
        if "const" in schema:
            value = schema["const"]
            if type(value) not in _SCALARS:
                raise Unsupported(value)
            out.append(
                f"{indent}if not (type({var}) is {self.constant(type(value))} and "
                f"{var} == {self.constant(value)}): return False"
            )
        if "enum" in schema:
            options = schema["enum"]
            if not isinstance(options, list) or any(
                type(option) not in _SCALARS for option in options
            ):
                raise Unsupported(options)
            kinds = {type(option) for option in options}
            if len(kinds) == 1 and kinds <= {str, int}:
                out.append(
                    f"{indent}if not (type({var}) is {self.constant(kinds.pop())} and "
                    f"{var} in {self.constant(frozenset(options))}): return False"
                )
            else:
                pairs = self.constant(tuple((type(option), option) for option in options))
                out.append(
                    f"{indent}if not any(type({var}) is t and {var} == o for t, o in {pairs}): return False"
                )

    def scalars(
        self, schema: dict[str, Any], kind: Any, var: str, indent: str, out: list[str]
    ) -> None:
        """``pattern``, ``minimum``, ``minLength``: each applies to its own type only."""
        if "pattern" in schema:
            try:
                pattern = re.compile(schema["pattern"])
            except (re.error, TypeError) as error:
                raise Unsupported(schema["pattern"]) from error
            out.append(
                f"{indent}if {_only_if(kind, f'type({var}) is str', 'string')}"
                f"{self.constant(pattern)}.search({var}) is None: return False"
            )
        if "minimum" in schema:
            minimum = schema["minimum"]
            if type(minimum) not in (int, float):
                raise Unsupported(minimum)
            number = f"(type({var}) is int or type({var}) is float)"
            out.append(
                f"{indent}if {_only_if(kind, number, 'number')}not {var} >= {self.constant(minimum)}: return False"
            )
        if "minLength" in schema:
            length = schema["minLength"]
            if type(length) is not int:
                raise Unsupported(length)
            out.append(
                f"{indent}if {_only_if(kind, f'type({var}) is str', 'string')}len({var}) < {length}: return False"
            )

    def properties(
        self, schema: dict[str, Any], var: str, indent: str, out: list[str], is_object: bool
    ) -> None:
        known = schema.get("properties", {})
        extra = schema.get("additionalProperties", True)
        if not isinstance(known, dict):
            raise Unsupported(known)
        # The "required" line, emitted before this, returned already when a required key is missing.
        present = set(schema.get("required", ())) if is_object else set()
        body: list[str] = []
        inner = indent if is_object else indent + "    "
        if extra is False:
            body.append(
                f"{inner}if not {var}.keys() <= {self.constant(frozenset(known))}: return False"
            )
        for key, sub in known.items():
            item = self.name("_p")
            checks: list[str] = []
            self.node(sub, item, inner + "    ", checks)
            if checks and key in present:
                body.append(f"{inner}{item} = {var}[{key!r}]")
                body.extend(line[4:] for line in checks)
            elif checks:
                body.append(f"{inner}if {key!r} in {var}:")
                body.append(f"{inner}    {item} = {var}[{key!r}]")
                body.extend(checks)
        if extra is not False:
            item, key_var = self.name("_x"), self.name("_k")
            checks = []
            self.node(extra, item, inner + "    ", checks)
            if checks:
                if known:
                    names = self.constant(frozenset(known))
                    body.append(f"{inner}for {key_var}, {item} in {var}.items():")
                    body.append(f"{inner}    if {key_var} in {names}: continue")
                else:
                    body.append(f"{inner}for {item} in {var}.values():")
                body.extend(checks)
        if body and not is_object:
            out.append(f"{indent}if type({var}) is dict:")
        out.extend(body)

    def function(self, name: str, schema: Any) -> None:
        body: list[str] = []
        self.node(schema, "v", "    ", body)
        self.lines.append(f"def {name}(v):")
        self.lines.extend(body)
        self.lines.append("    return True")


def source_and_constants(schema: Any) -> tuple[str, dict[str, Any]]:
    """The generated module text (for reading and tests) and the constants it refers to."""
    if not isinstance(schema, dict):
        raise Unsupported(schema)
    writer = _Writer(schema)
    writer.function("check", schema)
    while writer.pending:
        key = writer.pending.pop()
        writer.function(writer.defs[key], writer.root["$defs"][key])
    return "\n".join(writer.lines) + "\n", writer.constants


def compile_checker(schema: Any) -> Callable[[Any], bool]:
    """``check(value) -> bool``: True only when ``value`` surely satisfies ``schema``.

    Raises ``Unsupported`` when the schema uses a keyword or form outside the known subset.
    """
    source, constants = source_and_constants(schema)
    namespace: dict[str, Any] = dict(constants)
    exec(compile(source, "<torch-matrix fast schema check>", "exec"), namespace)  # noqa: S102 - our own text
    return namespace["check"]
