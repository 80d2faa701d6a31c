"""The embedded synthetic task: two-operand arithmetic with a short, checkable reasoning trace.

"37+45=" is answered "<think>37+40=77,77+5=82</think>82": add (or subtract) the tens of the second
operand, then its units. Two domains (addition, subtraction) so per-domain metrics and KL have
something to split on. Problems are drawn from a seeded generator, so every run sees the same data.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from align_kit.core.contracts import TaskNode
from align_kit.core.errors import ConfigError
from align_kit.core.fields import SEED, knob
from align_kit.tasks.generated import GeneratedTask

DOMAIN_OPS = {"addition": "+", "subtraction": "-"}


@dataclass(frozen=True)
class Problem:
    prompt: str
    answer: str
    domain: str
    reasoning: str

    @property
    def demonstration(self) -> str:
        return f"<think>{self.reasoning}</think>{self.answer}"


def make_problem(a: int, b: int, domain: str) -> Problem:
    op = DOMAIN_OPS[domain]
    if domain == "subtraction" and b > a:
        a, b = b, a
    sign = 1 if op == "+" else -1
    tens, units = b - b % 10, b % 10
    middle = a + sign * tens
    answer = middle + sign * units
    reasoning = f"{a}{op}{tens}={middle},{middle}{op}{units}={answer}"
    return Problem(prompt=f"{a}{op}{b}=", answer=str(answer), domain=domain, reasoning=reasoning)


@dataclass
class ArithmeticTask(GeneratedTask, TaskNode):
    min_operand: int = knob(
        10,
        ge=0,
        help="The smallest operand drawn (>= 0); 10 with max_operand 99 gives two-digit problems such as 37+45=.",
    )
    max_operand: int = knob(99, help="The largest operand drawn (>= min_operand); 99 keeps operands two-digit.")
    domains: list[str] = knob(
        default_factory=lambda: ["addition", "subtraction"],
        help="The operations problems cycle through, a non-empty subset of addition and subtraction; both, so "
        "per-domain metrics and KL have two domains to split.",
    )
    seed: int = knob(
        1234,
        within=SEED,
        help="Seeds the problem streams (one per split, so train and eval never share a generator state); the "
        "same seed gives the same data in every run.",
    )

    def validate(self) -> None:
        unknown = sorted(set(self.domains) - set(DOMAIN_OPS))
        if unknown or not self.domains:
            raise ConfigError(f"task.domains={self.domains} must be a non-empty subset of {sorted(DOMAIN_OPS)}")
        if not 0 <= self.min_operand <= self.max_operand:
            raise ConfigError(
                f"task.min_operand={self.min_operand} and task.max_operand={self.max_operand} "
                "must satisfy 0 <= min <= max"
            )

    def draw(self, rng: random.Random, index: int) -> Problem:
        operands = rng.randint(self.min_operand, self.max_operand), rng.randint(self.min_operand, self.max_operand)
        return make_problem(*operands, self.domains[index % len(self.domains)])

    def demonstrations(self) -> list[tuple[str, str]]:
        """(prompt, completion) pairs for the warm-start SFT."""
        return [(p.prompt, p.demonstration) for p in self.problems("sft")]

    def cache_key(self) -> dict:
        return {
            "kind": "arithmetic",
            "min": self.min_operand,
            "max": self.max_operand,
            "domains": self.domains,
        }
