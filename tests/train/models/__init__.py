"""Policy building, named models, LoRA, master weights."""
