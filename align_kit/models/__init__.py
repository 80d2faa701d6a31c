"""Policy models: the embedded tiny models (built locally, warm-started, cached) and any HF causal LM."""
