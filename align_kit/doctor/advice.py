"""The advice the doctor gives: every fired rule's fixes (FIX ids, written for every framework in
align_kit.monitor.rules.fixes) merged, one line per fix naming every rule it answers, in the tuning order of the
policy-optimization chapter, 18.3.8 (data, clipping, KL and learning rate, sampling), each in the run's own
framework's terms."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from align_kit.monitor.rules import RunContext
from align_kit.monitor.rules.fixes import FRAMEWORKS, PRIORITY, PRIORITY_NAMES, resolve, text

__all__ = ["FRAMEWORKS", "PRIORITY", "Advice", "advise", "resolve", "text"]


@dataclass(frozen=True)
class Advice:
    fix: str
    priority: int  # 18.3.8: 1 data, 2 clipping, 3 KL and learning rate, 4 sampling
    text: str  # in the run's framework's terms
    rules: tuple[str, ...]  # the fired rules this line answers

    def line(self) -> str:
        return f"[{self.priority} {PRIORITY_NAMES[self.priority]}] {self.text}  (answers: {', '.join(self.rules)})"

    def to_dict(self) -> dict[str, Any]:
        return {"fix": self.fix, "priority": self.priority, "text": self.text, "rules": list(self.rules)}


def advise(fired: Iterable[tuple[str, tuple[str, ...]]], framework: str, setup: RunContext) -> list[Advice]:
    """`fired`: (rule, its fixes best first) for each alert that counts, in timeline order. One line per fix the
    run lacks, naming the rules it answers, in 18.3.8's order (then the order the rules asked for them)."""
    rules_of: dict[str, list[str]] = {}
    for rule, fixes in fired:
        for fix in fixes:
            wanted = resolve(fix, setup)
            if wanted is None:
                continue
            names = rules_of.setdefault(wanted, [])
            if rule not in names:
                names.append(rule)
    order = {fix: index for index, fix in enumerate(rules_of)}
    chosen = sorted(rules_of, key=lambda fix: (PRIORITY[fix], order[fix]))
    return [Advice(fix, PRIORITY[fix], text(fix, framework, setup), tuple(rules_of[fix])) for fix in chosen]
