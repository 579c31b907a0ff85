"""tokrace's engine: events, clocks, providers, metrics, recordings and the race. No UI lives here."""

__version__ = "0.1.0"
