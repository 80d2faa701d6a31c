"""HealthCallback: the RunContext from a GRPOConfig, the resume without metrics.jsonl, and the monitor inside a plain
`trl.GRPOTrainer` run (the docs' two snippets, run as written)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from transformers import TrainerControl, TrainerState
from trl import GRPOConfig

from align_kit.core.errors import ConfigError
from align_kit.integrations.trl import HealthCallback, reward_names, run_context, without_halts
from align_kit.monitor import HealthMonitorConfig
from align_kit.monitor.callback import MONITOR_STATE_FILE
from align_kit.monitor.samples import NOT_COMPUTED
from align_kit.monitor.settings import AboveThreshold, NoSignal
from tests.conftest import ROOT
from tests.read_only import unwritable_folder

DOCS = ROOT / "docs" / "monitor.md"


def config(tmp_path, **fields) -> GRPOConfig:
    return GRPOConfig(output_dir=str(tmp_path / "run"), use_cpu=True, report_to="none", **fields)


def test_run_context_reads_the_grpo_config(tmp_path):
    args = config(
        tmp_path, max_completion_length=64, epsilon=0.2, epsilon_high=0.28, beta=0.04, reward_weights=[1.0, 0.5]
    )
    context = run_context(args, ["correctness", "format"])
    assert context.max_completion_length == 64
    assert context.clip_higher and not context.sequence_clip  # token level, 0.28 > 0.2
    assert context.eps_high == 0.28
    assert context.kl_on
    assert context.advantage == "grpo"
    assert context.reward_weights == {"correctness": 1.0, "format": 0.5}
    assert context.reward_max == 1.5  # 1.0 x 1.0 + 0.5 x 1.0: each function scores at most 1.0
    assert not context.overlong_shaping


def test_run_context_defaults_and_other_settings(tmp_path):
    # TRL's defaults: beta 0 (no KL), epsilon_high unset (symmetric clip at epsilon 0.2), weights 1.0 each.
    plain = run_context(config(tmp_path), ["a", "b", "soft_overlong_punishment_reward"])
    assert not plain.kl_on and not plain.clip_higher and plain.eps_high == 0.2
    assert plain.reward_weights == {"a": 1.0, "b": 1.0, "soft_overlong_punishment_reward": 1.0}
    assert plain.reward_max == 3.0
    assert plain.overlong_shaping
    assert run_context(config(tmp_path)).reward_max == 1.0  # names unknown yet: the monitor's default
    gspo = run_context(config(tmp_path, importance_sampling_level="sequence", epsilon_high=0.28))
    assert gspo.sequence_clip and not gspo.clip_higher  # the sequence-level clip is GSPO's, not Clip-Higher
    gdpo = run_context(config(tmp_path, multi_objective_aggregation="normalize_then_sum"))
    assert gdpo.advantage == "gdpo"
    # A negative weight (a penalty) cannot raise the best total: 2.0 x 1.0 only.
    penalised = run_context(config(tmp_path, reward_weights=[2.0, -1.0]), ["correctness", "length"], None)
    assert penalised.reward_max == 2.0
    assert run_context(config(tmp_path), ["a"], reward_max=5.0).reward_max == 5.0


def test_reward_names_in_logging_order():
    row = {"loss": 0.1, "rewards/correctness/mean": 0.5, "rewards/correctness/std": 0.1, "rewards/format/mean": 1.0}
    assert reward_names(row) == ["correctness", "format"]


def test_without_halts_turns_halts_into_warnings():
    shipped = HealthMonitorConfig()
    assert shipped.non_finite.action == "halt"
    relaxed = without_halts(HealthMonitorConfig(zero_std_groups=AboveThreshold(action="halt", span=1)))
    assert relaxed.non_finite.action == "warn" and relaxed.zero_std_groups.action == "warn"
    assert relaxed.entropy_decline.action == "log"  # untouched


# Two flat batches in a row: with span 2 the rule can judge only at the second one.
# Two flat rows are enough for both rules (the shipped no_signal reads 10): the resume tests count on step 2.
FLAT_TWICE = HealthMonitorConfig(
    zero_std_groups=AboveThreshold(action="warn", span=2, threshold=0.5), no_signal=NoSignal(rows=2)
)


def _begin(callback: HealthCallback, args: GRPOConfig, step: int, log_history: list[dict]) -> TrainerControl:
    state = TrainerState(global_step=step, max_steps=10, log_history=log_history)
    control = TrainerControl()
    callback.on_train_begin(args, state, control)
    return control


def _log(callback: HealthCallback, args: GRPOConfig, step: int, row: dict) -> None:
    callback.on_log(args, TrainerState(global_step=step, max_steps=10), TrainerControl(), logs=row)


def _alerts(folder: Path) -> list[dict]:
    path = folder / "alerts.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_resume_rebuilds_the_history_from_trainer_state(tmp_path):
    args = config(tmp_path)
    flat = {"loss": 0.0, "reward": 0.0, "frac_reward_zero_std": 1.0}
    resumed = HealthCallback(config=FLAT_TWICE)
    _begin(resumed, args, 1, [{**flat, "step": 1}])
    _log(resumed, args, 2, flat)
    # mean of (1.0, 1.0) = 1.0 > 0.5 at step 2: only with step 1 rebuilt from log_history (and two rows of every
    # group flat with the loss 0: no_signal, whatever the reward scale).
    assert [(a["rule"], a["step"], a["values"].get("recent_mean")) for a in _alerts(tmp_path / "run")] == [
        ("zero_std_groups", 2, 1.0),
        ("no_signal", 2, None),
    ]


def test_without_the_history_the_same_step_cannot_judge(tmp_path):
    args = config(tmp_path)
    fresh = HealthCallback(config=FLAT_TWICE)
    _begin(fresh, args, 1, [])
    _log(fresh, args, 2, {"loss": 0.0, "reward": 0.0, "frac_reward_zero_std": 1.0})
    assert _alerts(tmp_path / "run") == []  # one point of a span of 2


def test_resume_prefers_the_checkpoint_state_and_does_not_repeat_alerts(tmp_path):
    args = config(tmp_path)
    flat = {"loss": 0.0, "reward": 0.0, "frac_reward_zero_std": 1.0}
    first = HealthCallback(config=FLAT_TWICE, run_dir=tmp_path / "monitor")
    _begin(first, args, 0, [])
    _log(first, args, 1, flat)
    _log(first, args, 2, flat)  # fires (zero_std_groups and no_signal): the episodes are open
    (tmp_path / "run" / "checkpoint-2").mkdir(parents=True)  # HF has written the checkpoint when on_save runs
    first.on_save(args, TrainerState(global_step=2, is_world_process_zero=True), TrainerControl())
    assert (tmp_path / "run" / "checkpoint-2" / MONITOR_STATE_FILE).is_file()
    assert len(_alerts(tmp_path / "monitor")) == 2
    # The log history says nothing flat: only the saved state knows the open episode.
    second = HealthCallback(config=FLAT_TWICE, run_dir=tmp_path / "monitor")
    _begin(second, args, 2, [{"loss": 0.0, "reward": 1.0, "frac_reward_zero_std": 0.0, "step": 2}])
    _log(second, args, 3, flat)
    assert len(_alerts(tmp_path / "monitor")) == 2  # still the same episodes: no further alert


def test_the_reward_weights_come_from_the_first_logged_step(tmp_path):
    args = config(tmp_path, reward_weights=[1.0, 0.5])
    callback = HealthCallback()
    _begin(callback, args, 0, [])
    assert callback.monitor.context.reward_max == 1.0
    _log(callback, args, 1, {"loss": 0.1, "rewards/correctness/mean": 0.2, "rewards/format/mean": 0.9})
    assert callback.monitor.context.reward_weights == {"correctness": 1.0, "format": 0.5}
    assert callback.monitor.context.reward_max == 1.5


# --- on a plain trl.GRPOTrainer run -------------------------------------------------------------------------------


def snippets() -> list[str]:
    """The python blocks of the docs' section on plain TRL, as written there."""
    text = DOCS.read_text()
    section = text.split("## The monitor inside plain TRL", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^```python\n(.*?)^```", section, re.MULTILINE | re.DOTALL)


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> str:
    """A random-weight tiny Qwen3 with the character tokenizer, saved as a plain Hugging Face folder."""
    import torch
    from transformers import AutoModelForCausalLM

    from align_kit.models.char_tokenizer import build_char_tokenizer
    from align_kit.models.tiny import TinyModel

    folder = tmp_path_factory.mktemp("tiny_model")
    tokenizer = build_char_tokenizer()
    torch.manual_seed(0)
    hf_config = TinyModel(num_layers=1).hf_config(len(tokenizer), tokenizer.pad_token_id, tokenizer.eos_token_id)
    model = AutoModelForCausalLM.from_config(hf_config, dtype=torch.float32)
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def always_zero(completions, **kwargs):
    return [0.0] * len(completions)


def run_snippet(code: str, folder: Path, monkeypatch, tiny_model: str) -> dict:
    from align_kit.tasks.arithmetic import ArithmeticTask

    monkeypatch.chdir(folder)
    namespace = {
        "model_path": tiny_model,
        "reward_funcs": [always_zero],
        "dataset": ArithmeticTask(num_train=16).dataset("train"),
    }
    exec(compile(code, "docs/monitor.md", "exec"), namespace)
    return namespace


def test_the_docs_show_two_snippets():
    blocks = snippets()
    assert len(blocks) == 2
    assert all("callbacks=[HealthCallback(" in block for block in blocks)


def test_plain_grpo_trainer_prints_the_dashboard(tmp_path, monkeypatch, capsys, tiny_model):
    # A few seconds: a one-layer random model, 4 steps of 8 completions of 16 tokens.
    namespace = run_snippet(snippets()[0], tmp_path, monkeypatch, tiny_model)
    assert namespace["trainer"].state.global_step == 4  # max_steps: nothing halts with the shipped rules
    printed = capsys.readouterr().out
    # One dashboard block per logged step: reward_avg is the always-zero reward.
    assert re.search(r"\[Step 1/4\] loss=\S+ reward_avg=0\.000", printed)
    assert "[Step 4/4]" in printed
    # The random-weight model rarely ends a completion within 16 tokens: length_near_max judges against the
    # GRPOConfig's max_completion_length (16 x (1 - 0.05) = 15.2). Every group is flat too, with reward_std 0;
    # zero_std_groups and no_signal judge over 10 points and the run logs 4: no alert from them during training.
    rows = _alerts(tmp_path / "grpo-run")
    during = [a for a in rows if "fewer than the" not in a["message"]]
    # (a batch that ends early re-arms the rule, so a later step may fire again)
    assert {a["rule"] for a in during} == {"length_near_max"}
    assert (rows[0]["step"], rows[0]["action"]) == (1, "warn")
    # At the end of training the rules that never judged judge the 4 points there are: every group flat (share 1.0
    # > 0.5), reward_std 0 on all 4 rows (no_signal), and with no advantage every grad norm 0 < 1e-4
    # (grad_norm_vanishing reads 3 points at least).
    at_end = {a["rule"]: a for a in rows if "fewer than the" in a["message"]}
    assert {"zero_std_groups", "no_signal"} <= set(at_end)
    assert set(at_end) <= {"zero_std_groups", "no_signal", "grad_norm_vanishing", "length_pinned"}
    assert at_end["zero_std_groups"]["step"] == 4 and at_end["zero_std_groups"]["points"] == 4
    assert at_end["zero_std_groups"]["values"]["recent_mean"] == 1.0
    assert rows[0]["values"]["max_completion_length"] == 16
    assert rows[0]["values"]["threshold"] == pytest.approx(15.2)
    assert rows[0]["values"]["recent_mean"] >= 15.2
    assert "ALERT length_near_max (warn)" in printed
    # The advice names GRPOConfig's fields, in 18.3.8's order (data before sampling): at the budget from the first
    # step, filtering truncated completions (data) comes before doubling the budget, 16 -> 32 (sampling).
    advice = rows[0]["advice"]
    assert "mask_truncated_completions=True" in advice and "max_completion_length=32" in advice
    assert advice.index("mask_truncated_completions") < advice.index("max_completion_length=32")
    assert "overlong=" not in advice and "trainer.max_completion_length" not in advice


def test_plain_grpo_trainer_writes_the_completions_behind_an_alert(tmp_path, monkeypatch, tiny_model):
    namespace = run_snippet(snippets()[0], tmp_path, monkeypatch, tiny_model)
    trainer, run = namespace["trainer"], tmp_path / "grpo-run"
    first = _alerts(run)[0]
    assert (first["rule"], first["step"]) == ("length_near_max", 1)
    document = json.loads((run / "samples" / "alert-00000001-length_near_max.json").read_text())
    assert document["lengths_from"] == ["re-tokenised text"]
    assert document["entropy_from"] == [NOT_COMPUTED]  # plain TRL keeps per-token entropies inside its loss
    entries = [entry for group in document["groups"] for entry in group["completions"]]
    assert {entry["entropy"] for entry in entries} == {None}
    # The completions are the ones the trainer generated (its completion log holds the last batch), the reward
    # always_zero's 0, and a length counted by the tokenizer; cut where it reaches the budget of 16.
    tokenizer = trainer.processing_class
    for entry in entries:
        assert entry["rewards"] == {"always_zero": 0.0} and entry["reward"] == 0.0
        assert entry["length"] == len(tokenizer(entry["completion"], add_special_tokens=False)["input_ids"])
        assert entry["truncated"] == (entry["length"] >= 16)
    assert any(entry["truncated"] for entry in entries)


def test_plain_grpo_trainer_halts_on_a_rule(tmp_path, monkeypatch, capsys, tiny_model):
    namespace = run_snippet(snippets()[1], tmp_path, monkeypatch, tiny_model)
    trainer, run = namespace["trainer"], tmp_path / "grpo-run"
    # Step 1 logs frac_reward_zero_std = 1.0 (a reward of 0 for every completion: every group flat); the mean of
    # the last 1 point, 1.0, exceeds 0.5, and the action is halt: training stops at step 1 of 4.
    assert trainer.state.global_step == 1
    rows = {a["rule"]: a for a in _alerts(run)}
    # The budget's warning as in the first snippet; at the end of training, on the one logged point, no_signal
    # (reward 0, every group flat), length_pinned (clipped share 1.0 >= 0.9, mean length 16 >= 15.2) and
    # grad_norm_vanishing (with no advantage the one grad norm is exactly 0: a step that moved nothing).
    assert set(rows) == {"zero_std_groups", "length_near_max", "no_signal", "length_pinned", "grad_norm_vanishing"}
    flat = rows["zero_std_groups"]
    assert (flat["step"], flat["action"], flat["metric"]) == (1, "halt", "frac_reward_zero_std")
    assert flat["values"] == {"recent_mean": 1.0, "threshold": 0.5}
    assert json.loads((run / "halt.json").read_text())["rule"] == "zero_std_groups"
    # The halt saved a checkpoint of that step, with the monitor's state in it.
    assert (run / "checkpoint-1" / "trainer_state.json").is_file()
    saved = json.loads((run / "checkpoint-1" / MONITOR_STATE_FILE).read_text())
    assert saved["series"]["frac_reward_zero_std"]["values"] == [1.0]
    printed = capsys.readouterr().out
    assert "[Step 1/4]" in printed and "ALERT zero_std_groups (halt)" in printed


# --- bad arguments and damaged files, refused or repaired before the first step -----------------------------------


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf"), 0.0, -1.0, True, "1.0"])
def test_a_reward_max_without_a_range_is_refused_at_construction(value):
    # NaN compares false with everything (no_signal could never fire); inf, 0 and below leave no range above the
    # monitor's lowest total reward, 0.
    with pytest.raises(ConfigError) as refused:
        HealthCallback(reward_max=value)
    assert str(refused.value).startswith(f"HealthCallback(reward_max={value!r}): expected a finite number > 0")
    assert "\n" not in str(refused.value)


def test_a_config_that_is_not_the_monitors_is_refused():
    with pytest.raises(ConfigError, match=r"HealthCallback\(config=dict\): expected a HealthMonitorConfig"):
        HealthCallback(config={"non_finite": {"action": "warn"}})


def test_a_run_dir_that_cannot_be_written_is_refused_at_construction(tmp_path):
    folder = unwritable_folder(tmp_path)
    for run_dir in (folder, folder / "monitor"):
        with pytest.raises(ConfigError) as refused:
            HealthCallback(run_dir=run_dir)
        message = str(refused.value)
        assert message.startswith(f"HealthCallback: run_dir={run_dir} ")
        assert "is not writable" in message or "is under /sys, the kernel's own file system" in message
        assert message.endswith("(alerts.jsonl and halt.json are written there)")


def test_an_output_dir_that_cannot_be_written_is_refused_at_train_begin(tmp_path):
    # No run_dir given: the folder is the trainer's output_dir, known at on_train_begin, before the first step.
    folder = unwritable_folder(tmp_path)
    args = GRPOConfig(output_dir=str(folder / "run"), use_cpu=True, report_to="none")
    callback = HealthCallback()
    with pytest.raises(ConfigError, match=rf"^HealthCallback: run_dir={folder / 'run'} "):
        _begin(callback, args, 0, [])


def test_a_cut_last_line_of_alerts_jsonl_does_not_swallow_the_next_alert(tmp_path, capsys):
    # A run killed mid-write left '{"step": 2, "ru' without a newline; the resumed run's NaN alert must land on a
    # line of its own, not be glued to the cut one (and lost with it to every JSON-lines reader).
    args = config(tmp_path)
    run = tmp_path / "run"
    run.mkdir()
    (run / "alerts.jsonl").write_text('{"step": 1, "rule": "x"}\n{"step": 2, "ru')
    callback = HealthCallback(halt=False)
    _begin(callback, args, 2, [{"step": 2, "loss": 0.1}])
    _log(callback, args, 3, {"loss": float("nan"), "reward": 0.5})
    lines = (run / "alerts.jsonl").read_text().splitlines()
    assert lines[:2] == ['{"step": 1, "rule": "x"}', '{"step": 2, "ru']  # kept as it was
    assert [json.loads(line)["rule"] for line in lines[2:]] == ["non_finite"]
    assert f"{run / 'alerts.jsonl'} ended in a cut line" in capsys.readouterr().out
    # A whole last line is left alone, and nothing is said.
    again = HealthCallback(halt=False)
    _begin(again, args, 3, [{"step": 3, "loss": 0.1}])
    assert (run / "alerts.jsonl").read_text().splitlines() == lines
    assert "cut line" not in capsys.readouterr().out


def test_a_truncated_monitor_state_resumes_from_the_log_history_with_a_warning(tmp_path, capsys):
    # The checkpoint's align_kit_monitor.json was cut short: the resume says so in one line and rebuilds the history
    # from trainer_state.json's log_history, so the second flat step fires as in the resume test above.
    args = config(tmp_path)
    flat = {"loss": 0.0, "reward": 0.0, "frac_reward_zero_std": 1.0}
    saved = tmp_path / "run" / "checkpoint-1" / MONITOR_STATE_FILE
    saved.parent.mkdir(parents=True)
    saved.write_text('{"memory": {"series": {"loss": [0, 1')
    resumed = HealthCallback(config=FLAT_TWICE)
    _begin(resumed, args, 1, [{**flat, "step": 1}])
    [warning] = [line for line in capsys.readouterr().out.splitlines() if "monitor state" in line]
    assert warning.startswith(f"align-kit monitor: {saved} is not a readable monitor state (JSONDecodeError: ")
    assert warning.endswith("the monitor's history is rebuilt from the run's logged history instead")
    _log(resumed, args, 2, flat)
    # (two rows of every group flat with the loss 0 are also no_signal, whatever the reward scale)
    assert [(a["rule"], a["step"]) for a in _alerts(tmp_path / "run")] == [("zero_std_groups", 2), ("no_signal", 2)]


@pytest.mark.parametrize("text", ["[1, 2]", '{"memory": {}}', "\x00\x00"])
def test_a_monitor_state_of_another_shape_is_left_with_a_warning(tmp_path, capsys, text):
    # Valid JSON that is not the monitor's state (a list; an object lacking its fields), or bytes that are no JSON.
    args = config(tmp_path)
    saved = tmp_path / "run" / "checkpoint-1" / MONITOR_STATE_FILE
    saved.parent.mkdir(parents=True)
    saved.write_text(text)
    resumed = HealthCallback(config=FLAT_TWICE)
    _begin(resumed, args, 1, [{"loss": 0.0, "reward": 0.0, "frac_reward_zero_std": 1.0, "step": 1}])
    printed = capsys.readouterr().out
    assert printed.count("is not a readable monitor state") == (text != '{"memory": {}}')
    assert resumed.monitor.history["frac_reward_zero_std"].count == 1  # rebuilt from the log history
