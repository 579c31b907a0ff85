"""The built-in scenarios, one TOML file each (loaded by :mod:`providers.loop.scenario_file`)."""
