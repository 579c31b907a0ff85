"""The screens of the app: the race (live and replay), a lane's details, help."""
