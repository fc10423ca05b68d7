//! The agent's conversations: what a [`turn`](crate::Agent::turn) reads and answers.
//!
//! Once its transfer is active, the agent is a participant in the host's conversations. Each
//! message posted to it lands in its inbox as a [`Delivery`], and the host runs one turn per
//! [`Wake`]; messages that arrive in a burst share a wake, so a turn reads its whole
//! [`inbox`], answers with [`Delivery::reply`] (which consumes the delivery in the reply's own
//! commit: once answered, a message is never queued again, whatever crashes when) and marks
//! what else it handled with [`Delivery::consume`]. Deliveries a turn leaves unconsumed stay
//! queued for the next one, each counting one more of its [`tries`](Delivery::tries).
//!
//! [`answer`] is that loop, written once: it answers each delivery with what your closure
//! returns and, for a message your closure keeps failing on (a model call that always times
//! out, say), answers with a short failure notice after [`DEFAULT_MAX_TRIES`] tries
//! ([`Answering`] sets another bound), so one bad message never keeps the agent from the next.
//!
//! [`inbox`] and [`transcript`] page through the host for you ([`MAX_PAGE`] at a time) and
//! yield `Result`s, like [`std::fs::read_dir`]: outside a turn, or when the host cannot read
//! its database, the first item is the error and the iteration ends.
//!
//! A reply is identified by the wake and its index among the turn's replies, so a turn the
//! host ever runs again for the same wake never posts twice; one wake allows at most
//! [`MAX_REPLIES`] ([`Error::TooManyReplies`]). Message bodies are untrusted text, written by
//! whoever posted them.
//!
//! ```no_run
//! use ahp_guest::conversations;
//!
//! let answered = conversations::answer(|delivery| {
//!     let question = &delivery.message().body;
//!     Ok::<_, String>(format!("you said {} bytes", question.len()))
//! })?;
//! println!("{} answered, {} given up", answered.answered, answered.gave_up);
//! # Ok::<(), conversations::Error>(())
//! ```

use crate::pages::{Pages, RepeatedPage, after_last_key};
use crate::wit::ahp::agent::conversations as raw;

pub use raw::{Author, Message, Wake, WakeOrigin};

/// The largest page [`inbox_page`] and [`transcript_page`] accept (the host's bound).
pub const MAX_PAGE: u32 = 64;

/// The most replies (and posts) one turn may make (the host's bound): a turn that finds more
/// deliveries queued answers this many and leaves the rest for the next wake, rather than fail
/// on [`Error::TooManyReplies`].
pub const MAX_REPLIES: usize = 64;

/// Why a conversation call was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// Not inside a conversation turn (e.g. during `resume`): there is no wake to read for or
    /// reply under.
    NoWake,
    /// The page asked for is larger than the host serves; the payload is the largest allowed.
    LimitTooLarge(u32),
    /// No such conversation or message, or this agent does not take part in it.
    NotFound,
    /// An argument is malformed (an id, an empty or too large body); the payload says which
    /// rule it broke.
    Invalid(String),
    /// This turn already made as many replies as one wake may; the payload is that bound.
    TooManyReplies(u32),
    /// The conversation refused the operation (e.g. it is closed); the payload says why.
    Refused(String),
    /// The host could not read or write its database.
    Unavailable(String),
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NoWake => f.write_str("not in a conversation turn: there is no wake to read for or reply under"),
            Self::LimitTooLarge(max) => write!(f, "a conversation page may hold at most {max} entries"),
            Self::NotFound => f.write_str("no such conversation or message, or this agent does not take part in it"),
            Self::Invalid(why) => write!(f, "invalid argument: {why}"),
            Self::TooManyReplies(max) => write!(f, "this turn already made {max} replies, the most one wake allows"),
            Self::Refused(why) => write!(f, "the conversation refused: {why}"),
            Self::Unavailable(why) => write!(f, "conversations are unavailable: {why}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<raw::Error> for Error {
    fn from(e: raw::Error) -> Self {
        match e {
            raw::Error::NoWake => Self::NoWake,
            raw::Error::LimitTooLarge(max) => Self::LimitTooLarge(max),
            raw::Error::NotFound => Self::NotFound,
            raw::Error::Invalid(why) => Self::Invalid(why),
            raw::Error::TooManyReplies(max) => Self::TooManyReplies(max),
            raw::Error::Refused(why) => Self::Refused(why),
            raw::Error::Unavailable(why) => Self::Unavailable(why),
        }
    }
}

/// One entry of the agent's inbox: a message delivered to it.
#[derive(Debug, Clone)]
pub struct Delivery {
    order: u64,
    consumed: bool,
    message: Message,
}

impl Delivery {
    /// The message delivered.
    pub fn message(&self) -> &Message {
        &self.message
    }

