"""Reward functions; each is a Hydra node in the `reward` group with its own weight."""
