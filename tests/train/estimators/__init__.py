"""The credit estimators (GRPO, SHARPO and the field's methods) and their registry."""
