"""Adding a component takes one module, one YAML node, one defaults line and one docs page: a node written into a
temporary package and config folder composes, is validated by its own field facts, trains and logs its metric, and
its group's page joins the docs site, with no file of align_kit edited on the way."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import align_kit
from align_kit.tracking.metrics_file import read_metrics
from tests.conftest import FAST_POLICY, ROOT, cli_env

NODE_MODULE = '''
from dataclasses import dataclass

from align_kit.core.component import Component
from align_kit.core.fields import knob
from align_kit.core.hooks import TrainerHook


class CompletionTokens(TrainerHook):
    """Logs `scale` times the mean number of completion tokens of the batch that trains."""

    def __init__(self, scale: float):
        self.scale = scale

    def on_train_batch(self, trainer, state, batch):
        tokens = batch["completion_mask"].sum(dim=1).float()
        return {"probe/completion_tokens": self.scale * float(tokens.mean()), "probe/rows": float(len(tokens))}


@dataclass
class LengthProbe(Component):
    scale: float = knob(1.0, help="Multiplies the logged mean completion length.", gt=0)

    def trainer_hooks(self) -> list:
        return [CompletionTokens(self.scale)]
'''


def package_digest() -> str:
    """One hash over every file of the installed align_kit package (its code and its conf/)."""
    digest = hashlib.sha256()
    root = Path(align_kit.__file__).parent
    for path in sorted(root.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            digest.update(str(path.relative_to(root)).encode() + path.read_bytes())
    return digest.hexdigest()


def write_component(root: Path) -> tuple[Path, Path]:
    package = root / "code" / "my_nodes"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "length_probe.py").write_text(textwrap.dedent(NODE_MODULE))
    conf = root / "conf" / "probe"
    conf.mkdir(parents=True)
    (conf / "length.yaml").write_text("_target_: my_nodes.length_probe.LengthProbe\nscale: 2.0\n")
    return root / "code", root / "conf"


def align_kit_train(tmp_path: Path, cache_dir: str, code: Path, conf: Path, *overrides: str):
    env = cli_env(cache_dir)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), env.get("PYTHONPATH")]))
    command = [str(Path(sys.executable).parent / "align-kit"), "train", "--config-dir", str(conf)]
    # The defaults line: `+probe=length` adds the group to the run, as a line `- probe: length` would.
    command += ["+probe=length", "train.allowed_targets=[my_nodes]", f"paths.cache_dir={cache_dir}", *FAST_POLICY]
    return subprocess.run(command + list(overrides), cwd=tmp_path, env=env, capture_output=True, text=True)


@pytest.mark.slow  # a new node trained end to end in a subprocess: over a minute
def test_a_new_node_composes_is_validated_trains_and_logs_its_metric(tmp_path, cache_dir):
    before = package_digest()
    code, conf = write_component(tmp_path)

    shown = align_kit_train(tmp_path, cache_dir, code, conf, "--cfg", "job")
    assert shown.returncode == 0, shown.stderr
    assert "probe:\n  _target_: my_nodes.length_probe.LengthProbe\n  scale: 2.0" in shown.stdout

    refused = align_kit_train(tmp_path, cache_dir, code, conf, "probe.scale=0", f"hydra.run.dir={tmp_path / 'bad'}")
    assert refused.returncode == 2
    assert refused.stderr.strip().splitlines() == ["align-kit: config error: probe.scale=0: expected a number > 0"]
    assert not (tmp_path / "bad").exists()

    run_dir = tmp_path / "run"
    trained = align_kit_train(
        tmp_path,
        cache_dir,
        code,
        conf,
        f"hydra.run.dir={run_dir}",
        "trainer.max_steps=2",
        "trainer.save_strategy=no",
        "logger=none",
    )
    assert trained.returncode == 0, trained.stderr[-2000:]
    rows = [row for row in read_metrics(run_dir / "metrics.jsonl") if "loss" in row]
    assert [row["step"] for row in rows] == [1, 2]
    probed = [row for row in rows if "probe/completion_tokens" in row]  # logged in the steps that generate
    assert probed
    for row in probed:
        # TRL's own completions/mean_length is the same mean over the same batch: the node logs twice it
        assert row["probe/completion_tokens"] == pytest.approx(2.0 * row["completions/mean_length"])
        assert row["probe/rows"] == 64  # the generation batch: 32 per device x 2 steps per generation
    assert package_digest() == before


@pytest.mark.slow
def test_a_new_groups_docs_page_joins_the_site(tmp_path):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    shutil.copy(ROOT / "mkdocs.yml", tmp_path / "mkdocs.yml")
    page = "# probe\n\n`probe=length` logs the mean completion length.\n"
    (tmp_path / "docs" / "groups" / "probe.md").write_text(page)
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")]
    result = subprocess.run(build, cwd=tmp_path, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-3000:]
    assert (tmp_path / "site" / "groups" / "probe" / "index.html").is_file()
    assert 'href="groups/probe/"' in (tmp_path / "site" / "index.html").read_text()  # in the nav of every page
    assert (tmp_path / "mkdocs.yml").read_bytes() == (ROOT / "mkdocs.yml").read_bytes()
