"""Stage 2: build a zone's Ruleset from the model, and the compiled cache an event reads."""
