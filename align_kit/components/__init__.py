"""Hydra-selectable stability components (one module per concept)."""
