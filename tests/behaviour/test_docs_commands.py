"""Every command the docs show is composed or run here, and the site builds with warnings as errors.

The commands are the lines of the ```bash blocks in docs/*.md, docs/**/*.md and README.md:
- `align-kit train|sweep ...` (also `python -m align_kit.train`, `torchrun ... -m align_kit.train` and `accelerate
  launch ... -m align_kit.train`) go through `align_kit.cli.main` in-process up to the point where Hydra would start
  the jobs (`align_kit.train.main` is replaced by a recorder): the whole pre-flight, so each composes and validates as
  it does for a user. A sweep's pre-flight checks its first job here and every job in the slow tier. Commands with
  `--cfg` run for real and must print the composed config; a line whose comment says `exits 2` must be refused so.
- `align-kit compare ...` and `align-kit sweep --status|--resume ...` run on a fixture sweep folder, which the
  placeholders (`outputs/sweeps/<time>`, `run_a`, ...) name.
- `make <target>` must be a target of the Makefile; `mkdir` and `printf` lines build what the block's next commands
  use, in a fresh working folder per command.
- The few commands that need what no machine here has are listed in SHOWN_ONLY, each with its reason.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from align_kit import cli
from tests.conftest import ROOT

PAGES = sorted({*ROOT.glob("docs/*.md"), *ROOT.glob("docs/**/*.md"), ROOT / "README.md"})
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
SETUP = ("mkdir", "printf")
LAUNCHERS = ("python", "torchrun", "accelerate")  # they run `-m align_kit.train <overrides>`
EXPECTED_EXIT = re.compile(r"#\s*exits (\d+)")

SHOWN_ONLY = {
    "align-kit sweep docs/alert_to_answer/fix_overlong_budget_12.yaml logger=none "
    "hydra.sweep.dir=outputs/sweeps/fix_overlong_budget_12": (
        "a committed sweep file run from the repository's root, not from the fresh folder each command runs in here; "
        "a sweep file run by its path is tested in docs/sweeps.md's block and tests/doctor/test_advice_sweep.py"
    ),
    "align-kit compare wandb:ENTITY/PROJECT/GROUP": (
        "reads a W&B group through wandb.Api, which needs a W&B server and a login; the compare tests run the same "
        "path on a stand-in for the API"
    ),
    "align-kit compare outputs/sweeps/<time> --wandb-report ENTITY/PROJECT": (
        "saves a W&B Report, which needs a W&B server and a login; tests/compare/test_wandb_report.py builds it offline"
    ),
}
# The paper-scale recipes need GPUs (bf16 on CUDA, vLLM) and the hub's model and data: their pre-flight runs without
# the machine and data checks, with vLLM's GPU build and a W&B login faked as their user has them.
GPU_RECIPE = "recipe=gpu/"

# The fixture sweep: two arms (clip=symmetric, clip=clip_higher) x seeds 1-3, jobs numbered as Hydra's basic
# sweeper numbers `clip=symmetric,clip_higher seed=1,2,3` (first key outermost).
ARMS = {"symmetric": 0.2, "clip_higher": 0.28}
SEEDS = (1, 2, 3)
FIXTURE_JOBS = [(node, seed) for node in ARMS for seed in SEEDS]


@dataclass(frozen=True)
class Command:
    page: str
    text: str  # the line as shown (continuations joined)
    argv: tuple[str, ...]
    setup: tuple[str, ...]  # the block's mkdir/printf lines before it
    expected_exit: int

    @property
    def key(self) -> str:
        """The command without the path to its program (`.venv/bin/align-kit` reads `align-kit`)."""
        return " ".join([Path(self.argv[0]).name, *self.argv[1:]])

    @property
    def kind(self) -> str:
        head = Path(self.argv[0]).name
        if head == "align-kit":
            return self.argv[1]  # train, sweep, compare
        if head in LAUNCHERS:
            return "module"
        return head


def bash_lines(text: str) -> list[str]:
    return [line.strip() for line in text.replace("\\\n", " ").splitlines() if line.strip()]


def shown_commands() -> list[Command]:
    found: dict[tuple, Command] = {}
    for page in PAGES:
        for language, body in FENCE.findall(page.read_text()):
            if language != "bash":
                continue
            setup: list[str] = []
            for line in bash_lines(body):
                if line.startswith("#"):
                    continue
                argv = tuple(shlex.split(line, comments=True))
                if argv[0] in SETUP:
                    setup.append(line)
                    continue
                expected = EXPECTED_EXIT.search(line)
                text = shlex.join(argv)
                command = Command(
                    str(page.relative_to(ROOT)), text, argv, tuple(setup), int(expected.group(1)) if expected else 0
                )
                found.setdefault((command.key, command.setup), command)  # each once, wherever it is shown
    return list(found.values())


COMMANDS = shown_commands()


def of_kind(*kinds: str) -> list[Command]:
    return [command for command in COMMANDS if command.kind in kinds and command.key not in SHOWN_ONLY]


def ids(commands: list[Command]) -> list[str]:
    return [f"{command.page}: {command.key[:90]}" for command in commands]


def is_multirun(command: Command) -> bool:
    args = training_arguments(command)
    return "-m" in args or (command.kind == "sweep" and not set(args) & {"--cfg", "--status", "--resume"})


def training_arguments(command: Command) -> list[str]:
    """The arguments after `align-kit`, as `align-kit train ...` for the commands that run `-m align_kit.train`."""
    if command.kind == "module":
        return ["train", *command.argv[command.argv.index("align_kit.train") + 1 :]]
    return list(command.argv[1:])


# --- what the placeholders name ------------------------------------------------------------------------------------


def fixture_metrics() -> list[str]:
    """Every metric a shown compare command names (--metrics, --predict, --power METRIC), besides the defaults."""
    metrics = {"reward", "entropy"}
    for command in of_kind("compare"):
        args = list(command.argv)
        for flag, value in zip(args, args[1:], strict=False):
            if flag == "--metrics":
                metrics.update(value.split(","))
            elif flag == "--predict":
                metrics.add(value.rsplit(":", 1)[0])
            elif flag == "--power" and not re.fullmatch(r"[\d.:]+", value):
                metrics.add(value)
    return sorted(metrics)


def write_fixture_sweep(folder: Path) -> Path:
    """A finished sweep as `align-kit train -m clip=symmetric,clip_higher seed=1,2,3` leaves it: each job's config,
    summary and metrics (every metric rises with the step, faster under clip_higher), and the manifest."""
    metrics = fixture_metrics()
    jobs = []
    for number, (node, seed) in enumerate(FIXTURE_JOBS):
        job = folder / str(number)
        job.mkdir(parents=True)
        config = {"seed": seed, "clip": {"_target_": "align_kit.components.clip.TokenClip", "eps_low": 0.2,
                                         "eps_high": ARMS[node]}}  # fmt: skip
        (job / "config.yaml").write_text(json.dumps(config))  # JSON is valid YAML
        (job / "summary.json").write_text(json.dumps({"choices": {"clip": node}, "seed": seed}))
        slope = 0.02 if node == "symmetric" else 0.03
        rows = [{"step": step, **{m: slope * step + 0.01 * seed for m in metrics}} for step in range(1, 13)]
        (job / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        overrides = [f"clip={node}", f"seed={seed}"]
        jobs.append({"job": number, "overrides": overrides, "status": "done", "outcome": "ok", "error": None,
                     "folder": str(job)})  # fmt: skip
    manifest = {"task_overrides": ["clip=symmetric,clip_higher", "seed=1,2,3"], "hydra_overrides": [], "jobs": jobs}
    (folder / "sweep_manifest.json").write_text(json.dumps(manifest))
    return folder


def write_saved_model(folder: Path) -> Path:
    # model=hf needs a folder as save_pretrained leaves it; the files' names are enough to validate (nothing loads).
    folder.mkdir()
    (folder / "config.json").write_text('{"model_type": "qwen3"}')
    (folder / "model.safetensors").write_bytes(b"")
    (folder / "tokenizer_config.json").write_text("{}")
    return folder


def write_data(path: Path) -> Path:
    rows = [{"prompt": f"{a}+{a + 1}=", "answer": str(2 * a + 1)} for a in range(10, 74)]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path


def substituted(command: Command, places: dict[str, Path]) -> list[str]:
    """The command's arguments with each placeholder replaced by the fixture it names."""
    args = training_arguments(command)
    names = {"/path/to/saved/model": places["model"], "/path/to/data": places["data"]}
    out = []
    for i, arg in enumerate(args):
        folder_argument = command.kind == "compare" or (i >= 1 and args[i - 1] in ("--status", "--resume"))
        if folder_argument and (arg.startswith("outputs/sweeps/") or arg == "<sweep folder>"):
            arg = str(places["sweep"])
        elif command.kind == "compare" and arg in ("run_a", "run_b"):  # two runs of different arms
            arg = str(places["sweep"] / ("0" if arg == "run_a" else str(len(SEEDS))))
        for placeholder, value in names.items():
            arg = arg.replace(placeholder, str(value))
        out.append(arg)
    assert not any("<" in arg for arg in out), f"a placeholder this test does not know: {out}"
    return out


