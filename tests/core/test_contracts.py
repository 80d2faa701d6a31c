"""Declared contracts: every shipped task, model and logger node satisfies its protocol (core/contracts.py); the
facts a node tells the monitor and the batch keys a hook adds are declared by the node itself."""

from __future__ import annotations

import inspect
import re

import pytest
import torch
from hydra.utils import instantiate

from align_kit import CONF_DIR
from align_kit.components import dynamic_sampling
from align_kit.components.dynamic_sampling import concat_batches
from align_kit.components.mismatch import SamplerMismatch
from align_kit.components.routing_replay import RouteReplay
from align_kit.components.step_mask import StepLossMask
from align_kit.core.component import BUILDABLE
from align_kit.core.contracts import Logger, LoggerNode, Model, ModelNode, Task, TaskNode
from align_kit.core.hooks import BatchKey
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.monitor import rules
from align_kit.monitor.rules import RunContext
from align_kit.train import component_choices

CONTRACTS = {"task": (Task, TaskNode), "model": (Model, ModelNode), "logger": (Logger, LoggerNode)}
SHIPPED = [(group, path.stem) for group in CONTRACTS for path in sorted((CONF_DIR / group).glob("*.yaml"))]


def shipped_node(group: str, name: str):
    """The node conf/<group>/<name>.yaml builds (constructed only: validation may need files or credentials)."""
    return instantiate(compose([f"{group}={name}"])[group])


@pytest.mark.parametrize(("group", "name"), SHIPPED, ids=[f"{g}={n}" for g, n in SHIPPED])
def test_every_shipped_node_satisfies_its_protocol(group, name):
    protocol, base = CONTRACTS[group]
    node = shipped_node(group, name)
    assert isinstance(node, protocol) and isinstance(node, base)


@pytest.mark.slow
def test_the_shipped_nodes_cover_every_task_model_and_logger_class():
    built = {type(shipped_node(group, name)) for group, name in SHIPPED}
    for _, base in CONTRACTS.values():
        classes = {cls for cls in BUILDABLE.values() if issubclass(cls, base) and cls is not base}
        assert classes and classes <= built, base


def test_an_object_without_the_members_is_no_task_model_or_logger():
    for protocol, _ in CONTRACTS.values():
        assert not isinstance(object(), protocol)


def test_the_bases_give_the_defaults_the_trainer_reads():
    tasks = {name: shipped_node("task", name) for group, name in SHIPPED if group == "task"}
    # Only the multi-turn task brings its own episode loop and measures its own warm start.
    assert [name for name, task in tasks.items() if task.rollout_func() is not None] == ["tool_calls"]
    assert tasks["arithmetic"].warm_start_success_rate(None, None, 4, 8) is None
    assert tasks["hf_dataset"].num_eval == 0  # its eval_split is checked, not trained on
    assert tasks["hf_dataset"].source == "task.path=None"
    assert tasks["tool_calls"].COLUMNS == ("prompt", "calls", "domain")
    hf = shipped_node("model", "hf")
    assert (hf.max_position_embeddings, hf.prompt_problem([{"role": "user", "content": "1+1="}], 32)) == (None, None)
    assert shipped_node("model", "tiny_moe").declared_model_type() == "qwen3_moe"
    assert shipped_node("logger", "none").report_to() == []
    with shipped_node("logger", "none").session("/unused", None) as run:
        assert run is None


def test_the_trainer_plan_and_entry_point_probe_no_node():
    from align_kit import train, trainer, vllm_server
    from align_kit.experiment import plan, trainer_needs
    from align_kit.models import tiny

    probe = re.compile(r"\b(getattr|hasattr)\((plan\.\w+|task|model|logger|node|component)\b")
    for module in (train, trainer, plan, trainer_needs, vllm_server, tiny):
        assert probe.findall(inspect.getsource(module)) == [], module.__name__


def facts(*overrides: str) -> RunContext:
    return RunContext.from_plan(build_plan(compose(["logger=none", *overrides]), component_choices(), "/tmp/unused"))


def test_the_monitor_reads_what_the_nodes_declare():
    default = facts()
    assert (default.dynamic_sampling, default.max_gen_batches, default.overlong_shaping, default.routing_replay) == (
        False,
        None,
        False,
        False,
    )
    # conf/sampling/dynamic.yaml: 4 rounds; overlong=soft_punish is a reward term; r2 replays the routing.
    on = facts("sampling=dynamic", "overlong=soft_punish", "routing_replay=r2", "model=tiny_moe")
    assert (on.dynamic_sampling, on.max_gen_batches, on.overlong_shaping, on.routing_replay) == (True, 4, True, True)
    assert facts("overlong=filter").overlong_shaping is False  # filtering masks; it adds no length penalty
    assert "getattr" not in inspect.getsource(rules.RunContext.from_plan)


def test_hooks_declare_the_batch_keys_they_add():
    assert [key.name for key in RouteReplay.batch_keys] == ["routed_experts", "routed_experts_valid"]
    assert SamplerMismatch.batch_keys == (BatchKey("rollout_is_ratio", "completion", pad=1.0),)
    assert StepLossMask.batch_keys == (BatchKey("tool_mask", "completion", pad=1),)
    source = inspect.getsource(dynamic_sampling)
    assert "routed_experts" not in source and "rollout_is_ratio" not in source  # no list of other nodes' keys


def test_dynamic_sampling_pads_the_keys_the_hooks_declare():
    # Prompt widths 2 and 1, completion widths 1 and 3: the joined batch is 2 + 3 wide.
    first = {
        "prompt_ids": torch.tensor([[5, 6]]), "prompt_mask": torch.tensor([[1, 1]]),
        "completion_ids": torch.tensor([[7]]), "completion_mask": torch.tensor([[1]]),
        "routing": torch.tensor([[1, 2, 3]]), "weights": torch.tensor([[0.5]]), "row_beta": torch.tensor([[0.1]]),
    }  # fmt: skip
    second = {
        "prompt_ids": torch.tensor([[8]]), "prompt_mask": torch.tensor([[1]]),
        "completion_ids": torch.tensor([[9, 10, 11]]), "completion_mask": torch.tensor([[1, 1, 0]]),
        "routing": torch.tensor([[4, 5, 6, 7]]), "weights": torch.tensor([[2.0, 3.0, 4.0]]),
        "row_beta": torch.tensor([[0.2]]),
    }  # fmt: skip
    declared = [BatchKey("routing", "sequence", pad=-1), BatchKey("weights", "completion", pad=1.0)]
    joined = concat_batches([first, second], pad_token_id=0, added_keys=declared)
    # [prompt | completion]: row 1 keeps 1 2 | 3, padded to -1 1 2 | 3 -1 -1; row 2 is 4 | 5 6 7, padded left once.
    assert joined["routing"].tolist() == [[1, 2, 3, -1, -1], [-1, 4, 5, 6, 7]]
    assert joined["weights"].tolist() == [[0.5, 1.0, 1.0], [2.0, 3.0, 4.0]]
    assert joined["row_beta"].view(-1).tolist() == pytest.approx([0.1, 0.2])  # per row: joined as it is
    assert joined["num_items_in_batch"].item() == 3  # 1 + 2 completion tokens
