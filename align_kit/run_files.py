"""The files every run folder holds, by name: written by training, read by resume, sweeps and compare."""

from pathlib import Path

CONFIG_FILE = "config.yaml"  # the resolved config the run used
METRICS_FILE = "metrics.jsonl"  # one JSON object per logged step
SUMMARY_FILE = "summary.json"  # written when the run ends: final metrics, the policy, wall time


def unused_name(path: Path) -> Path:
    """`path`, or `path-2`, `path-3`, ... : the first that does not exist, for a folder moved aside (nothing is
    ever renamed onto something that exists)."""
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}-{number}")
    return candidate
