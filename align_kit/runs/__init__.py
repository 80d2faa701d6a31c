"""The run and sweep lifecycle: run folders and their lock, the pre-flight, the sweep manifest and summary,
launchers, stop signals and the checks on the hydra tree."""
