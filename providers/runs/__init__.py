"""Layer 8, runs: headless sessions (bench's JSON), the screen's races and replays, and where they are recorded."""
