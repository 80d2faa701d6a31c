"""Where a run's measurements go: the run folder (metrics.jsonl, summary.json) and W&B."""
