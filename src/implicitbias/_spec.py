"""Typed, frozen, validated specifications.

Every object a user configures (a model, a loss, a method, a data set, an experiment) is a
`Spec`: a frozen pydantic model that rejects unknown fields and out-of-range values when it is
built, before anything is compiled. Errors are re-raised as `ConfigError`, whose message names
the field, the value that was given and what is allowed.
"""

from __future__ import annotations

import contextvars
import errno
from typing import Any

import pydantic
import pydantic_core
import yaml

from implicitbias.plugins import describe_tags

_depth = contextvars.ContextVar("spec_depth", default=0)


class ConfigError(ValueError):
    """A configuration value is not allowed. The message names field, value and what is allowed."""


class ResourceError(ConfigError):
    """The machine cannot do what was asked (a full disk, a cluster that gives no worker, a directory another
    process holds): reported like bad input, in one line that says what is missing, with exit code 2."""


#: the largest integer a spec field may hold: the int64 of the arrays it ends up in (seeds, steps, counts)
INT_MAX = 2**63 - 1


def _allowed(err: dict[str, Any]) -> str:
    ctx = err.get("ctx") or {}
    kind = err.get("type", "")
    bounds = {
        "greater_than": "> {gt}",
        "greater_than_equal": ">= {ge}",
        "less_than": "< {lt}",
        "less_than_equal": "<= {le}",
    }
    if kind in bounds:
        return "a value " + bounds[kind].format(**ctx)
    if kind == "literal_error":
        return "one of " + str(ctx.get("expected", ""))
    if kind == "extra_forbidden":
        return "no such field (check the spelling; `implicitbias describe NAME` lists the fields)"
    if kind in ("float_parsing", "float_type"):
        return "a number"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return "an integer"
    if kind in ("bool_parsing", "bool_type"):
        return "true or false"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return "a section of fields, set one at a time (e.g. model.width=50), not a single value"
    if kind in ("list_type", "tuple_type"):
        return "a list, e.g. [1, 2]"
    if kind == "refused":  # `refuse(expected)`: a check of one field, saying itself what is allowed
        return str(ctx.get("expected", ""))
    if kind == "finite_number":
        return "a finite number"
    if kind == "int_too_large":
        return f"an integer of at most {INT_MAX} in absolute value (int64)"
    if kind == "union_tag_invalid":  # the installed kinds, each with the package that provides it
        return "one of " + describe_tags(str(ctx.get("expected_tags", "")))
    return err.get("msg", "")


def refuse(expected: str) -> pydantic_core.PydanticCustomError:
    """The error a field validator raises: reported as 'FIELD = VALUE is not allowed: expected EXPECTED'."""
    return pydantic_core.PydanticCustomError("refused", "expected {expected}", {"expected": expected})


def _field_path(loc, data) -> str:
    """The dotted field path of an error, without the discriminator tags pydantic inserts in `loc`."""
    parts, node = [], data
    for p in loc:
        p = str(p)
        if p.startswith("function-"):
            continue
        if isinstance(node, dict) and p not in node and p in (str(node.get("kind")), str(node.get("name"))):
            continue
        parts.append(p)
        node = node.get(p) if isinstance(node, dict) else None
    return ".".join(parts)


def format_validation_error(exc: pydantic.ValidationError, prefix: str = "", data: Any = None) -> str:
    lines = []
    for err in exc.errors():
        loc = _field_path(err["loc"], data)
        if err.get("type") == "value_error" and (not loc or isinstance(err.get("input"), dict)):
            # a check across fields (a model validator): its message names the field and the value itself
            message = str(err.get("msg", "")).removeprefix("Value error, ")
            lines.append(f"{loc + ': ' if loc else ''}{message}")
            continue
        field = f"{prefix}.{loc}" if prefix and loc else (prefix or loc)
        value = err.get("input")
        if err.get("type") == "union_tag_invalid":  # name the discriminator field and the value given for it
            field = f"{field}.{str(err['ctx'].get('discriminator', '')).strip(chr(39))}"
            value = err["ctx"].get("tag")
        if isinstance(value, dict):
            value = "{...}"
        detail = "" if err.get("type") in ("refused", "union_tag_invalid") else f" ({err['msg']})"
        lines.append(f"{field} = {value!r} is not allowed: expected {_allowed(err)}{detail}")
    if len(lines) == 1:  # one error: one line
        return f"invalid configuration: {lines[0]}"
    return "invalid configuration:\n  " + "\n  ".join(lines)


class Spec(pydantic.BaseModel):
    """Base class: frozen, no unknown fields, validated on construction."""

    # every float field refuses inf and nan unless it says otherwise (`pydantic.Field(allow_inf_nan=True)`): a
    # value that passed here and failed in a worker would be retried and reported far from its cause
    model_config = pydantic.ConfigDict(frozen=True, extra="forbid", validate_default=True, allow_inf_nan=False)

    @pydantic.field_validator("*", mode="after")
    @classmethod
    def _int64_range(cls, value: Any) -> Any:
        """Every integer, also inside tuples and lists, fits the int64 arrays it is stored and computed in."""
        for v in value if isinstance(value, list | tuple) else (value,):
            if isinstance(v, int) and not isinstance(v, bool) and abs(v) > INT_MAX:
                raise pydantic_core.PydanticCustomError("int_too_large", "integer out of the int64 range")
        return value

    def __init__(self, **data: Any) -> None:
        outer = _depth.get()
        token = _depth.set(outer + 1)
        try:
            super().__init__(**data)
        except pydantic.ValidationError as exc:
            if outer > 0:  # nested inside another Spec: let the outer one report the full path
                raise
            raise ConfigError(format_validation_error(exc, type(self).__name__, data)) from None
        finally:
            _depth.reset(token)

    def replace(self, **changes: Any) -> Spec:
        """A copy with some fields changed, without validation (used inside traced code,
        where a field may hold a JAX tracer for a batched hyper-parameter)."""
        return self.model_copy(update=changes)

    def validated_replace(self, **changes: Any) -> Spec:
        """A copy with some fields changed, validated like a fresh construction."""
        return type(self)(**{**self.model_dump(), **changes})


def parse_overrides(items: list[str]) -> dict:
    """`--set field=value` items as {field: YAML value}, e.g. model.width=50 or grid.init_scale=[0.1, 1]."""
    overrides = {}
    for item in items:
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--set {item!r} is not allowed: expected field=value with a field name, e.g. --set "
                              "model.width=50 (a grid axis: --set grid.init_scale=[0.1,1])")
        try:
            overrides[key.strip()] = yaml.safe_load(raw) if raw.strip() else raw
        except yaml.YAMLError as exc:
            detail = " ".join(str(exc).split())[:160]
            raise ConfigError(f"--set {item!r} is not allowed: the value {raw!r} is not valid YAML ({detail}); "
                              "expected a number, a word or a list such as [1, 2]") from None
    return overrides


#: errors of the file system that are the machine's, not the program's: reported in one line, exit 2
SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EACCES, errno.EPERM, errno.ENOTDIR,
                errno.EISDIR, errno.ENOENT, errno.ENAMETOOLONG, errno.ELOOP)


def machine_error(exc: OSError) -> str:
    """One line for a file-system error of the machine (a full disk, a read-only or missing path)."""
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
    return (f"{exc.filename or ''}: {exc.strerror}: {'the disk is full: free some space' if full else 'check the path'}"
            " and rerun the same command (finished runs are kept)")
