"""Rollout engines (sharpo_train/generation/): HF generate, vLLM."""
