"""`align-kit doctor`: the health monitor's rules replayed over any GRPO run's logged history (align_kit, TRL,
verl, OpenRLHF, W&B, or a CSV/JSONL with a key map), with a verdict, a timeline, figures and advice in the run's
own framework's terms."""
