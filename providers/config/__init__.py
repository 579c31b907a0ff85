"""Layer 5, configuration: TOML checked in one place and turned into tiers, and the built-in demo tiers."""
