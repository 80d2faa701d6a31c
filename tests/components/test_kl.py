"""Per-domain and re-weighted KL against reference computations written here (not TRL's loss code)."""

from __future__ import annotations

import pytest
import torch

from align_kit.components.kl import PerDomainKL, entropy_weights
from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan, validate_dataset
from align_kit.train import component_choices
from tests.conftest import generation_inputs

BETAS = {"addition": 0.0, "subtraction": 0.3}


def per_token_kl(ref_logps, logps):
    # The k3 estimator of KL(pi || pi_ref): exp(r - l) - (r - l) - 1.
    return torch.exp(ref_logps - logps) - (ref_logps - logps) - 1


def policy_logps_and_entropies(trainer, batch):
    ids = torch.cat([batch["prompt_ids"], batch["completion_ids"]], dim=1)
    mask = torch.cat([batch["prompt_mask"], batch["completion_mask"]], dim=1)
    with torch.no_grad():
        logps, entropies, _ = trainer._get_per_token_logps_and_entropies(
            trainer.model, ids, mask, batch["completion_ids"].size(1), compute_entropy=True
        )
    return logps, entropies


def loss_of(trainer, batch, **replaced) -> float:
    with torch.no_grad():
        return trainer._compute_loss(trainer.model, {**batch, **replaced}).item()


def sequence_means(values, mask):
    return (values * mask).sum(-1) / mask.sum(-1).clamp(min=1)


def test_per_domain_loss_equals_each_samples_beta_applied_by_hand(build_trainer):
    trainer = build_trainer(
        "kl=per_domain", "kl.betas.addition=0.0", "kl.betas.subtraction=0.3", "trainer.loss_type=grpo"
    )
    assert trainer.beta == 0.3 and trainer.ref_model is not None  # some beta > 0: reference loaded
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    domains = [trainer.domains[i] for i in batch["domain_index"].tolist()]
    assert set(domains) == {"addition", "subtraction"}

    # The policy moved off the reference so the KL term is not zero.
    with torch.no_grad():
        for parameter in trainer.model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    mask = batch["completion_mask"].float()
    kl = per_token_kl(batch["ref_per_token_logps"], policy_logps_and_entropies(trainer, batch)[0])
    betas = torch.tensor([BETAS[d] for d in domains])
    without_kl = loss_of(trainer, batch, kl_coefficient=torch.zeros_like(batch["kl_coefficient"]))
    # loss_type=grpo: mean over sequences of the per-sequence token mean, / accumulation steps (1 here).
    expected = without_kl + (betas * sequence_means(kl, mask)).mean().item()
    assert loss_of(trainer, batch) == pytest.approx(expected, rel=1e-5)
    assert (betas * sequence_means(kl, mask)).mean().item() > 1e-6

    trainer.flush_metrics()
    logged = trainer._metrics["train"]
    for domain in ("addition", "subtraction"):
        rows = torch.tensor([d == domain for d in domains])
        by_hand = ((kl[rows] * mask[rows]).sum() / mask[rows].sum()).item()
        assert logged[f"kl/{domain}"][-1] == pytest.approx(by_hand, rel=1e-5)


def test_all_zero_betas_load_no_reference_model(build_trainer):
    trainer = build_trainer("kl=per_domain", "kl.betas.subtraction=0.0")
    assert trainer.beta == 0.0 and trainer.ref_model is None


def test_unknown_domain_is_an_error_at_dataset_load(tmp_path):
    cfg = compose(["logger=none", "kl=per_domain", "~kl.betas.subtraction"])
    plan = build_plan(cfg, component_choices(), str(tmp_path))
    with pytest.raises(ConfigError) as caught:
        validate_dataset(plan, plan.task.dataset("train"))
    assert str(caught.value) == (
        "kl=per_domain has no beta for domain(s) ['subtraction'] found in the data; add "
        "kl.betas.subtraction=<beta> or set kl.default_beta"
    )
    node = PerDomainKL(betas={"addition": 0.1}, default_beta=0.05)
    node.check_dataset(plan.task.dataset("train"))
    assert node.beta_for("subtraction") == 0.05


def test_entropy_weights_by_hand():
    entropies = torch.tensor([[0.0, 1.0, 2.0, 5.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])  # the last token is padding
    mean = (0.0 + 1.0 + 2.0) / 3  # = 1.0
    expected = [2 * mean / (h + mean) for h in (0.0, 1.0, 2.0, 5.0)]  # [2.0, 1.0, 0.667, 0.333]
    assert entropy_weights(entropies, mask).tolist()[0] == pytest.approx(expected)


def test_reweighted_loss_equals_the_weighted_term_by_hand(build_trainer):
    trainer = build_trainer("kl=reweighted", "kl.beta=0.2", "trainer.loss_type=grpo")
    batch = trainer._generate_and_score_completions(generation_inputs(trainer, prompts=4))
    with torch.no_grad():
        for parameter in trainer.model.parameters():
            parameter.add_(0.01 * torch.randn_like(parameter))
    mask = batch["completion_mask"].float()
    logps, entropies = policy_logps_and_entropies(trainer, batch)
    # Bias-corrected: times pi/pi_old; on-policy generation, so pi_old is the policy at generation.
    old = batch.get("old_per_token_logps")
    ratio = torch.exp(logps - old) if old is not None else torch.ones_like(logps)
    weights = (
        2 * sequence_means(entropies, mask).unsqueeze(1) / (entropies + sequence_means(entropies, mask).unsqueeze(1))
    )
    kl_term = 0.2 * weights * per_token_kl(batch["ref_per_token_logps"], logps) * ratio
    trainer.plan.components["kl"].weighting = "none"
    unweighted = loss_of(trainer, batch)
    trainer.plan.components["kl"].weighting = "entropy"
    plain_term = 0.2 * per_token_kl(batch["ref_per_token_logps"], logps) * ratio
    expected = unweighted - sequence_means(plain_term, mask).mean().item() + sequence_means(kl_term, mask).mean().item()
    assert loss_of(trainer, batch) == pytest.approx(expected, rel=1e-5)
