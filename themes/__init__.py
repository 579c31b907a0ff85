"""tokrace's colour themes: the built-in theme files (``builtin/*.toml``) and the loader that validates them
and turns them into Textual themes (``tokrace.themes.loader``)."""

if __name__ != "tokrace.themes":  # the folder is installed under tokrace's name; a bare `themes` would collide
    raise ImportError(f"import tokrace.themes, not {__name__} (install tokrace: pip install -e .)")
