"""One way to tell a person what is wrong with a settings or data file that pydantic rejected."""

from __future__ import annotations

from pydantic import ValidationError

__all__ = ["describe_validation_error"]


def describe_validation_error(exc: ValidationError, *, what: str = "setting", example: str = "") -> str:
    """One line per problem, each naming the field and how to fix it.

    Args:
        exc: The pydantic error.
        what: What a field is called for this file ("setting", "field").
        example: Shown after a missing field's fix, e.g. "e.g. metric: accuracy".
    """
    lines = []
    for err in exc.errors():
        loc = ".".join(str(p) for p in err["loc"])
        if err["type"] == "missing":
            lines.append(f"  {loc}: required; add `{loc}: ...`" + (f" ({example})" if example else ""))
        elif err["type"] == "extra_forbidden":
            lines.append(f"  {loc}: unknown {what}; remove it or check its spelling")
        elif not loc:  # a check across fields (exploit_full below exploit_start): the message names them
            lines.append(f"  {err['msg'].removeprefix('Value error, ')}")
        else:
            hint = ""
            if err["type"] in ("list_type", "tuple_type"):
                hint = ' (in an environment variable, a JSON list: MCGS_NAME=\'["a", "b"]\' or \'[0.3, 0.7]\')'
            lines.append(f"  {loc}: {err['msg']}{hint}")
    return "\n".join(lines)
