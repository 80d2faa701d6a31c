"""KL regularisation toward the reference model. `beta=0` means TRL loads no reference model.

none     : beta = 0 (DAPO and Dr.GRPO drop the KL term; seed 002, 18.3.5)
constant : beta > 0 with TRL's k3 estimator; `bias_corrected` multiplies it by the importance ratio
           (the unbiased off-policy estimator, TRL `use_bias_correction_kl`)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from align_kit.components.base import Component
from align_kit.errors import ConfigError


@dataclass
class ConstantKL(Component):
    beta: float = 0.0
    bias_corrected: bool = False

    def validate(self) -> None:
        if self.beta < 0:
            raise ConfigError(f"kl.beta={self.beta} is negative; use kl.beta >= 0 (or kl=none for no KL term)")
        if self.bias_corrected and self.beta == 0:
            raise ConfigError("kl.bias_corrected=true has no effect with kl.beta=0; set kl.beta > 0")

    def grpo_fields(self) -> dict[str, Any]:
        return {"beta": self.beta, "use_bias_correction_kl": self.bias_corrected}
