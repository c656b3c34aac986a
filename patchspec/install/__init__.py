"""The install layer: the root being patched, what pip installed under it, the state record and the
journaled writer that alone touches target files."""
