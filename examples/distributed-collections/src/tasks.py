"""Workers that drain a queue the client feeds, count their progress, skip duplicates, wait for each
other at a barrier and take turns at a lock — the Python project's collection API."""

import skyward as sky


def crawl(epochs):
    work = sky.queue("urls")
    seen = sky.set("seen")
    fetched = sky.counter("fetched")
    pages = sky.dict("pages")
    epoch = sky.barrier("epoch", n=4)  # 2 nodes x 2 workers: every task of the run
    info = sky.instance_info()
    done = []
    for round_ in range(epochs):
        while True:
            url = work.get(timeout=60)  # the client puts one None per worker to end each epoch
            if url is None:
                break
            if not seen.add(url):  # add answers whether it was new: another worker has it
                continue
            pages[url] = {"node": info.node, "epoch": round_, "length": len(url) * 100}
            fetched.increment()
            done.append(url)
        with sky.lock("report"):  # one writer at a time
            sky.counter("reports").increment()
        epoch.wait()  # nobody starts the next epoch before every worker finished this one
        # (so each worker takes exactly one of the epoch's four end markers)
    return {"node": info.node, "worker": info.worker, "fetched": done}