    /// The inbox cursor: strictly increasing in the order deliveries were made.
    pub fn order(&self) -> u64 {
        self.order
    }

    /// Whether the agent had already consumed it when the inbox was read.
    pub fn is_consumed(&self) -> bool {
        self.consumed
    }

    /// Answers the message: posts `body` as this agent in its conversation, replying to it,
    /// and returns the posted message. The reply consumes the delivery (and the consumes this
    /// turn made before it) in its own commit.
    ///
    /// # Errors
    ///
    /// [`Error::NoWake`] outside a turn, [`Error::Invalid`] for an empty or too large body
    /// (above 64 KiB), [`Error::TooManyReplies`] past the wake's bound, [`Error::Refused`] if
    /// the conversation is closed, [`Error::Unavailable`].
    pub fn reply(&self, body: &str) -> Result<Message, Error> {
        Ok(raw::reply(&self.message.conversation_id, Some(&self.message.id), body)?)
    }

    /// Marks the delivery handled, so no later turn sees it queued. Consuming it twice changes
    /// nothing; a [`reply`](Self::reply) consumes it already. The host records it with this
    /// turn's next reply or its end, whichever commits first; this turn's later inbox reads
    /// already see it consumed.
    ///
    /// # Errors
    ///
    /// [`Error::NoWake`] outside a turn, [`Error::Unavailable`].
    pub fn consume(&self) -> Result<(), Error> {
        Ok(raw::consume(&self.message.id)?)
    }
}

impl Delivery {
    /// How many turns before this one read the delivery while it was queued and ended with it
    /// still queued: the agent's failed tries at it.
    ///
    /// # Errors
    ///
    /// [`Error::NoWake`] outside a turn, [`Error::Refused`] past the turn's bound on reads,
    /// [`Error::Unavailable`].
    pub fn tries(&self) -> Result<u32, Error> {
        Ok(raw::tries(&self.message.id)?)
    }
}

impl From<raw::Delivery> for Delivery {
    fn from(d: raw::Delivery) -> Self {
        Self {
            order: d.order,
            consumed: d.consumed,
            message: d.message,
        }
    }
}

/// Why this turn runs, or `None` outside a turn (during `resume`).
pub fn wake() -> Option<Wake> {
    raw::current_wake()
}

/// The deliveries queued in the inbox, oldest first, fetched [`MAX_PAGE`] at a time as the
/// iterator advances; [`Inbox::including_consumed`] reads the consumed ones too.
///
/// ```no_run
/// use ahp_guest::conversations::{self, Error};
///
/// match conversations::inbox().collect::<Result<Vec<_>, _>>() {
///     Ok(queued) => println!("{} messages wait", queued.len()),
///     Err(Error::NoWake) => println!("not in a turn"),
///     Err(e) => eprintln!("inbox unreadable: {e}"),
/// }
/// ```
pub fn inbox() -> Inbox {
    Inbox {
        queued_only: true,
        pages: Pages::new(0, |after, page| {
            after_last_key(after, page.last().map(Delivery::order), RepeatedPage::Served)
        }),
    }
}

/// Every message of conversation `conversation_id`, oldest first, fetched [`MAX_PAGE`] at a
/// time as the iterator advances.
///
/// ```no_run
/// use ahp_guest::conversations;
///
/// for delivery in conversations::inbox() {
///     let delivery = delivery?;
///     let earlier = conversations::transcript(&delivery.message().conversation_id).count();
///     delivery.reply(&format!("message {earlier} of our conversation"))?;
/// }
/// # Ok::<(), conversations::Error>(())
/// ```
pub fn transcript(conversation_id: &str) -> Transcript {
    Transcript {
        conversation_id: conversation_id.to_owned(),
        pages: Pages::new(0, |after, page| {
            after_last_key(after, page.last().map(|m| m.seq), RepeatedPage::Served)
        }),
    }
}

/// Posts `body` to `conversation_id` as this agent, answering no message in particular, and
/// returns the posted message. To answer a delivery use [`Delivery::reply`].
///
/// # Errors
///
/// As [`Delivery::reply`], and [`Error::NotFound`] for a conversation this agent does not take
/// part in.
///
/// ```no_run
/// use ahp_guest::conversations::{self, Error};
///
/// match conversations::post("cv_0123", "the weekly forecast is ready") {
///     Ok(message) => println!("posted as #{}", message.seq),
///     Err(Error::Refused(why)) => eprintln!("the conversation is closed: {why}"),
///     Err(e) => eprintln!("not posted: {e}"),
/// }
/// ```
pub fn post(conversation_id: &str, body: &str) -> Result<Message, Error> {
    Ok(raw::reply(conversation_id, None, body)?)
}

