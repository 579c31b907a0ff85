"""Layer 7, agent loops: what a scenario is, how a lane plays one, scenario files and the built-ins (a loop's
metrics are in :mod:`tokrace.providers.metrics.loop`)."""
