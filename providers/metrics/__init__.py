"""Layer 3, metrics: a turn's figures and a whole loop's, as pure functions of events."""
