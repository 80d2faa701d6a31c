"""Which logged reward component plays which role: `accuracy` (is the answer right) and `format` (is it laid out as
asked), told from the component's name as real runs write it (TRL logs `rewards/<function name>/mean`:
correctness_reward_func, check_answer, accuracy_reward, xmlcount_reward_func, match_format_exactly,
strict_format_reward_func, ...). The reward-hacking rule reads the two roles: format rising while accuracy falls.

The name is split into words (snake_case, camelCase, digits); a word containing a format stem makes it format-like,
one containing an accuracy stem accuracy-like (the short stems `acc` and `int` only as whole words, so that `point`
or `account` say nothing). A name with stems of both roles, or of neither, has no role and is listed as unmapped.
A user's `--map accuracy=COL --map format=COL` wins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

ROLES = ("accuracy", "format")
# In preference order: when several components have one role, the one whose best stem comes first is read.
FORMAT_STEMS = ("format", "xml", "tag", "strict", "soft", "structure", "think", "count")
ACCURACY_STEMS = ("correct", "accura", "answer", "math", "solution", "check", "score")
ACCURACY_WORDS = ("acc", "int", "exact")
_WORD = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")


def words(name: str) -> list[str]:
    """`strictFormatReward2` -> ['strict', 'format', 'reward', '2']; `xmlcount_reward_func` -> ['xmlcount', ...]."""
    return [word.lower() for word in _WORD.findall(name)]


def _rank(parts: list[str], stems: tuple[str, ...], whole: tuple[str, ...] = ()) -> int | None:
    """The index of the first stem found in a word (whole-word stems after the others), None when none is."""
    for index, stem in enumerate(stems):
        if any(stem in part for part in parts):
            return index
    for index, word in enumerate(whole):
        if word in parts:
            return len(stems) + index
    return None


def role_of(name: str) -> tuple[str | None, int]:
    """(role, rank) of a reward component's name; (None, 0) when it is neither or both."""
    parts = words(name)
    fmt = _rank(parts, FORMAT_STEMS)
    acc = _rank(parts, ACCURACY_STEMS, ACCURACY_WORDS)
    if fmt is not None and acc is None:
        return "format", fmt
    if acc is not None and fmt is None:
        return "accuracy", acc
    return None, 0


def assign(
    components: Iterable[tuple[str, str]], taken: Iterable[str] = (), flat: Iterable[str] = ()
) -> tuple[dict[str, str], list[str]]:
    """({source key: role}, notes) for (source key, component name) pairs in the order first logged. `taken` are the
    roles a user's map already gives a column: those are not guessed. `flat` are keys whose logged value never
    changes (a strict format check that no completion passes yet): a component that moves is read before them,
    since the rules read a role's movement."""
    taken, flat = set(taken), set(flat)
    by_role: dict[str, list[tuple[int, int, str]]] = {}
    unmapped: list[str] = []
    for order, (key, name) in enumerate(components):
        role, rank = role_of(name)
        if role is None:
            unmapped.append(key)
        elif role not in taken:
            by_role.setdefault(role, []).append((key in flat, rank, order, key))
    chosen: dict[str, str] = {}
    notes: list[str] = []
    for role in ROLES:
        found = sorted(by_role.get(role, []))
        if not found:
            continue
        key = found[0][-1]
        chosen[key] = role
        others = [item[-1] for item in found[1:]]
        also = f"; also {role}-like, left as they are: {', '.join(others)}" if others else ""
        notes.append(f"{role} read from {key} (by its name{also}); override with --map {role}=COLUMN")
    if unmapped:
        notes.append(
            f"reward components with no accuracy or format role by name: {', '.join(unmapped)} "
            "(--map accuracy=COLUMN / --map format=COLUMN to give one)"
        )
    return chosen, notes


def user_roles(key_map: Mapping[str, str] | None) -> list[str]:
    return [role for role in ROLES if role in (key_map or {})]
