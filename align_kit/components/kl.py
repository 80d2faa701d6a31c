"""KL regularisation toward the reference model (the policy-optimization chapter, 18.3.5). `beta=0` everywhere means TRL
loads no reference model.

none        : beta = 0 (DAPO and Dr.GRPO drop the KL term for rule-verified math and code)
constant    : one beta with TRL's k3 estimator; `bias_corrected` multiplies it by the importance
              ratio pi_theta / pi_old (the unbiased off-policy estimator, TRL use_bias_correction_kl)
per_domain  : each sample's KL term uses the beta of its `domain` (DeepSeek-V3.2: math/code 0,
              other domains > 0)
reweighted  : a different KL strength per token (the policy-optimization chapter's "re-weighted KL"): the bias-corrected
              estimator times a per-token weight (see `entropy_weights`)

TRL adds `self.beta * per_token_kl` to the per-token loss. For per_domain and reweighted, a hook
gives the trainer a coefficient for each loss call (`LossTerms.kl_coefficient`), which stands in
for `beta` (the trainer's `KLCoefficient`), so the product uses a per-sample (or per-token) coefficient while
TRL's loss aggregation stays untouched.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from align_kit.core.component import Component
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.core.hooks import LossTerms, TrainerHook


def k3(log_ratio):
    """The k3 estimator exp(d) - d - 1 of KL(p || q) per token, d = log q - log p for tokens drawn
    from p (Schulman's "Approximating KL divergence"; TRL's per-token KL with p the policy and q the
    reference). Unbiased and never negative."""
    import torch

    return torch.exp(log_ratio) - log_ratio - 1


def _check_beta(key: str, beta: float) -> None:
    if beta < 0:
        raise ConfigError(f"{key}={beta} is negative; use {key} >= 0 (or kl=none for no KL term)")


@dataclass
class ConstantKL(Component):
    beta: float = knob(
        0.0,
        ge=0,
        text="a number >= 0 (kl=none for no KL term)",
        help="KL coefficient toward the reference model (TRL's beta, k3 estimator); 0 (kl=none, as DAPO and Dr.GRPO "
        "for rule-verified math and code) loads no reference model, kl=constant uses 0.04.",
        source="DeepSeekMath, arXiv 2402.03300; 18.3.5",
    )
    bias_corrected: bool = knob(
        False,
        help="Multiply the k3 estimate by the importance ratio pi_theta / pi_old, the unbiased off-policy estimator "
        "(TRL's use_bias_correction_kl); needs beta > 0.",
        source="DeepSeek-V3.2; 18.3.5",
    )

    def validate(self) -> None:
        if self.bias_corrected and self.beta == 0:
            raise ConfigError("kl.bias_corrected=true has no effect with kl.beta=0; set kl.beta > 0")

    def grpo_fields(self) -> dict[str, Any]:
        return {"beta": self.beta, "use_bias_correction_kl": self.bias_corrected}


@dataclass
class PerDomainKL(Component):
    betas: dict[str, float] = knob(
        default_factory=dict,
        help="The KL coefficient of each data domain (the task's `domain` column); 0 for rule-verified domains such "
        "as math and code, > 0 where the reward is less reliable.",
        source="DeepSeek-V3.2; 18.3.5",
    )
    default_beta: float | None = knob(
        None,
        help="The coefficient of a domain not in betas; null makes such a domain an error when the data loads.",
        source="18.3.5",
    )
    bias_corrected: bool = knob(
        False,
        help="Multiply the k3 estimate by the importance ratio pi_theta / pi_old (TRL's use_bias_correction_kl).",
        source="DeepSeek-V3.2; 18.3.5",
    )

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

    def trainer_hooks(self) -> list:
        return [PerDomainBeta(self)] if self.active else []


class PerDomainBeta(TrainerHook):
    """Each sample carries its domain's beta (`kl_coefficient` [B, 1]) through TRL's shuffling and
    splitting; the loss uses it in place of the scalar beta."""

    def __init__(self, node: PerDomainKL):
        self.node = node

    def on_scored_batch(self, trainer, state, batch):
        import torch

        betas = [self.node.beta_for(row["domain"]) for row in state.inputs]
        batch["kl_coefficient"] = torch.tensor(betas, dtype=torch.float32).unsqueeze(1)
        return None

    def loss_terms(self, trainer, loss):
        inputs = loss.inputs
        return LossTerms(kl_coefficient=lambda: inputs["kl_coefficient"]) if "kl_coefficient" in inputs else None


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
    beta: float = knob(
        0.04,
        ge=0,
        text="a number >= 0 (kl=none for no KL term)",
        help="The KL coefficient before the per-token weight; must be > 0 (kl=none for no KL term).",
        source="18.3.5",
    )
    bias_corrected: bool = knob(
        True,
        help="Multiply the k3 estimate by pi_theta / pi_old, unbiased under off-policy samples (TRL's "
        "use_bias_correction_kl); true as the chapter's re-weighted KL.",
        source="DeepSeek-V3.2; 18.3.5",
    )
    weighting: Literal["entropy", "none"] = knob(
        "entropy",
        help="entropy: per-token weight 2 H_bar / (H_t + H_bar), strongest on confident tokens and weakest at "
        "high-entropy forks; none: only the importance-ratio correction.",
        source="18.3.5; high-entropy minority tokens, arXiv 2506.01939",
    )

    def validate(self) -> None:
        if self.beta == 0:
            raise ConfigError("kl=reweighted needs kl.beta > 0 (use kl=none for no KL term)")

    def grpo_fields(self) -> dict[str, Any]:
        return {"beta": self.beta, "use_bias_correction_kl": self.bias_corrected}

    @property
    def active(self) -> bool:
        return self.weighting != "none"

    def trainer_hooks(self) -> list:
        return [EntropyWeightedBeta(self)]


class EntropyWeightedBeta(TrainerHook):
    """beta * entropy_weights per token, from the entropies of the loss's own forward."""

    def __init__(self, node: ReweightedKL):
        self.node = node

    def loss_terms(self, trainer, loss):
        if not self.node.active:  # read per call: weighting=none leaves TRL's scalar beta
            return None
        mask = loss.inputs["completion_mask"]
        return LossTerms(kl_coefficient=lambda: self.node.beta * entropy_weights(loss.forward[1], mask))
