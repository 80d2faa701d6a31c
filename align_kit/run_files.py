"""The files every run folder holds, by name: written by training, read by resume, sweeps and compare."""

CONFIG_FILE = "config.yaml"  # the resolved config the run used
METRICS_FILE = "metrics.jsonl"  # one JSON object per logged step
SUMMARY_FILE = "summary.json"  # written when the run ends: final metrics, the policy, wall time
