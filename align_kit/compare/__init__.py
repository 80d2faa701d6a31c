"""`align-kit compare`: load runs (run folders, multirun sweeps or a W&B group), group them into arms by
what differs in their configs, aggregate over seeds, and write tables, figures and a markdown report."""


class CompareError(ValueError):
    """Nothing sensible to compare. The message names the problem and the fix."""
