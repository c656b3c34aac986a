"""The verbs, one module per family: ``writing`` (apply, unapply, recover, forget: under the root's
lock), ``reading`` (check, status, diff: write nothing), ``proving`` (the run-time proof of an applied
spec: verify), ``stale`` (records an upgrade made stale, dropped as apply sees them)."""
