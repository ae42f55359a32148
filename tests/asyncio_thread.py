"""Run a coroutine to its end from a synchronous test.

``asyncio.run`` refuses to start inside a running event loop, and a browser test earlier in
the same process leaves Playwright's loop running in the main thread; so the coroutine runs
in a thread of its own, with a loop of its own.
"""

import asyncio
from concurrent.futures import ThreadPoolExecutor


def run_coroutine(coro):
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, coro).result()
