"""The hook protocol: the docs' example component (docs/write-a-component.md) runs, hook metrics are recorded,
hook state travels through checkpoints, a token mask reaches the loss mask only, and the masked and per-domain means
carry their counts."""

from __future__ import annotations

import math
import re
import sys
import types

import pytest
import torch

from align_kit.core.hooks import BatchState, masked_mean, on_host, per_domain, read_deferred
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.tracking.metrics_file import read_metrics
from align_kit.train import component_choices
from tests.conftest import ROOT, generation_inputs

EXAMPLE_PAGE = ROOT / "docs" / "write-a-component.md"


def docs_example(monkeypatch) -> dict:
    code = re.search(r"```python\n(.*?)```", EXAMPLE_PAGE.read_text(), re.DOTALL).group(1)
    module = types.ModuleType("docs_example")
    monkeypatch.setitem(sys.modules, module.__name__, module)  # dataclasses look their module up
    exec(compile(code, str(EXAMPLE_PAGE), "exec"), module.__dict__)  # noqa: S102 - our own docs
    return module.__dict__


def test_docs_component_logs_its_metric(overrides_for, tmp_path, monkeypatch):
    from align_kit.experiment.build_trainer import build_trainer

    example = docs_example(monkeypatch)
    cfg = compose(overrides_for("logger=none"))
    plan = build_plan(cfg, component_choices(), str(tmp_path / "run"))
    plan.components["length_watch"] = example["LengthWatch"](limit=0)
    policy = plan.model.load(plan.task, cfg.paths.cache_dir)
    trainer = build_trainer(plan, policy.model, policy.tokenizer)
    trainer.model.train()
    hook = trainer.hook(example["LongCompletions"])
    # Every completion holds at least one token (> 0), none more than the budget.
    trainer._generate_and_score_completions(generation_inputs(trainer, prompts=2))
    hook.limit = plan.effective("max_completion_length")
    trainer._generate_and_score_completions(generation_inputs(trainer, prompts=2, start=2))
    trainer.flush_metrics()  # what the trainer does when it logs
    assert trainer._metrics["train"]["completions/long_fraction"] == [1.0, 0.0]

    trainer._record({"hook/value": 0.25, "hook/absent": math.nan}, "train")
    trainer.flush_metrics()
    assert trainer._metrics["train"]["hook/value"] == [0.25]
    assert "hook/absent" not in trainer._metrics["train"]  # NaN means "no value here"


@pytest.mark.slow
def test_hook_state_is_saved_and_resumed(train_once, tmp_path):
    # threshold 0 and window 1: the adaptive schedule lowers the weight after its first batch.
    run = [
        "logger=none", "format_schedule=adaptive", "format_schedule.threshold=0.0", "format_schedule.window=1",
        "trainer.save_strategy=steps", "trainer.save_steps=2", "trainer.disable_tqdm=true",
    ]  # fmt: skip
    train_once(tmp_path, *run, "trainer.max_steps=2", fast_training=False)
    state = (tmp_path / "checkpoint-2" / "align_kit_hooks.json").read_text()
    assert state == '{"format_schedule": {"above": 1, "lowered": true}}'
    train_once(tmp_path, *run, "trainer.max_steps=4", "train.resume=true", fast_training=False)
    rows = [row for row in read_metrics(tmp_path / "metrics.jsonl") if "loss" in row]
    weights = {row["step"]: row["schedule/format_weight"] for row in rows}
    # Steps 1-2 trained on the first batch (weight 1.0); a resumed schedule that forgot its state
    # would use 1.0 again for the batch generated at step 2, the restored one uses the floor.
    assert weights == pytest.approx({1: 1.0, 2: 1.0, 3: 0.2, 4: 0.2})


def test_a_token_mask_reaches_the_loss_mask_and_never_the_attention_mask():
    import torch

    from align_kit.core.hooks import LossTerms, apply_loss_terms

    completion = torch.tensor([[1, 1, 1], [1, 1, 0]])
    masked, _ = apply_loss_terms({"completion_mask": completion}, [LossTerms(token_mask=torch.tensor([[1, 0, 1]] * 2))])
    assert torch.equal(masked["completion_mask"], completion)  # what TRL attends over stays as it was
    assert masked["tool_mask"].tolist() == [[1, 0, 1], [1, 0, 1]]
    both, _ = apply_loss_terms(
        {"completion_mask": completion, "tool_mask": torch.tensor([[1, 1, 0], [0, 1, 1]])},
        [LossTerms(token_mask=torch.tensor([[1, 0, 1], [1, 1, 1]]))],
    )
    assert both["tool_mask"].tolist() == [[1, 0, 0], [0, 1, 1]]


def test_masked_and_per_domain_means_carry_their_counts():
    values = torch.tensor([[1.0, 3.0], [5.0, 7.0], [2.0, 2.0]])
    mask = torch.tensor([[1, 1], [1, 0], [0, 0]])
    (mean,) = read_deferred([masked_mean(values, mask)])
    assert mean == pytest.approx(3.0) and mean.weight == 3
    domains = on_host(per_domain(values, mask, torch.tensor([0, 1, 1]), ["a", "b", "c"], "x"))
    assert domains["x/a"] == pytest.approx(2.0) and domains["x/a"].weight == 2
    assert domains["x/b"] == pytest.approx(5.0) and domains["x/b"].weight == 1
    assert math.isnan(domains["x/c"]) and domains["x/c"].weight == 0  # no row here: no value, weight 0


def test_the_sampler_log_probs_of_each_completion_are_cut_to_its_length():
    # Two generate calls: only the last one's record counts; TRL cut completion 1 after two tokens (its EOS).
    older = torch.zeros(2, 3)
    last = torch.tensor([[-0.5, -0.25, -2.0], [-1.0, -0.125, -4.0]])
    state = BatchState(inputs=[{}, {}], mode="train", group_size=2, sampling_logprobs=[older, last])
    assert state.completion_logprobs([[7, 2], [5, 6, 9]]) == [[-0.5, -0.25], [-1.0, -0.125, -4.0]]
