"""A task with two ways to answer: reason in steps (long, reliable) or state the sum at once (short, a guess).

"12+34+56=" is answered either carefully, "<think>12+30=42,42+4=46,46+50=96,96+6=102</think>102" (one step
per tens and units part, as in the arithmetic task), or directly, "<think></think>102". Both open and close
the think block, so the format reward cannot tell them apart; the styles part at the token after `<think>`.

The warm start mixes the styles (`careful_share` of the demonstrations reason in steps) and its direct
answers are right only `guess_accuracy` of the time (otherwise off by 1-9), so a policy that answers directly
is guessing by construction. This is the regime the Clip-Higher and Overlong comparisons need (issue 12):

- a rare careful style (`careful_share` of a few percent) is a better strategy whose first token starts at
  low probability, which the upper clip bound holds back (DAPO §3.1);
- with more terms per problem (`terms`) a careful answer grows by two steps per term, so a completion
  budget cuts long careful answers that would have been right, the reward noise that overlong filtering
  removes (DAPO §3.4).

The domain column names the number of terms ("terms_2", "terms_3", ...), so per-domain metrics split by the
answer's length. `rewards/careful_style/mean` (reward=[correctness,format,careful_style], weight 0) logs the
share of completions that reason in steps.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from align_kit.core.contracts import TaskNode
from align_kit.core.errors import ConfigError
from align_kit.core.fields import SEED, knob
from align_kit.rewards.format import THINK_CLOSE, THINK_OPEN
from align_kit.tasks.generated import GeneratedTask


@dataclass(frozen=True)
class SumProblem:
    terms: tuple[int, ...]

    @property
    def prompt(self) -> str:
        return "+".join(map(str, self.terms)) + "="

    @property
    def answer(self) -> str:
        return str(sum(self.terms))

    @property
    def domain(self) -> str:
        return f"terms_{len(self.terms)}"

    @property
    def steps(self) -> str:
        """Add each later term's tens, then its units, to the running sum."""
        running, steps = self.terms[0], []
        for term in self.terms[1:]:
            tens, units = term - term % 10, term % 10
            steps.append(f"{running}+{tens}={running + tens}")
            running += tens
            steps.append(f"{running}+{units}={running + units}")
            running += units
        return ",".join(steps)

    def careful(self) -> str:
        return f"{THINK_OPEN}{self.steps}{THINK_CLOSE}{self.answer}"

    def direct(self, stated: int | None = None) -> str:
        return f"{THINK_OPEN}{THINK_CLOSE}{self.answer if stated is None else stated}"


@dataclass
class TwoStyleTask(GeneratedTask, TaskNode):
    min_operand: int = knob(
        10,
        help="The smallest number in a sum (>= 1); 10 with max_operand 99 gives two-digit sums such as 12+34=.",
    )
    max_operand: int = knob(99, help="The largest number in a sum (>= min_operand); 99 keeps numbers two-digit.")
    terms: list[int] = knob(
        default_factory=lambda: [2],
        help="Numbers per problem (each >= 2), drawn uniformly from this list; each term adds two steps to a careful "
        "answer, so more terms ([2, 3] in the Overlong sweep) make a completion budget cut careful answers.",
        source="DAPO §3.4, arXiv 2503.14476",
    )
    careful_share: float = knob(
        0.5,
        help="The share of warm-start demonstrations that reason in steps, in [0, 1]; a few percent (0.08 in the "
        "Clip-Higher sweep) makes the careful style the rare, better choice that the upper clip bound holds back.",
        source="DAPO §3.1, arXiv 2503.14476",
    )
    guess_accuracy: float = knob(
        0.25,
        help="The share of direct warm-start demonstrations whose sum is right, in [0, 1] (the rest are off by 1-9); "
        "well below 1, so answering directly is guessing by construction.",
    )
    seed: int = knob(
        1234,
        within=SEED,
        help="Seeds the problem streams (one per split) and the warm start's choice of styles; the same seed gives "
        "the same data in every run.",
    )

    def validate(self) -> None:
        if not self.terms or any(not isinstance(k, int) or k < 2 for k in self.terms):
            raise ConfigError(f"task.terms={self.terms} must be a non-empty list of integers >= 2 (numbers per sum)")
        if not 1 <= self.min_operand <= self.max_operand:
            raise ConfigError(
                f"task.min_operand={self.min_operand} and task.max_operand={self.max_operand} "
                "must satisfy 1 <= min <= max"
            )
        for key in ("careful_share", "guess_accuracy"):
            value = getattr(self, key)
            if not 0.0 <= value <= 1.0:
                raise ConfigError(f"task.{key}={value} must lie in [0, 1]")
        if self.num_train < 1:
            raise ConfigError(f"task.num_train={self.num_train} must be >= 1")

    def draw(self, rng: random.Random, index: int) -> SumProblem:
        count = rng.choice(self.terms)
        return SumProblem(tuple(rng.randint(self.min_operand, self.max_operand) for _ in range(count)))

    def demonstrations(self) -> list[tuple[str, str]]:
        """(prompt, completion) pairs for the warm-start SFT: careful with probability careful_share, else direct
        and right with probability guess_accuracy (otherwise off by 1-9 either way)."""
        rng = random.Random(f"{self.seed}/styles")
        pairs = []
        for problem in self.problems("sft"):
            if rng.random() < self.careful_share:
                pairs.append((problem.prompt, problem.careful()))
                continue
            stated = int(problem.answer)
            if rng.random() >= self.guess_accuracy:
                stated += rng.choice([-1, 1]) * rng.randint(1, 9)
            pairs.append((problem.prompt, problem.direct(stated)))
        return pairs

    def trainer_hooks(self) -> list:
        from align_kit.tasks.style_decision import StyleDecision

        return [StyleDecision()]  # logs style/careful_decision_*: clip engagement at the style decision

    def cache_key(self) -> dict:
        return {
            "kind": "two_style",
            "min": self.min_operand,
            "max": self.max_operand,
            "terms": list(self.terms),
            "careful_share": self.careful_share,
            "guess_accuracy": self.guess_accuracy,
            "seed": self.seed,
        }
