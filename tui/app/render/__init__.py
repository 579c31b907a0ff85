"""Drawing below Textual's public API: the line compositor and the lines drawn straight through. Alone in touching
Textual's private internals."""
