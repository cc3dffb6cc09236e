"""The versioned JSON schema of everything specverify writes, and ``validate_document``.

The documents share ``schema_version`` 2: the certificate (``"kind": "specverify-certificate"``, what ``--json``
writes), a shard's counts file (``"kind": "specverify-parts"``, the parts it ran, what ``--counts-out`` writes; the
``specverify-shard`` files of older versions are still read) and a set of engine configurations' certificates
(``"kind": "specverify-configurations"``). Their JSON Schema (draft 2020-12) files ship in this package, under
``schema/``, beside the version 1 files: a version 1 document is validated against those and
:func:`upgrade_document` migrates it (``specverify.certification.results.migrate``).
``validate_document`` checks a document against its kind's schema with a small built-in validator of the keywords
those files use (no extra dependency); the tests check that it agrees with the ``jsonschema`` package where that is
installed.

>>> validate_document({"kind": "specverify-shard", "schema_version": 2})
Traceback (most recent call last):
...
specverify.errors.InvalidArgument: $.shard is missing (required): not a valid specverify-shard ...
"""

from __future__ import annotations

import functools
import json
import re
from importlib import resources

from specverify.errors import InvalidArgument

__all__ = [
    "SCHEMA_VERSION",
    "SCHEMA_VERSIONS",
    "DOCUMENT_KINDS",
    "load_schema",
    "validate_document",
    "upgrade_document",
]

SCHEMA_VERSION = 2  # what this version writes
SCHEMA_VERSIONS = (1, 2)  # what it reads (version 1 is migrated)
DOCUMENT_KINDS = {
    "specverify-certificate": "certificate.schema.json",
    "specverify-shard": "shard.schema.json",
    "specverify-configurations": "configurations.schema.json",  # version 2 only: one certificate per configuration
    "specverify-parts": "parts.schema.json",  # version 2 only: a shard's part documents
}
_V2_ONLY = ("specverify-configurations", "specverify-parts")
_HOW = {
    "specverify-certificate": "write it with `specverify certify ... --json PATH` (or `specverify merge ... --json`)",
    "specverify-shard": "write it with `specverify certify ... --shard I/N --counts-out PATH`",
    "specverify-parts": "write it with `specverify certify ... --shard I/N --counts-out PATH`",
    "specverify-configurations": "write it with `specverify certify ... --engine-config NAME --engine-config "
    "OTHER --json PATH`",
}
_IGNORED = {"$schema", "$id", "$defs", "title", "description"}
_TYPES = {
    "null": lambda v: v is None,
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool)) or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "string": lambda v: isinstance(v, str),
    "array": lambda v: isinstance(v, (list, tuple)),
    "object": lambda v: isinstance(v, dict),
}


@functools.lru_cache(maxsize=None)
def _schema_text(kind: str, version: int) -> str:
    name = DOCUMENT_KINDS[kind] if version == SCHEMA_VERSION else DOCUMENT_KINDS[kind].replace(".schema", ".v1.schema")
    return resources.files("specverify.report").joinpath("schema", name).read_text()


def load_schema(kind: str = "specverify-certificate", version: int = SCHEMA_VERSION) -> dict:
    """The JSON Schema (a fresh dict) of documents of ``kind`` (one of :data:`DOCUMENT_KINDS`) at ``version``."""
    if kind not in DOCUMENT_KINDS:
        raise InvalidArgument(f"kind={kind!r} is not a specverify document kind; use one of {sorted(DOCUMENT_KINDS)}.")
    if version not in SCHEMA_VERSIONS or (kind in _V2_ONLY and version != SCHEMA_VERSION):
        raise InvalidArgument(
            f"version={version!r} is not a schema version this specverify reads for {kind}: "
            f"{SCHEMA_VERSIONS if kind not in _V2_ONLY else (SCHEMA_VERSION,)}."
        )
    return json.loads(_schema_text(kind, version))


