"""The web viewer, tested in a real headless Chromium against a real `turnstore serve`."""
