"""The training, SFT and evaluation loops end to end."""
