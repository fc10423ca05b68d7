"""The agent's conversations: the turn's wake, its inbox, transcripts and replies
(interface `conversations`). Message bodies are untrusted text.

A reply consumes the delivery it answers in its own commit: once answered, a message is never
queued again, whatever crashes when. `answer` is the answering loop, written once: it answers
each delivery with what your function returns and, for a message your function keeps failing
on (a model call that always times out, say), answers with a short failure notice after
`DEFAULT_MAX_TRIES` tries, so one bad message never keeps the agent from the next.

    from ahp_agent import conversations

    conversations.answer(lambda d: f"you said {len(d.message.body)} characters")
"""

from wit_world.imports import conversations as _raw

from ._errors import AhpError, call
from ._pages import pages

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
        """Answers the message in its conversation and returns the posted `Message`; the
        reply consumes the delivery (and this turn's earlier consumes) in its own commit."""
        return call(Error, _raw.reply, self.message.conversation_id, self.message.id, body)

    def consume(self):
        """Marks the delivery handled; consuming it twice changes nothing (a reply consumes
        it already). Recorded with this turn's next reply or its end."""
        call(Error, _raw.consume, self.message.id)

    def tries(self):
        """How many turns before this one read the delivery while it was queued and ended
        with it still queued: the agent's failed tries at it."""
        return call(Error, _raw.tries, self.message.id)

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
    return pages(
        lambda after: inbox_page(after, MAX_PAGE, not including_consumed),
        0,
        lambda after, page: page[-1].order,
        limit,
    )


def transcript_page(conversation_id, after, limit):
    """One page of a transcript: at most `limit` messages after position `after`."""
    return call(Error, _raw.transcript, conversation_id, after, limit)


def transcript(conversation_id):
    """The messages of a conversation, oldest first, paged as you iterate."""
    return pages(
        lambda after: transcript_page(conversation_id, after, MAX_PAGE),
        0,
        lambda after, page: page[-1].seq,
    )


def post(conversation_id, body):
    """Posts `body` to a conversation this agent takes part in, replying to nothing."""
    return call(Error, _raw.reply, conversation_id, None, body)


DEFAULT_MAX_TRIES = 2
"""How many tries `answer` gives a delivery before it answers it with a failure notice: the
first, and one more at the agent's next wake (a provider's passing fault)."""

MAX_NOTICE_REASON_BYTES = 200
"""Longest reason a failure notice quotes, in bytes (UTF-8)."""


def default_notice(why):
    """The default failure notice."""
    return f"Sorry, I could not answer this message: {why}"


class Answered:
    """What `answer` did: `answered`, `gave_up` (answered with the failure notice), `left`
    (failed, queued for another try at the next wake), `unanswerable` (consumed: its
    conversation refused a reply)."""

    __slots__ = ("answered", "gave_up", "left", "unanswerable")

    def __init__(self):
        self.answered = self.gave_up = self.left = self.unanswerable = 0

    def __repr__(self):
        return (
            f"Answered(answered={self.answered}, gave_up={self.gave_up}, "
            f"left={self.left}, unanswerable={self.unanswerable})"
        )


def _reason(why):
    data = str(why).encode("utf-8")[:MAX_NOTICE_REASON_BYTES]
    return data.decode("utf-8", errors="ignore")


def answer(respond, max_tries=DEFAULT_MAX_TRIES, notice=default_notice):
    """Answers the queued deliveries, oldest first, at most `MAX_REPLIES`: each with the text
    `respond(delivery)` returns. When `respond` raises (or returns an empty text) on a delivery
    already tried `max_tries - 1` times, it is answered with `notice(why)`; before that it
    stays queued for the next wake and the loop goes on with the next delivery. A delivery
    tried `max_tries` times already gets the notice without another try. The inbox is read
    one delivery at a time, so a turn cut short counts a try only for the delivery it was on.
    Returns an `Answered`; raises `Error` for a read or reply the host could not make."""
    max_tries = max(1, int(max_tries))
    done = Answered()
    after = 0
    while done.answered + done.gave_up < MAX_REPLIES:
        page = inbox_page(after, 1, True)
        if not page:
            break
        delivery = page[0]
        after = delivery.order
        tries = delivery.tries()
        text, why = None, None
        if tries >= max_tries:
            why = f"tried {tries} times"
        else:
            try:
                text = respond(delivery)
                if not text:
                    text, why = None, "the answer was empty"
            except Exception as e:  # noqa: BLE001 - any failure of the author's code is a try
                why = e
        if text is None:
            if tries + 1 < max_tries:
                done.left += 1
                continue
            text = notice(_reason(why)) or default_notice(_reason(why))
            gave_up = True
        else:
            gave_up = False
        try:
            delivery.reply(text)
        except Error as e:
            if e.kind in ("refused", "not-found"):
                delivery.consume()
                done.unanswerable += 1
                continue
            if e.kind != "invalid":
                raise
            delivery.reply(notice(_reason(e)) or default_notice(_reason(e)))
            gave_up = True
        if gave_up:
            done.gave_up += 1
        else:
            done.answered += 1
    return done
