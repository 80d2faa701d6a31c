"""The monitor in other frameworks' trainers: `align_kit.integrations.trl.HealthCallback` for a plain
`trl.GRPOTrainer`. Needs no Hydra and no align_kit config; imports only the monitor, tracking and core."""
