"""Validated accelerator configurations, presets and artefact generators."""