/// Posts `body` to `conversation_id` as this agent, answering message `message_id` of that
/// conversation, and returns the posted message: for an answer a later turn gives to a message
/// an earlier turn consumed (kept in the [`checkpoint`](crate::checkpoint)). To answer a
/// delivery of this turn use [`Delivery::reply`].
///
/// # Errors
///
/// As [`post`], and [`Error::NotFound`] for a message that is not in that conversation.
///
/// ```no_run
/// use ahp_guest::conversations;
///
/// // Saved by the turn that read the question.
/// let (conversation, question) = ("cv_0123", "msg_0456");
/// conversations::reply_to(conversation, question, "here is the answer")?;
/// # Ok::<(), conversations::Error>(())
/// ```
pub fn reply_to(conversation_id: &str, message_id: &str, body: &str) -> Result<Message, Error> {
    Ok(raw::reply(conversation_id, Some(message_id), body)?)
}

/// Marks the delivery of message `message_id` in this agent's inbox handled: for a message an
/// earlier turn read (kept in the [`checkpoint`](crate::checkpoint)). To consume a delivery of
/// this turn use [`Delivery::consume`].
///
/// # Errors
///
/// [`Error::NotFound`] for a message not delivered to this agent, [`Error::NoWake`] outside a
/// turn, [`Error::Refused`] past the turn's bound on consumes, [`Error::Unavailable`].
pub fn consume(message_id: &str) -> Result<(), Error> {
    Ok(raw::consume(message_id)?)
}

/// How many tries [`answer`] gives a delivery before it answers it with a failure notice: the
/// first, and one more at the agent's next wake (a provider's passing fault).
pub const DEFAULT_MAX_TRIES: u32 = 2;

/// Longest reason a failure notice quotes, in bytes.
pub const MAX_NOTICE_REASON_BYTES: usize = 200;

/// What [`answer`] did with the inbox.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Answered {
    /// Deliveries answered with what the closure returned.
    pub answered: u32,
    /// Deliveries answered with a failure notice: tried the most times allowed.
    pub gave_up: u32,
    /// Deliveries the closure failed on that stay queued for another try at the next wake.
    pub left: u32,
    /// Deliveries consumed without an answer because their conversation refused one (it was
    /// closed, or the agent left it).
    pub unanswerable: u32,
}

/// The answering loop, configured: how many tries a delivery gets and what the failure notice
/// says. [`answer`] is `Answering::default().run`.
///
/// ```no_run
/// use ahp_guest::conversations::Answering;
///
/// Answering::default()
///     .max_tries(3)
///     .notice(|why| format!("I could not answer that ({why}); please ask again later."))
///     .run(|delivery| Ok::<_, String>(delivery.message().body.to_uppercase()))?;
/// # Ok::<(), ahp_guest::conversations::Error>(())
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Answering {
    max_tries: u32,
    notice: fn(&str) -> String,
}

impl Default for Answering {
    fn default() -> Self {
        Self {
            max_tries: DEFAULT_MAX_TRIES,
            notice: default_notice,
        }
    }
}

/// The default failure notice.
fn default_notice(why: &str) -> String {
    format!("Sorry, I could not answer this message: {why}")
}

impl Answering {
    /// Tries each delivery at most `tries` times (at least once) before the failure notice.
    pub fn max_tries(mut self, tries: u32) -> Self {
        self.max_tries = tries.max(1);
        self
    }

    /// The failure notice, given why the last try failed (at most
    /// [`MAX_NOTICE_REASON_BYTES`]). An empty notice is replaced by the default one.
    pub fn notice(mut self, notice: fn(&str) -> String) -> Self {
        self.notice = notice;
        self
    }

    /// Answers the queued deliveries, oldest first, at most [`MAX_REPLIES`]: each is answered
    /// with what `answer` returns for it. When `answer` fails (or returns an empty text) on a
    /// delivery already tried [`max_tries`](Self::max_tries) − 1 times, it is answered with the
    /// failure notice; before that it stays queued for the next wake and the loop goes on with
    /// the next delivery. A delivery tried that many times already (its turns failed or were
    /// cut while on it) gets the notice without another try. The inbox is read one delivery
    /// at a time, so a turn cut short counts a try only for the delivery it was on.
    ///
    /// # Errors
    ///
    /// A read or a reply the host could not make ([`Error::Unavailable`], [`Error::NoWake`],
    /// [`Error::TooManyReplies`]): what was answered before stays answered.
    pub fn run<E: std::fmt::Display>(
        &self,
        mut answer: impl FnMut(&Delivery) -> Result<String, E>,
    ) -> Result<Answered, Error> {
        let mut done = Answered::default();
        let mut after = 0;
        while ((done.answered + done.gave_up) as usize) < MAX_REPLIES {
            let Some(delivery) = inbox_page(after, 1, true)?.pop() else {
                break;
            };
            after = delivery.order();
            let tries = delivery.tries()?;
            let outcome = if tries >= self.max_tries {
                Err(format!("tried {tries} times"))
            } else {
                match answer(&delivery) {
                    Ok(text) if !text.is_empty() => Ok(text),
                    Ok(_) => Err("the answer was empty".to_owned()),
                    Err(e) => Err(e.to_string()),
                }
            };
            let (body, gave_up) = match outcome {
                Ok(text) => (text, false),
                Err(_) if tries + 1 < self.max_tries => {
                    done.left += 1;
                    continue;
                }
                Err(why) => (self.notice_for(&why), true),
            };
            match delivery.reply(&body) {
                Ok(_) if gave_up => done.gave_up += 1,
                Ok(_) => done.answered += 1,
                Err(Error::Refused(_) | Error::NotFound) => {
                    delivery.consume()?;
                    done.unanswerable += 1;
                }
                Err(Error::Invalid(why)) => {
                    // The answer itself was refused (too large, say): the notice instead.
                    delivery.reply(&self.notice_for(&why))?;
                    done.gave_up += 1;
                }
                Err(e) => return Err(e),
            }
        }
        Ok(done)
    }

