"""The audit recipe: its declared configuration, the release policy, the pipeline (split, attack, score,
calibrate, certify), the result types it produces and the stress tests."""
