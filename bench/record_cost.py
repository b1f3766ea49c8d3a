"""What recording one exchange costs in CPU, on each side of the receipt journal.

    .venv/bin/python bench/record_cost.py [--exchanges 3000] [--batches 1,5,18,50,200]

The proxy bench (proxy_overhead.py) shows recording's cost under load, mixed with
everything else two shared cores do. This measures its two halves alone, in this process,
with the answer proxy_overhead.py's scripted upstream gives:

  serving side  ``Recorder.submit`` of a whole answer with the writer process on (the
                journal entry's JSON header and its ``os.write``), against building the
                exchange alone; one recorder, its writer process storing meanwhile
  writer side   ``record_writer.Writer.step`` over journal entries that arrive N at a time:
                reading them, building the rows, one SQLite transaction per step

Prints CPU microseconds per exchange (``time.process_time``: this process only, so the
writer process's own work is not in the serving-side figure). Figures go in
docs/performance.md; they are not test assertions.
"""

from __future__ import annotations

import argparse
import io
import json
import tempfile
import time
from pathlib import Path

from reef_cli.core.store.sqlite import SQLiteStore
from reef_cli.server import journal
from reef_cli.server.record_writer import Writer
from reef_cli.server.recorder import Exchange, Recorder, _bytes, _end, _meta

REQUEST = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hello there"}]})
ANSWER = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "hello from the scripted upstream"},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    }
).encode()


def exchange(n: int) -> Exchange:
    """An answered exchange, as the proxy has it when it submits."""
    ex = Exchange(
        id=f"rec_{n:024x}",
        scenario="default",
        release_id=None,
        client_dialect="openai",
        upstream_dialect="openai",
        request=REQUEST.encode(),
        session_header=None,
        request_json=json.loads(REQUEST),
    )
    ex.status = 200
    ex.ended = ex.started + 0.001
    ex.body = ANSWER
    return ex


def serving_side(exchanges: int) -> tuple[float, float]:
    """CPU µs per exchange in the serving process: building it alone, then building and
    submitting it to a recorder whose writer process stores it."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "records.sqlite3")
        recorder = Recorder(store, writer="process")
        recorder.start()
        try:
            figures = []
            for submit in (False, True):
                began = time.process_time()
                for n in range(exchanges):
                    ex = exchange(n + (exchanges if submit else 0))
                    if submit:
                        recorder.submit(ex)
                    if n % 20 == 19:
                        time.sleep(0.005)  # let the writer process take its batches
                figures.append(1e6 * (time.process_time() - began) / exchanges)
            recorder.flush(60)
        finally:
            recorder.stop()
            store.close()
    return figures[0], figures[1]


def writer_side(exchanges: int, batch: int) -> float:
    """CPU µs per exchange for the writer process's work, entries arriving ``batch`` at
    a time."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "journal"
        store = SQLiteStore(Path(tmp) / "records.sqlite3")
        log = journal.Journal(root)
        seg = log.current()
        assert seg is not None
        writer = Writer(store, root, io.StringIO())
        writer.command(f"seg {seg.path.name}")
        spent, n = 0.0, 0
        while n < exchanges:
            for _ in range(batch):
                ex = exchange(n)
                log.begin(seg)
                log.append(seg, {**_meta(ex, "X"), **_end(ex, "X")}, _bytes(ex.request), ANSWER)
                n += 1
            began = time.process_time()
            writer.step()
            spent += time.process_time() - began
        assert writer.written == n, f"stored {writer.written} of {n}"
        store.close()
    return 1e6 * spent / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--exchanges", type=int, default=3000)
    ap.add_argument("--batches", default="1,5,18,50,200", help="comma-separated batch sizes")
    args = ap.parse_args()
    built, submitted = serving_side(args.exchanges)
    print(f"serving side: {built:.1f} us to build an exchange; {submitted:.1f} us to build")
    print(f"  and submit it (the journal's share: {submitted - built:.1f} us)")
    for batch in (int(b) for b in args.batches.split(",")):
        print(f"writer side, batches of {batch:>4}: {writer_side(args.exchanges, batch):.1f} us")


if __name__ == "__main__":
    main()
