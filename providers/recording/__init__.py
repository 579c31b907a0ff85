"""Layer 3, recordings: JSON Lines sessions written as events happen and read back leniently."""

from .format import FORMAT, VERSION, RecordingError
from .paths import RecordingInfo, default_path, list_recordings, recordings_dir
from .reader import Recording, read_header, read_recording
from .writer import Recorder, event_line, secret_values

__all__ = [
    "FORMAT",
    "VERSION",
    "Recorder",
    "Recording",
    "RecordingError",
    "RecordingInfo",
    "default_path",
    "event_line",
    "list_recordings",
    "read_header",
    "read_recording",
    "recordings_dir",
    "secret_values",
]
