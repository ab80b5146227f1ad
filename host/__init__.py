"""The host driver: training loop, precision policies, backends and the CLI."""
