"""The built-in scenarios, one TOML file each (loaded by :mod:`tokrace.providers.loop.scenario_file`)."""
