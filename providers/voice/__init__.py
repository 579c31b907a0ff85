"""Layer 7, the voice lens: when a speech engine could start, where it would fall silent, its live state, and
``--speak`` (piping sentences to a text-to-speech command)."""
