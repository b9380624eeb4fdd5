"""Stage 1: read and validate the YAML configuration into the model."""
