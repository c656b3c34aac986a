"""Makes the checkout importable for a bare ``pytest`` (pytest puts this file's directory on sys.path)."""
