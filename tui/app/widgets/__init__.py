"""The widgets of the race screen: small, each drawing one thing from the live model it is given."""
