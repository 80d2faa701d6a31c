"""The completion length budget a notebook's code cells set, read from their Python source.

A notebook's printed outputs often never state the budget; its code does: `GRPOConfig(max_completion_length = 200)`,
or a variable assigned and passed in (`max_completion_length = max_seq_length - max_prompt_length` with both set to
numbers; Unsloth's notebooks). The cells are parsed with `ast` (comments drop out, so a commented-out setting states
nothing) and their top-level assignments followed in order, as Python would run them: a name bound to a whole number,
or to a sum or difference of such, has that value; a name bound to anything else (`maximum_length + 1` computed from
the data, `args.max_seq_length`) is unknown from then on. The budget is the value of the first call keyword or dict
key `max_completion_length` whose expression is known when it is reached; a cell Python cannot parse (a shell line
inside a block) is skipped whole, so it states nothing."""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping

BUDGET = "max_completion_length"
_MAGIC = ("!", "%")  # IPython's shell and magic lines: not Python


def code_budget(cells: Iterable[str]) -> tuple[int, str] | None:
    """(budget, the statement that set it) from the code cells' sources in order; None when no known value is set."""
    names: dict[str, int] = {}
    for source in cells:
        tree = _parsed(source)
        if tree is None:
            continue
        for statement in tree.body:
            found = _stated(statement, names)
            if found is not None:
                return found
            _bind(statement, names)
    return None


def _parsed(source: str) -> ast.Module | None:
    lines = ["" if line.lstrip().startswith(_MAGIC) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except (SyntaxError, ValueError):
        return None


def _stated(statement: ast.stmt, names: Mapping[str, int]) -> tuple[int, str] | None:
    """The first `max_completion_length=` keyword or `'max_completion_length':` key in the statement with a known
    positive value."""
    for node in ast.walk(statement):
        expressions = []
        if isinstance(node, ast.Call):
            expressions = [keyword.value for keyword in node.keywords if keyword.arg == BUDGET]
        elif isinstance(node, ast.Dict):
            expressions = [
                value
                for key, value in zip(node.keys, node.values, strict=True)
                if isinstance(key, ast.Constant) and key.value == BUDGET
            ]
        for expression in expressions:
            value = _value(expression, names)
            if value is not None and value > 0:
                return value, _said(expression, value, names)
    return None


def _said(expression: ast.expr, value: int, names: Mapping[str, int]) -> str:
    text = ast.unparse(expression)
    if isinstance(expression, ast.Constant):
        return f"{BUDGET}={text} in a code cell"
    used = sorted({node.id for node in ast.walk(expression) if isinstance(node, ast.Name)})
    bound = ", ".join(f"{name} = {names[name]}" for name in used)
    return f"{BUDGET}={text} in a code cell, = {value} ({bound})"


def _bind(statement: ast.stmt, names: dict[str, int]) -> None:
    """Follow a top-level assignment: a name bound to a known whole number keeps it, any other binding forgets it."""
    if isinstance(statement, ast.Assign):
        targets, value = statement.targets, statement.value
    elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
        targets, value = [statement.target], statement.value
    elif isinstance(statement, ast.AugAssign):
        targets, value = [statement.target], ast.BinOp(statement.target, statement.op, statement.value)
    else:
        for node in ast.walk(statement):  # a name bound inside a block or a loop: its value is not followed
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.pop(node.id, None)
        return
    known = _value(value, names)
    for target in targets:
        for node in ast.walk(target):
            if isinstance(node, ast.Name):
                if known is not None and isinstance(target, ast.Name):
                    names[node.id] = known
                else:
                    names.pop(node.id, None)


def _value(expression: ast.expr, names: Mapping[str, int]) -> int | None:
    """A whole number, a known name, or a sum, difference or product of such; None otherwise."""
    if isinstance(expression, ast.Constant):
        value = expression.value
        return value if isinstance(value, int) and not isinstance(value, bool) else None
    if isinstance(expression, ast.Name):
        return names.get(expression.id)
    if isinstance(expression, ast.BinOp) and isinstance(expression.op, ast.Add | ast.Sub | ast.Mult):
        left, right = _value(expression.left, names), _value(expression.right, names)
        if left is None or right is None:
            return None
        if isinstance(expression.op, ast.Add):
            return left + right
        return left - right if isinstance(expression.op, ast.Sub) else left * right
    return None
