"""KL regularisation toward the reference model (seed 002, 18.3.5). `beta=0` everywhere means TRL
loads no reference model.

none        : beta = 0 (DAPO and Dr.GRPO drop the KL term for rule-verified math and code)
constant    : one beta with TRL's k3 estimator; `bias_corrected` multiplies it by the importance
              ratio pi_theta / pi_old (the unbiased off-policy estimator, TRL use_bias_correction_kl)
per_domain  : each sample's KL term uses the beta of its `domain` (DeepSeek-V3.2: math/code 0,
              other domains > 0)
reweighted  : a different KL strength per token (seed 002's "re-weighted KL"): the bias-corrected
              estimator times a per-token weight (see `entropy_weights`)

TRL adds `self.beta * per_token_kl` to the per-token loss. For per_domain and reweighted, the
trainer sets `beta` to a `KLCoefficient` for each loss call, so the product uses a per-sample
(or per-token) coefficient while TRL's loss aggregation stays untouched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from align_kit.components.base import Component
from align_kit.errors import ConfigError


def _check_beta(key: str, beta: float) -> None:
    if beta < 0:
        raise ConfigError(f"{key}={beta} is negative; use {key} >= 0 (or kl=none for no KL term)")


@dataclass
class ConstantKL(Component):
    beta: float = 0.0
    bias_corrected: bool = False

    def validate(self) -> None:
        _check_beta("kl.beta", self.beta)
        if self.bias_corrected and self.beta == 0:
            raise ConfigError("kl.bias_corrected=true has no effect with kl.beta=0; set kl.beta > 0")

    def grpo_fields(self) -> dict[str, Any]:
        return {"beta": self.beta, "use_bias_correction_kl": self.bias_corrected}


class KLCoefficient:
    """Stands in for TRL's scalar `beta` inside one loss call: `coefficient * per_token_kl`
    multiplies by `values()` ([B, 1] per sample or [B, T] per token), evaluated at that moment so
    it can use the entropies of the same forward pass; `!= 0` stays true so TRL keeps the KL
    branch on."""

    def __init__(self, values):
        self.values = values

    def __mul__(self, per_token_kl):
        return self.values() * per_token_kl

    __rmul__ = __mul__

    def __eq__(self, other) -> bool:
        return False if other == 0 else NotImplemented

    def __ne__(self, other) -> bool:
        return True if other == 0 else NotImplemented

    __hash__ = None


@dataclass
class PerDomainKL(Component):
    betas: dict[str, float] = field(default_factory=dict)
    default_beta: float | None = None
    bias_corrected: bool = False

    def validate(self) -> None:
        for domain, beta in self.betas.items():
            _check_beta(f"kl.betas.{domain}", beta)
        if self.default_beta is not None:
            _check_beta("kl.default_beta", self.default_beta)

    @property
    def max_beta(self) -> float:
        return max([*self.betas.values(), self.default_beta or 0.0])

    def grpo_fields(self) -> dict[str, Any]:
        # TRL loads the reference model iff beta != 0: only when some domain needs it.
        return {"beta": self.max_beta, "use_bias_correction_kl": self.bias_corrected}

    def check_dataset(self, dataset) -> None:
        """Every domain in the data needs a beta."""
        domains = set(dataset["domain"]) if "domain" in dataset.column_names else {None}
        unknown = sorted(str(d) for d in domains - set(self.betas))
        if unknown and self.default_beta is None:
            raise ConfigError(
                f"kl=per_domain has no beta for domain(s) {unknown} found in the data; add "
                + ", ".join(f"kl.betas.{d}=<beta>" for d in unknown)
                + " or set kl.default_beta"
            )

    def beta_for(self, domain: str) -> float:
        return self.betas.get(domain, self.default_beta)

    @property
    def active(self) -> bool:
        return self.max_beta > 0


def entropy_weights(entropies, mask):
    """Per-token KL weight w_t = 2 * H_bar / (H_t + H_bar), H_bar the masked mean entropy of the
    token's sequence (entropies detached).

    w = 1 at average entropy, 2 at a fully confident token, -> 0 at very uncertain ones. The KL
    pull is strongest where the policy is sure (formatting, facts the reference model already
    gets right) and weakest at high-entropy "forking" tokens, where reasoning RL does its
    exploring (high-entropy minority tokens, arXiv 2506.01939)."""
    import torch

    entropies = entropies.detach()
    mean = (entropies * mask).sum(-1, keepdim=True) / mask.sum(-1, keepdim=True).clamp(min=1.0)
    return torch.where(mean > 0, 2 * mean / (entropies + mean).clamp(min=1e-12), torch.ones_like(entropies))


@dataclass
class ReweightedKL(Component):
    beta: float = 0.04
    bias_corrected: bool = True
    weighting: str = "entropy"  # "none": only the importance-ratio correction

    def validate(self) -> None:
        _check_beta("kl.beta", self.beta)
        if self.beta == 0:
            raise ConfigError("kl=reweighted needs kl.beta > 0 (use kl=none for no KL term)")
        if self.weighting not in ("entropy", "none"):
            raise ConfigError(f"kl.weighting={self.weighting!r} must be 'entropy' or 'none'")

    def grpo_fields(self) -> dict[str, Any]:
        return {"beta": self.beta, "use_bias_correction_kl": self.bias_corrected}

    @property
    def active(self) -> bool:
        return self.weighting != "none"
