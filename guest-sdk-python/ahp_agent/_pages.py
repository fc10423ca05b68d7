"""Reading a host list a page at a time: the one generator behind every list of the SDK
(`conversations.inbox`, `conversations.transcript`, `delegation.tasks`, `snapshot.messages`).

The host serves a list in pages after a cursor; each list brings how to fetch the page after
a cursor and how a page moves the cursor.
"""


def pages(fetch, after, advance, limit=None, serve_repeated=True):
    """The entries of a list, in order, fetched a page at a time as you iterate:
    `fetch(after)` reads the page after the cursor `after` (the first page after the cursor
    given here), and `advance(after, page)` is the cursor of the page that follows `page`.

    The read ends at an empty page; at a page that does not move the cursor forward (served
    first or not as `serve_repeated` says: either way a host that repeats its page cannot
    loop the guest forever); after `limit` entries when given, with no page fetched past
    them; or with the error a fetch raises, which reaches the caller unchanged."""
    served = 0
    while limit is None or served < limit:
        page = fetch(after)
        if not page:
            return
        following = advance(after, page)
        repeated = after is not None and following <= after
        if repeated and not serve_repeated:
            return
        for entry in page:
            if limit is not None and served >= limit:
                return
            served += 1
            yield entry
        if repeated:
            return
        after = following