@pytest.fixture
def places(tmp_path, monkeypatch, cache_dir) -> dict[str, Path]:
    """A fresh working folder holding the fixtures; the command's setup lines run in it."""
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.setenv("ALIGN_KIT_CACHE", cache_dir)
    from align_kit.runs.launchers import THREADS_ENV

    monkeypatch.setenv(THREADS_ENV, "1")  # a sweep's launch plan sets it; restored afterwards
    return {
        "work": work,
        "sweep": write_fixture_sweep(tmp_path / "fixture_sweep"),
        "model": write_saved_model(tmp_path / "saved_model"),
        "data": write_data(tmp_path / "data.jsonl"),
    }


def run_setup(command: Command, work: Path) -> None:
    for line in command.setup:
        subprocess.run(["bash", "-c", line], cwd=work, check=True)


def machine_as_the_command_expects(command: Command, monkeypatch) -> None:
    """vLLM where a command samples with it, GPUs for the paper-scale recipes, and the process count a launcher
    starts."""
    import align_kit.runs.preflight as preflight

    build = "gpu" if GPU_RECIPE in command.text else "cpu" if "rollout=vllm" in command.text else None
    if build is not None:
        real = importlib.util.find_spec
        monkeypatch.setattr(
            "align_kit.components.rollout.importlib.util.find_spec",
            lambda name: object() if name == "vllm" else real(name),
        )
        monkeypatch.setattr("align_kit.components.rollout.vllm_build", lambda: build)
        monkeypatch.setattr("align_kit.components.rollout.vllm_build", lambda: build)
    if GPU_RECIPE in command.text:
        monkeypatch.setenv("WANDB_API_KEY", "0" * 40)
        monkeypatch.setattr(preflight, "check_machine", lambda effective: None)
        monkeypatch.setattr(preflight, "check_data", lambda plan, cache: None)
    from align_kit.models import smollm2

    if smollm2.wheel_folder() is None:  # a fresh clone's tiers run without the wheel (model=smollm2, its sweeps)
        folder = Path(tempfile.mkdtemp())
        from tests.gguf_files import write_gguf

        write_gguf(folder / smollm2.SmolLM2.__dataclass_fields__["gguf_file"].default)  # a header the pre-flight reads
        monkeypatch.setattr(smollm2, "wheel_folder", lambda: str(folder))
    args = list(command.argv)
    for flag in ("--nproc_per_node", "--num_processes"):
        if flag in args:
            monkeypatch.setenv("WORLD_SIZE", args[args.index(flag) + 1])
    if "--config_file" in args:
        assert (ROOT / args[args.index("--config_file") + 1]).is_file()


