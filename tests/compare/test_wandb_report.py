"""`align-kit compare --wandb-report`: the W&B Report built offline. The library's server look-ups (the project's id,
the project list, saving the view, the app URL) are patched; the spec it would upload is read back and checked."""

from __future__ import annotations

import json

import pytest
import yaml

from align_kit.compare import CompareError
from align_kit.compare.command import main as compare_main
from tests.compare.sweep_by_hand import FakeApi, jobs, write_run_folder

wr_interface = pytest.importorskip("wandb_workspaces.reports.v2.interface")

SWEEP_DIR_NAME = "2026-11-29_10-00-00"
GROUP = f"clip_higher-{SWEEP_DIR_NAME}"  # <sweep>-<sweep folder name>, as align_kit.train names the group


class FakeServer:
    """What the report library asks the W&B server, answered as the server answers."""

    def __init__(self):
        self.saved = []
        self.created = []
        self.default_entity = "someone"

    def projects(self, entity):
        return []

    def create_project(self, project, entity):
        self.created.append((entity, project))

    def graphql(self, api, query, variables):
        if "spec" in variables:  # upsertView: the report itself
            self.saved.append(variables)
            view = {
                "id": "VIEW42",
                "name": variables["name"],
                "displayName": variables["displayName"],
                "description": variables["description"],
                "project": {"entityName": variables["entityName"], "name": variables["projectName"]},
                "spec": json.loads(variables["spec"]),
            }
            return {"upsertView": {"view": view}}
        return {"project": {"internalId": f"id-of-{variables['entityName']}/{variables['projectName']}"}}


@pytest.fixture
def server(monkeypatch):
    fake = FakeServer()
    monkeypatch.setattr(wr_interface, "_get_api", lambda: fake)
    monkeypatch.setattr(wr_interface, "execute_graphql", fake.graphql)
    monkeypatch.setattr(wr_interface, "get_app_url", lambda api: "https://wandb.example")
    return fake


def write_sweep(root, same_node: bool = False):
    for number, node, seed in jobs():
        folder = root / str(number)
        write_run_folder(folder, node, seed)
        if same_node:  # the arms differ by a value only (clip.eps_high), not by the node
            summary = json.loads((folder / "summary.json").read_text())
            summary["choices"]["clip"] = "clip_higher"
            (folder / "summary.json").write_text(json.dumps(summary))
        hydra = {
            "hydra": {
                "mode": "MULTIRUN",
                "sweep": {"dir": f"outputs/sweeps/{SWEEP_DIR_NAME}"},
                "runtime": {"choices": {"sweep": "clip_higher", "clip": node}},
            }
        }
        (folder / ".hydra").mkdir()
        (folder / ".hydra" / "hydra.yaml").write_text(yaml.safe_dump(hydra))
    return root


def saved_spec(server) -> tuple[dict, dict]:
    assert len(server.saved) == 1
    variables = server.saved[0]
    return variables, json.loads(variables["spec"])


def blocks_of(spec, kind):
    return [block for block in spec["blocks"] if block.get("type") == kind]


