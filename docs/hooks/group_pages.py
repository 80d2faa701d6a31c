"""MkDocs hook: the "Config groups" section of the nav lists docs/groups/<group>.md in the order of
conf/train.yaml's defaults list, so a new group's page joins the site without an edit to mkdocs.yml.

A page under docs/groups/ that names no group of the defaults list (a group a config adds) follows them, by name.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

DOCS = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(DOCS.parent))  # the checkout being built, as docs/hooks/reference.py reads it
from align_kit import CONF_DIR  # noqa: E402  (after the path above)

TRAIN = CONF_DIR / "train.yaml"
SECTION = "Config groups"


def group_order() -> list[str]:
    defaults = yaml.safe_load(TRAIN.read_text())["defaults"]
    return [next(iter(entry)) for entry in defaults if isinstance(entry, dict)]


def group_pages() -> list:
    pages = {path.stem: f"groups/{path.name}" for path in sorted((DOCS / "groups").glob("*.md"))}
    overview = pages.pop("index")
    ordered = [group for group in group_order() if group in pages]
    ordered += sorted(set(pages) - set(ordered))
    return [overview, *({group: pages[group]} for group in ordered)]


def on_config(config, **kwargs):
    for entry in config["nav"]:
        if isinstance(entry, dict) and SECTION in entry:
            entry[SECTION] = group_pages()
            return config
    raise ValueError(f"mkdocs.yml's nav has no {SECTION!r} section for docs/hooks/group_pages.py to fill")