def run_cli(argv: list[str], monkeypatch, capsys) -> tuple[int, str, str, list[list[str]]]:
    """`align-kit <argv>` in-process; returns (exit status, stdout, stderr, the job launches Hydra would run)."""
    from align_kit import train

    launches: list[list[str]] = []
    if "--cfg" not in argv:
        monkeypatch.setattr(train, "main", lambda: launches.append(list(sys.argv)))
    monkeypatch.setattr(sys, "argv", list(sys.argv))
    capsys.readouterr()
    try:
        cli.main(argv)
        status = 0
    except SystemExit as exit_info:
        status = exit_info.code or 0
    out = capsys.readouterr()
    return status, out.out, out.err, launches


def check_training_command(command: Command, places, monkeypatch, capsys) -> None:
    run_setup(command, places["work"])
    machine_as_the_command_expects(command, monkeypatch)
    argv = substituted(command, places)
    status, out, err, launches = run_cli(argv, monkeypatch, capsys)
    if command.expected_exit:
        lines = err.strip().splitlines()
        assert status == command.expected_exit and len(lines) == 1 and lines[0].startswith("align-kit: config error:")
        return
    assert status == 0, err[-3000:]
    if "--cfg" in argv:
        composed = yaml.safe_load(out)
        assert {"trainer", "clip", "model"} <= set(composed), out[:500]
    elif "--status" in argv:
        assert f"{len(FIXTURE_JOBS)} jobs, {len(FIXTURE_JOBS)} ok" in out, out
    else:
        assert len(launches) == 1  # the pre-flight passed and Hydra would start the job(s)


