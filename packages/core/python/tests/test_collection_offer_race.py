"""A node's copy channel that ends before the head has taken its offer (the node lost as it
connected): the head must not keep that dead channel as its copy. It did, when the channel's own
thread saw the end (``gone``) before the loop made the offer: the full frame went nowhere, no
``gone`` came again, and every write and read waited for an ack for ever, the next node's offer
left a mere candidate (core's collections test hung so under load, ~1 run in 100)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Dict, List

import worker_client  # noqa: F401  (puts the runtime on sys.path)
from skyward import peer_auth
from skyward.collection_channel import CopyChannel
from skyward.collection_link import AuthorityServer
from skyward.collection_replica import Replication
from skyward.collection_store import CollectionStore

TOKEN = b"t" * 32
JOB = "job-offer-race"


class OfferAfterEnd:
    """The head's store, whose first offer waits until that channel has ended: the order the race
    took, made certain."""

    def __init__(self, store: Replication) -> None:
        self._store = store
        self._ended = threading.Event()
        self._first = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)

    def gone(self, send: Any) -> None:
        self._store.gone(send)
        self._ended.set()

    def offer(self, send: Any, node: Any = None) -> None:
        if self._first:
            self._first = False
            assert self._ended.wait(10), "the first channel did not end"
        self._store.offer(send, node)


def test_a_channel_that_ended_before_its_offer_is_not_kept_as_the_copy() -> None:
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    store = Replication(CollectionStore(loop), loop)
    server = AuthorityServer(OfferAfterEnd(store), TOKEN, lambda: JOB, lambda line: None)  # type: ignore[arg-type]
    host, port = asyncio.run_coroutine_threadsafe(_listen(server), loop).result(10)
    # A node that connects as the copy, is welcomed, and is gone at once.
    peer_auth.connect_blocking(host, port, TOKEN, JOB, {"node": "0", "replica": True}, "node", 10).close()
    # The next node holds the copy for real (its replicate frames acked).
    copy = CopyChannel(TOKEN, lambda: JOB, lambda: 1, lambda frame: {"t": "acked", "seq": frame.get("seq")},
                       lambda line: None)
    copy.open(host, port, 10)
    try:
        answers: List[Any] = []
        done = threading.Event()

        def reply(answer: Any) -> None:
            answers.append(answer)
            done.set()

        loop.call_soon_threadsafe(
            lambda: store.apply("client-1", ["counter", "c", "increment", 1], reply, ("client", 1), threadsafe=True))
        assert done.wait(20), "the write was never answered: the head waits on a dead copy"
        assert answers == [("value", 1)]
    finally:
        copy.close()
        loop.call_soon_threadsafe(server.close)
        loop.call_soon_threadsafe(loop.stop)


async def _listen(server: AuthorityServer) -> Dict[str, Any]:
    return server.listen("127.0.0.1")
