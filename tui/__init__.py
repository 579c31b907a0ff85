"""tokrace's command line and screen: the command line apart from the Textual app, and the web server."""

if __name__ != "tokrace.tui":  # the folder is installed under tokrace's name; a bare `tui` would collide
    raise ImportError(f"import tokrace.tui, not {__name__} (install tokrace: pip install -e .)")
