"""Tests of sharpo_train, one folder per room of the package."""