def test_report_of_a_local_sweep(server, tmp_path, capsys):
    sweep = write_sweep(tmp_path / "sweep")
    compare_main([str(sweep), "--last-k", "2", "--out", str(tmp_path / "out"), "--wandb-report", "team/proj"])

    variables, spec = saved_spec(server)
    assert (variables["entityName"], variables["projectName"]) == ("team", "proj")
    assert variables["displayName"] == f"align_kit {GROUP}"
    headings = ["".join(child["text"] for child in block["children"]) for block in blocks_of(spec, "heading")]
    # compare's figures for reward and entropy: the accuracy/entropy layout, the reward layout, then the tables.
    assert [heading.split(" (")[0] for heading in headings] == ["Accuracy and entropy", "Training reward", "Tables"]
    grids = blocks_of(spec, "panel-grid")
    assert [[panel["config"]["metrics"] for panel in grid["metadata"]["panelBankSectionConfig"]["panels"]]
            for grid in grids] == [[["train/reward"], ["train/entropy"]], [["train/reward"]]]  # fmt: skip
    for grid in grids:
        for panel in grid["metadata"]["panelBankSectionConfig"]["panels"]:
            assert panel["viewType"] == "Run History Line Plot"
            assert panel["config"]["xAxis"] == "train/global_step"
            assert (panel["config"]["groupAgg"], panel["config"]["groupArea"]) == ("mean", "stderr")
        (runset,) = grid["metadata"]["runSets"]
        assert runset["project"] == {"name": "proj", "entityName": "team", "id": "id-of-team/proj"}
        assert [(f["key"], f["op"], f["value"]) for f in runset["filters"]["filters"]] == [
            ({"section": "run", "name": "group"}, "=", GROUP)
        ]
        # The arms differ by the clip node: W&B groups by the config key align_kit logs it under.
        assert runset["grouping"] == [{"section": "config", "name": "choice/clip.value"}]
    (markdown,) = blocks_of(spec, "markdown-block")
    # compare's tables: reward final mean ± std over seeds per arm (0.45 ± 0.1 and 0.9 ± 0.2 in test_compare).
    assert "| clip=symmetric | 3 | 0.45 ± 0.1 | baseline |" in markdown["content"]
    assert "| clip=clip_higher | 3 | 0.9 ± 0.2 |" in markdown["content"]
    assert "**entropy**" in markdown["content"]
    assert "align-kit: W&B report: https://wandb.example/team/proj/reports/" in capsys.readouterr().out
    assert server.created == [("team", "proj")]


def test_arms_that_differ_by_a_value_group_by_that_key(server, tmp_path):
    sweep = write_sweep(tmp_path / "sweep", same_node=True)
    compare_main([str(sweep), "--out", str(tmp_path / "out"), "--wandb-report", "team/proj"])
    _, spec = saved_spec(server)
    for grid in blocks_of(spec, "panel-grid"):
        assert grid["metadata"]["runSets"][0]["grouping"] == [{"section": "config", "name": "clip.value.eps_high"}]


def test_report_of_a_wandb_group_filters_to_that_group(server, monkeypatch, tmp_path):
    import wandb

    monkeypatch.setattr(wandb, "Api", lambda: FakeApi())
    compare_main(
        ["wandb:team/align_kit/clip-sweep", "--out", str(tmp_path / "out"), "--wandb-report", "team/align_kit"]
    )
    _, spec = saved_spec(server)
    for grid in blocks_of(spec, "panel-grid"):
        assert grid["metadata"]["runSets"][0]["filters"]["filters"][0]["value"] == "clip-sweep"


def test_runs_without_a_group_name_the_option(server, tmp_path, capsys):
    write_run_folder(tmp_path / "run", "symmetric", 1)
    with pytest.raises(SystemExit) as stopped:
        compare_main([str(tmp_path / "run"), "--out", str(tmp_path / "out"), "--wandb-report", "team/proj"])
    assert stopped.value.code == 2
    assert "--wandb-group GROUP" in capsys.readouterr().err
    with pytest.raises(CompareError, match="ENTITY/PROJECT"):
        from align_kit.compare.wandb_report import parse_project

        parse_project("team")


def test_a_sweep_jobs_wandb_config_carries_the_arm_keys():
    from align_kit.experiment.compose import compose
    from align_kit.train import component_choices, run_identity

    cfg = compose(["sweep=clip_higher", "clip.eps_high=0.4", "seed=3"])
    identity = run_identity(cfg, component_choices(), GROUP, "clip.eps_high=0.4")
    assert identity.config["clip"]["eps_high"] == 0.4  # W&B shows it as the config key clip.eps_high
    assert identity.config["choice/clip"] == "clip_higher" and identity.config["choice/sweep"] == "clip_higher"
    assert identity.group == GROUP and "seed=3" in identity.tags
