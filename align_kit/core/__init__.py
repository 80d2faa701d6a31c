"""The kernel: the component base and registry, the trainer hook protocol, errors, run-file names and the
process and disk facts every layer shares. It imports nothing else of align_kit."""