TRAINING = of_kind("train", "sweep", "module")
# The pages a new user starts from; the other pages' commands (1-5 s each) are checked in the slow tier.
FIRST_PAGES = {"README.md", "docs/getting-started.md"}


@pytest.mark.parametrize(
    "command",
    [command if command.page in FIRST_PAGES else pytest.param(command, marks=pytest.mark.slow) for command in TRAINING],
    ids=ids(TRAINING),
)
def test_training_commands_compose_and_pass_the_preflight(command, places, monkeypatch, capsys):
    import align_kit.runs.preflight as preflight

    if "--resume" not in command.argv:  # a resume checks its manifest against every job its sweep makes
        every_job = preflight.sweep_jobs
        monkeypatch.setattr(preflight, "sweep_jobs", lambda *args, **kwargs: every_job(*args, **kwargs)[:1])
    check_training_command(command, places, monkeypatch, capsys)


SWEEPS = [command for command in TRAINING if is_multirun(command)]


@pytest.mark.slow
@pytest.mark.parametrize("command", SWEEPS, ids=ids(SWEEPS))
def test_every_job_of_each_shown_sweep_passes_the_preflight(command, places, monkeypatch, capsys):
    check_training_command(command, places, monkeypatch, capsys)


COMPARE = of_kind("compare")


@pytest.mark.parametrize("command", COMPARE, ids=ids(COMPARE))
def test_compare_commands_run_on_a_fixture_sweep(command, places, monkeypatch, capsys):
    argv = substituted(command, places)
    status, out, err, _ = run_cli(argv, monkeypatch, capsys)
    assert status == 0, err[-3000:]
    if "--power" in argv:
        assert "seeds" in out  # the paired seeds needed, and nothing else runs
        return
    out_folder = Path(argv[argv.index("--out") + 1]) if "--out" in argv else Path(argv[1]) / "compare"
    assert (places["work"] / out_folder / "report.md").is_file()


DOCTOR = of_kind("doctor")


@pytest.mark.parametrize("command", DOCTOR, ids=ids(DOCTOR))
def test_doctor_commands_run_on_the_shown_examples(command, tmp_path, monkeypatch, capsys):
    """Each runs on the example files under docs/examples (seen from a fresh folder, so --figures writes there) and
    exits as its comment says (`# exits N`; 0 when none)."""
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "examples").symlink_to(ROOT / "docs" / "examples")
    monkeypatch.chdir(tmp_path)
    status, out, err, _ = run_cli(list(command.argv[1:]), monkeypatch, capsys)
    assert status == command.expected_exit, err[-3000:]
    assert "verdict:" in out or '"verdict"' in out


def test_make_commands_are_targets_of_the_makefile():
    targets = set(re.findall(r"^([\w.-]+):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    shown = {arg for command in COMMANDS if command.kind == "make" for arg in command.argv[1:] if "=" not in arg}
    assert {"demo", "test", "docs"} <= shown <= targets


def test_every_shown_line_is_checked_here():
    """A shown line is a command this file checks (or lists in SHOWN_ONLY), and no other block holds one."""
    known = {"train", "sweep", "compare", "doctor", "module", "make"}
    assert [command.text for command in COMMANDS if command.kind not in known] == []
    assert set(SHOWN_ONLY) <= {command.key for command in COMMANDS}  # no stale entry
    assert len(SHOWN_ONLY) <= 3
    for page in PAGES:
        for language, body in FENCE.findall(page.read_text()):
            if language != "bash":
                commands = [line for line in bash_lines(body) if line.split(" ", 1)[0].endswith("align-kit")]
                assert commands == [], f"{page}: a command outside a bash block is checked by nothing"


@pytest.mark.slow
def test_the_site_builds_with_warnings_as_errors(tmp_path):
    site = tmp_path / "site"
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)]
    result = subprocess.run(build, cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    # The reference is generated from the nodes: every class a node YAML names has its section there.
    reference = (site / "reference" / "index.html").read_text()
    named = {
        match.group(1)
        for path in (ROOT / "conf").rglob("*.yaml")
        for match in re.finditer(r"_target_: (align_kit\.[\w.]+)", path.read_text())
    }
    assert named and all(target in reference for target in named)
