"""From a composed config to a checked experiment plan: Hydra composition, the schema walker, the plan and
its generic rules, the GRPOConfig facts they rely on."""
