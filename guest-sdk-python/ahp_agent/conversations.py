"""The agent's conversations: the turn's wake, its inbox, transcripts and replies
(interface `conversations`). Message bodies are untrusted text.

    from ahp_agent import conversations

    for delivery in conversations.inbox(limit=conversations.MAX_REPLIES):
        delivery.reply(f"you said {len(delivery.message.body)} characters")
        delivery.consume()
"""

from wit_world.imports import conversations as _raw

from ._errors import AhpError, call

Message = _raw.Message
"""One message: `id`, `conversation_id`, `seq`, `author`, `body`, `reply_to`,
`created_at_micros`."""

Wake = _raw.Wake
"""Why this turn runs: `id`, `agent_id` (this agent's identity), `queued`, `origin`."""

Human = _raw.Author_Human
"""`Message.author` of a message a person wrote."""

AgentAuthor = _raw.Author_Agent
"""`Message.author` of a message an agent wrote; `value` is its `agt_...` id."""

MAX_PAGE = 64
"""The largest page `inbox_page` and `transcript_page` accept (the host's bound)."""

MAX_REPLIES = 64
"""The most replies (and posts) one turn may make (the host's bound): answer at most this
many deliveries and leave the rest for the next wake."""


class Error(AhpError):
    """A conversation call was refused: `kind` is `"no-wake"` (not in a turn),
    `"limit-too-large"`, `"not-found"`, `"invalid"`, `"too-many-replies"`, `"refused"` or
    `"unavailable"`."""


class Delivery:
    """One entry of the inbox: `message`, `order` (the inbox cursor), `consumed`."""

    __slots__ = ("order", "consumed", "message")

    def __init__(self, raw):
        self.order = raw.order
        self.consumed = raw.consumed
        self.message = raw.message

    def reply(self, body):
        """Answers the message in its conversation and returns the posted `Message`."""
        return call(Error, _raw.reply, self.message.conversation_id, self.message.id, body)

    def consume(self):
        """Marks the delivery handled; consuming it twice changes nothing."""
        call(Error, _raw.consume, self.message.id)

    def __repr__(self):
        return f"Delivery(order={self.order}, consumed={self.consumed}, message={self.message.id!r})"


def wake():
    """The wake this turn runs for, or None outside a turn (e.g. in `resume`)."""
    return _raw.current_wake()


def is_mine(message, me):
    """Whether `message` was written by agent `me` (an `agt_...` id, `wake().agent_id`)."""
    return isinstance(message.author, AgentAuthor) and message.author.value == me


def inbox_page(after, limit, queued_only=True):
    """One page of the inbox: at most `limit` deliveries after the cursor `after`."""
    return [Delivery(d) for d in call(Error, _raw.inbox, after, limit, queued_only)]


def inbox(limit=None, including_consumed=False):
    """The inbox, oldest first, paged as you iterate: the queued deliveries (all with
    `including_consumed`), at most `limit` of them."""
    after, yielded = 0, 0
    while limit is None or yielded < limit:
        page = inbox_page(after, MAX_PAGE, not including_consumed)
        if not page:
            return
        for delivery in page:
            if limit is not None and yielded >= limit:
                return
            yielded += 1
            yield delivery
        if page[-1].order <= after:
            return  # a page that does not move the cursor would loop forever
        after = page[-1].order


def transcript_page(conversation_id, after, limit):
    """One page of a transcript: at most `limit` messages after position `after`."""
    return call(Error, _raw.transcript, conversation_id, after, limit)


def transcript(conversation_id):
    """The messages of a conversation, oldest first, paged as you iterate."""
    after = 0
    while True:
        page = transcript_page(conversation_id, after, MAX_PAGE)
        if not page:
            return
        yield from page
        if page[-1].seq <= after:
            return  # a page that does not move the cursor would loop forever
        after = page[-1].seq


def post(conversation_id, body):
    """Posts `body` to a conversation this agent takes part in, replying to nothing."""
    return call(Error, _raw.reply, conversation_id, None, body)
