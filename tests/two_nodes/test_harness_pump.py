"""Node 0's stdout is read on a thread of its own (``two_nodes_harness._pump``): a node writing more than a
pipe holds while the tier is busy elsewhere (running the probes, killing a node) must not block. Before, the
tier read the pipe only between events, so the drain's ``POST /drain`` timed out under load: vLLM's logging
blocked on the full pipe, and the probe endpoint's drain handler, which logs, with it. Needs no root."""
from __future__ import annotations

import queue
import subprocess
import sys
import threading

import two_nodes_harness as t

LOG_BYTES = 4 << 20  # many times a pipe's 64 KiB
WRITER = f"""
import sys
line = "x" * 1023 + "\\n"
for _ in range({LOG_BYTES} // 1024):
    sys.stdout.write(line)
print('(Worker_PP0_TP1 pid=1) {t.EVENT}{{"event": "step"}}')
print('{t.EVENT}{{"event": cut')
print('{t.EVENT}{{"event": "result", "tokens": [[1, 2]]}}')
"""


def test_a_node_writing_more_than_a_pipe_holds_ends_while_nobody_reads_the_events(tmp_path):
    node = subprocess.Popen([sys.executable, "-c", WRITER], stdout=subprocess.PIPE, text=True)
    events: queue.Queue = queue.Queue()
    reader = threading.Thread(target=t._pump, args=(node.stdout, tmp_path / "node0.log", events), daemon=True)
    reader.start()
    try:
        exit_code = node.wait(timeout=120)  # nobody has taken an event yet: only the thread drains the pipe
    finally:
        node.kill()
    reader.join(timeout=120)
    assert exit_code == 0 and not reader.is_alive()
    got = []
    while (event := events.get_nowait()) is not None:
        got.append(event)
    assert got == [{"event": "step"}, {"event": "result", "tokens": [[1, 2]]}]  # the cut one is skipped
    log = (tmp_path / "node0.log").read_text()
    assert len(log) > LOG_BYTES and log.endswith('"tokens": [[1, 2]]}\n')  # every line kept, the cut one too
    assert '{"event": cut' in log
