# SPDX-License-Identifier: Apache-2.0
"""Each pipeline stage's readiness, served for an orchestrator's probes (``probe.py``).

A replica split across nodes is ready only when every stage is: each node's first rank
(tensor-parallel rank 0 of its stage) serves a small HTTP endpoint on
``VLLM_PP_PROBE_PORT`` (off when unset) once its stage has shaken hands with its
neighbours: at start-up on vLLM's own runners, after warm-up on the HPU runner
(``handshake.py``, ``runner.py``). ``GET /ready`` answers 200 while the stage serves,
503 while it starts or drains, with the stage's number and state; ``GET /live`` 200
while the process serves at all (a liveness probe must not kill a draining stage);
``POST /drain`` makes it drain (it stays 503).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from . import envs
from ._logging import get_logger

__all__ = ["DRAINING", "READY", "STARTING", "serve_stage", "stage_state"]

logger = get_logger(__name__)

STARTING, READY, DRAINING = "starting", "ready", "draining"
_STATE: dict[str, Any] = {}
_SERVER: list[ThreadingHTTPServer] = []
_LOCK = threading.Lock()


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        state = stage_state()
        if self.path == "/live":  # the process serves, whatever its state
            self._answer(200, state)
        elif self.path == "/ready":
            self._answer(200 if state["state"] == READY else 503, state)
        else:
            self._answer(404, {"error": f"no {self.path}"})

    def do_POST(self) -> None:  # noqa: N802
        if self.path != "/drain":
            self._answer(404, {"error": f"no {self.path}"})
            return
        with _LOCK:
            _STATE["state"] = DRAINING
        logger.info("pipeline stage %s: draining", _STATE.get("stage"))
        self._answer(200, stage_state())

    def _answer(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:  # probes come often
        return


def stage_state() -> dict[str, Any]:
    """This process's stage, the pipeline size and its state."""
    with _LOCK:
        return dict(_STATE)


def serve_stage(stage: int, stages: int, ready: bool) -> None:
    """Record this stage's state (``ready``: its last handshake passed, else it is
    starting) and, on a node's first call with ``VLLM_PP_PROBE_PORT`` set, serve it."""
    with _LOCK:
        if _STATE.get("state") != DRAINING:
            state = READY if ready else STARTING
            _STATE.update(stage=stage, stages=stages, state=state)
    port = envs.VLLM_PP_PROBE_PORT
    if port is None or _SERVER:
        return
    server = ThreadingHTTPServer((envs.VLLM_PP_PROBE_HOST, port), _Handler)
    server.daemon_threads = True
    _SERVER.append(server)
    threading.Thread(
        target=server.serve_forever, name="pipeline-probe", daemon=True
    ).start()
    logger.info(
        "pipeline stage %d of %d: probe on %s:%d", stage, stages, *server.server_address
    )
