"""Settings: the trainer's config, overrides and bounded YAML input."""
