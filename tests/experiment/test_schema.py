"""The schema of TRL's GRPOConfig read from its source: each annotation becomes the kinds and choices it allows."""

from __future__ import annotations

import ast

import pytest

from align_kit.experiment.schema import kind_of_annotation


@pytest.mark.parametrize(
    ("annotation", "types", "choice"),
    [
        ("int | None", {"int", "none"}, None),
        ("SchedulerType | str", {"str"}, "cosine"),
        ("OptimizerNames | str", {"str"}, "adamw_torch"),
        ("dict[str, Any] | str | None", {"dict", "str", "none"}, None),
        ("list[float] | None", {"list", "none"}, None),
        ("Optional[int]", {"int", "none"}, None),
        ("Literal['a', 'b']", {"str"}, "a"),
        ("ParallelismConfig | None", {"any", "none"}, None),
    ],
)
def test_annotations_from_trls_source_become_kinds(annotation, types, choice):
    kind = kind_of_annotation(ast.parse(annotation, mode="eval").body)
    assert set(kind.types) == types
    assert (choice in kind.choices) if choice else kind.choices is None
