"""tokrace's engine: events, clocks, providers, metrics, recordings and the race. No UI lives here."""

__version__ = "0.2.0"

if __name__ != "tokrace.providers":  # the folder is installed under tokrace's name; a bare `providers` would collide
    raise ImportError(f"import tokrace.providers, not {__name__} (install tokrace: pip install -e .)")