def validate_document(doc: object) -> str:
    """Check ``doc`` (a loaded JSON document) against the schema of its ``kind``; return that kind.

    Raises ``InvalidArgument`` naming the JSON path of the first error (``$.scenarios[0].n``), what the schema
    expects there, and how to get a valid document."""
    if not isinstance(doc, dict):
        raise InvalidArgument(
            f"doc={_short(doc)} is {_json_type(doc)}, expected a JSON object with a 'kind' of {sorted(DOCUMENT_KINDS)}."
        )
    kind = doc.get("kind")
    if kind not in DOCUMENT_KINDS:
        raise InvalidArgument(
            f"$.kind={kind!r} is not a specverify document kind, expected one of {sorted(DOCUMENT_KINDS)}: "
            "certificates written before schema version 1 have no kind; write them again with this version."
        )
    version = doc.get("schema_version")
    if version not in SCHEMA_VERSIONS or isinstance(version, bool):
        raise InvalidArgument(
            f"$.schema_version={version!r} is not one of {list(SCHEMA_VERSIONS)}, the versions this specverify "
            f"reads: {_HOW[kind]} with this version."
        )
    if kind in _V2_ONLY and version != SCHEMA_VERSION:
        raise InvalidArgument(f"$.schema_version={version!r}: {kind} documents exist from version 2; {_HOW[kind]}.")
    schema = load_schema(kind, version)
    problem = _check(doc, schema, "$", schema)
    if problem is not None:
        raise InvalidArgument(f"{problem}: not a valid {kind} (schema version {version}); {_HOW[kind]}.")
    for i, entry in enumerate(doc.get("configurations", ()) if kind == "specverify-configurations" else ()):
        if entry["certificate"] is not None:  # each one against the certificate's own schema
            try:
                if validate_document(entry["certificate"]) != "specverify-certificate":
                    raise InvalidArgument("$.kind is not 'specverify-certificate'")
            except InvalidArgument as exc:
                raise InvalidArgument(f"$.configurations[{i}].certificate: {exc}") from None
    return kind


def upgrade_document(doc: object) -> dict:
    """``doc`` validated and, if it is of version 1, migrated to the current version (and validated again)."""
    from specverify.certification.results.migrate import migrate_document

    validate_document(doc)
    if doc["schema_version"] == SCHEMA_VERSION:
        return doc
    out = migrate_document(doc)
    validate_document(out)
    return out


def _json_type(value: object) -> str:
    for name in ("null", "boolean", "integer", "number", "string", "array", "object"):
        if _TYPES[name](value):
            return {"integer": "an integer", "array": "an array", "object": "an object"}.get(name, f"a {name}")
    return f"a Python {type(value).__name__} (not JSON)"


