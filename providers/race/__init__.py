"""Layer 6, the race: lanes run one prompt concurrently; live lane state for the screen and the race summary;
calibration."""
