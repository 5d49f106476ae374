"""Environments: ALFWorld, WebShop, corridor, the registry and the shared prompt pieces."""
