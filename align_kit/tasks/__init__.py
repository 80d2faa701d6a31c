"""Dataset builders. Every task yields `prompt`, the answer column and a `domain` column."""
