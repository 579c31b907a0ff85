"""Layer 1, the model: the event vocabulary, a lane's event log, tiers, prices, messages, errors, presets, secrets and
token counting."""