def _short(value: object, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _same(a: object, b: object) -> bool:
    """JSON equality: ``true`` is not ``1``."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b


def _child(path: str, key: object) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f"{path}[{key!r}]"


def _resolve(ref: str, root: dict) -> dict:
    if not ref.startswith("#/"):
        raise InvalidArgument(f"$ref={ref!r} is not a local reference; the schema files use '#/$defs/NAME' only.")
    node = root
    for part in ref[2:].split("/"):
        node = node[part]
    return node


def _check(value: object, schema: object, path: str, root: dict) -> str | None:
    """The first error of ``value`` at ``path`` against ``schema`` (None if it is valid)."""
    if schema is True or schema == {}:
        return None
    if schema is False:
        return f"{path}={_short(value)} is not allowed here"
    unknown = set(schema) - _IGNORED - _KEYWORDS
    if unknown:
        raise InvalidArgument(f"schema keywords {sorted(unknown)!r} at {path} are not supported by validate_document.")
    for rule, keys in _RULES:
        if not keys.isdisjoint(schema):
            problem = rule(value, schema, path, root)
            if problem is not None:
                return problem
    return None


def _type(value, schema, path, root):
    names = schema["type"] if isinstance(schema["type"], list) else [schema["type"]]
    if not any(_TYPES[name](value) for name in names):
        return f"{path}={_short(value)} is {_json_type(value)}, expected {' or '.join(names)}"
    return None


def _const(value, schema, path, root):
    return None if _same(value, schema["const"]) else f"{path}={_short(value)} expected {schema['const']!r}"


def _enum(value, schema, path, root):
    if any(_same(value, option) for option in schema["enum"]):
        return None
    return f"{path}={_short(value)} expected one of {schema['enum']!r}"


def _bounds(value, schema, path, root):
    if not _TYPES["number"](value):
        return None
    if "minimum" in schema and value < schema["minimum"]:
        return f"{path}={value!r} expected >= {schema['minimum']!r}"
    if "maximum" in schema and value > schema["maximum"]:
        return f"{path}={value!r} expected <= {schema['maximum']!r}"
    if "exclusiveMinimum" in schema and value <= schema["exclusiveMinimum"]:
        return f"{path}={value!r} expected > {schema['exclusiveMinimum']!r}"
    return None


def _string(value, schema, path, root):
    if not isinstance(value, str):
        return None
    if len(value) < schema.get("minLength", 0):
        return f"{path}={value!r} expected at least {schema['minLength']} character(s)"
    if "pattern" in schema and not re.search(schema["pattern"], value):
        return f"{path}={value!r} does not match {schema['pattern']!r}"
    return None


def _object(value, schema, path, root):
    if not isinstance(value, dict):
        return None
    for key in schema.get("required", ()):
        if key not in value:
            return f"{_child(path, key)} is missing (required)"
    for key, needs in schema.get("dependentRequired", {}).items():
        missing = [k for k in needs if key in value and k not in value]
        if missing:
            return f"{_child(path, missing[0])} is missing (required with {key!r})"
    props, extra = schema.get("properties", {}), schema.get("additionalProperties", True)
    for key, item in value.items():
        name = str(key)
        if "propertyNames" in schema:
            problem = _check(name, schema["propertyNames"], f"{_child(path, name)} (key)", root)
            if problem is not None:
                return problem
        if name not in props and extra is False:
            return f"{_child(path, name)} is not a key of this document kind (allowed: {sorted(props)!r})"
        problem = _check(item, props.get(name, extra), _child(path, name), root)
        if problem is not None:
            return problem
    return None


def _array(value, schema, path, root):
    if not isinstance(value, (list, tuple)):
        return None
    if len(value) < schema.get("minItems", 0):
        return f"{path}={_short(value)} has {len(value)} item(s), expected at least {schema['minItems']}"
    if len(value) > schema.get("maxItems", len(value)):
        return f"{path}={_short(value)} has {len(value)} items, expected at most {schema['maxItems']}"
    prefix = schema.get("prefixItems", [])
    for i, item in enumerate(value):
        problem = _check(item, prefix[i] if i < len(prefix) else schema.get("items", True), _child(path, i), root)
        if problem is not None:
            return problem
    return None


def _ref(value, schema, path, root):
    return _check(value, _resolve(schema["$ref"], root), path, root)


def _any_of(value, schema, path, root):
    if any(_check(value, option, path, root) is None for option in schema["anyOf"]):
        return None
    return f"{path}={_short(value)} expected {schema.get('description', 'one of the anyOf forms')}"


def _all_of(value, schema, path, root):
    for part in schema["allOf"]:
        problem = _check(value, part, path, root)
        if problem is not None:
            return problem + (f" ({part['description']})" if "description" in part else "")
    return None


def _if_then(value, schema, path, root):
    if "if" in schema and _check(value, schema["if"], path, root) is None:
        return _check(value, schema.get("then", True), path, root)
    return None


_RULES = (  # each rule with the keywords that call for it, in the order they are checked
    (_ref, {"$ref"}),
    (_type, {"type"}),
    (_const, {"const"}),
    (_enum, {"enum"}),
    (_bounds, {"minimum", "maximum", "exclusiveMinimum"}),
    (_string, {"minLength", "pattern"}),
    (_object, {"required", "properties", "additionalProperties", "propertyNames", "dependentRequired"}),
    (_array, {"items", "prefixItems", "minItems", "maxItems"}),
    (_any_of, {"anyOf"}),
    (_all_of, {"allOf"}),
    (_if_then, {"if", "then"}),
)
_KEYWORDS = set().union(*(keys for _, keys in _RULES))
