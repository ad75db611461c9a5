"""The data layer: upstream records parsed into mirror rows, written a page at a time."""