    fn notice_for(&self, why: &str) -> String {
        let why = truncated(why, MAX_NOTICE_REASON_BYTES);
        let notice = (self.notice)(why);
        if notice.is_empty() { default_notice(why) } else { notice }
    }
}

/// Answers the queued deliveries with what `answer` returns for each, giving up on a delivery
/// after [`DEFAULT_MAX_TRIES`] failed tries with a short failure notice: see
/// [`Answering::run`].
///
/// # Errors
///
/// As [`Answering::run`].
pub fn answer<E: std::fmt::Display>(answer: impl FnMut(&Delivery) -> Result<String, E>) -> Result<Answered, Error> {
    Answering::default().run(answer)
}

/// `s` cut to at most `max` bytes at a character boundary.
fn truncated(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// One page of the inbox: at most `limit` deliveries after the cursor `after` (exclusive; 0
/// starts at the beginning), with `queued_only` skipping the consumed ones.
///
/// # Errors
///
/// [`Error::LimitTooLarge`] above [`MAX_PAGE`], [`Error::NoWake`] outside a turn,
/// [`Error::Unavailable`].
pub fn inbox_page(after: u64, limit: u32, queued_only: bool) -> Result<Vec<Delivery>, Error> {
    Ok(raw::inbox(after, limit, queued_only)?
        .into_iter()
        .map(Delivery::from)
        .collect())
}

/// One page of a transcript: at most `limit` messages after position `after` (exclusive; 0
/// starts at the beginning).
///
/// # Errors
///
/// [`Error::LimitTooLarge`] above [`MAX_PAGE`], [`Error::NotFound`], [`Error::NoWake`] outside
/// a turn, [`Error::Unavailable`].
pub fn transcript_page(conversation_id: &str, after: u64, limit: u32) -> Result<Vec<Message>, Error> {
    Ok(raw::transcript(conversation_id, after, limit)?)
}

/// The iterator [`inbox`] returns.
#[derive(Debug)]
pub struct Inbox {
    queued_only: bool,
    pages: Pages<Delivery, u64>,
}

impl Inbox {
    /// Reads consumed deliveries too, not only the queued ones.
    pub fn including_consumed(mut self) -> Self {
        self.queued_only = false;
        self
    }
}

impl Iterator for Inbox {
    type Item = Result<Delivery, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let queued_only = self.queued_only;
        self.pages.next(|&after| inbox_page(after, MAX_PAGE, queued_only))
    }
}

/// The iterator [`transcript`] returns.
#[derive(Debug)]
pub struct Transcript {
    conversation_id: String,
    pages: Pages<Message, u64>,
}

impl Iterator for Transcript {
    type Item = Result<Message, Error>;

    fn next(&mut self) -> Option<Self::Item> {
        let id = &self.conversation_id;
        self.pages.next(|&after| transcript_page(id, after, MAX_PAGE))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_says_what_went_wrong() {
        let cases = [
            (
                raw::Error::NoWake,
                "not in a conversation turn: there is no wake to read for or reply under",
            ),
            (
                raw::Error::LimitTooLarge(64),
                "a conversation page may hold at most 64 entries",
            ),
            (
                raw::Error::NotFound,
                "no such conversation or message, or this agent does not take part in it",
            ),
            (raw::Error::Invalid("empty body".into()), "invalid argument: empty body"),
            (
                raw::Error::TooManyReplies(64),
                "this turn already made 64 replies, the most one wake allows",
            ),
            (raw::Error::Refused("closed".into()), "the conversation refused: closed"),
            (
                raw::Error::Unavailable("disk full".into()),
                "conversations are unavailable: disk full",
            ),
        ];
        for (raw, message) in cases {
            assert_eq!(Error::from(raw).to_string(), message);
        }
    }
}
