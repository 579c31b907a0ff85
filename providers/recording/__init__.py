"""Layer 3, recordings: JSON Lines sessions written as events happen and read back leniently."""
