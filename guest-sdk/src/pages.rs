//! Reading a host list a page at a time: the one iterator behind every list of the SDK
//! ([`conversations::inbox`](crate::conversations::inbox),
//! [`conversations::transcript`](crate::conversations::transcript),
//! [`delegation::tasks`](crate::delegation::tasks), [`snapshot::messages`](crate::snapshot::messages)).
//!
//! The host serves a list in pages after a cursor. [`Pages`] keeps the read's state (the
//! cursor, the page being served, whether the read has ended); each list brings what differs:
//! how to fetch the page after a cursor (a closure over the list's own arguments), and its
//! cursor rule, which says from each page fetched where the next one starts or that the read
//! ends ([`Next`]; [`after_last_key`] is the rule of the lists in key order).

/// What a list's cursor rule makes of a page just fetched.
#[derive(Debug)]
pub(crate) enum Next<C> {
    /// Serve the page, then fetch the next one after this cursor.
    After(C),
    /// Serve the page; the read ends with it.
    Last,
    /// End the read without serving the page: it does not move past the cursor, so it would
    /// hand out again what was already read.
    Repeated,
}

/// A read that pages after a cursor of type `C` through entries `T`. It ends when the cursor
/// rule says so, or after yielding a fetch's error (no call follows it).
#[derive(Debug)]
pub(crate) struct Pages<T, C> {
    after: C,
    page: std::vec::IntoIter<T>,
    done: bool,
    rule: fn(&C, &[T]) -> Next<C>,
}

impl<T, C> Pages<T, C> {
    /// A read whose first page is fetched after `after`, following `rule` from page to page.
    pub(crate) fn new(after: C, rule: fn(&C, &[T]) -> Next<C>) -> Self {
        Self {
            after,
            page: Vec::new().into_iter(),
            done: false,
            rule,
        }
    }

    /// The next entry, fetching the page after the cursor with `fetch` when the one served is
    /// used up; `None` once the read has ended.
    pub(crate) fn next<E>(&mut self, mut fetch: impl FnMut(&C) -> Result<Vec<T>, E>) -> Option<Result<T, E>> {
        loop {
            if let Some(entry) = self.page.next() {
                return Some(Ok(entry));
            }
            if self.done {
                return None;
            }
            let page = match fetch(&self.after) {
                Ok(page) => page,
                Err(e) => {
                    self.done = true;
                    return Some(Err(e));
                }
            };
            match (self.rule)(&self.after, &page) {
                Next::After(after) => self.after = after,
                Next::Last => self.done = true,
                Next::Repeated => {
                    self.done = true;
                    continue;
                }
            }
            self.page = page.into_iter();
        }
    }
}

/// What a list in key order does with a page whose last key does not pass the cursor: the read
/// ends either way, so a host that repeats its page cannot loop the guest forever.
#[derive(Debug, Clone, Copy)]
pub(crate) enum RepeatedPage {
    /// The page is served, then the read ends (the inbox, a transcript).
    Served,
    /// The read ends without it: no entry is handed out twice (the tasks).
    Dropped,
}

/// The cursor rule of a list in key order (an inbox order, a message seq, a task id), given
/// the key of the page's last entry: that key becomes the cursor when it passes the current
/// one. The read ends at an empty page rather than a short one (the host promises *at most* a
/// page), and at a page whose last key does not pass the cursor, which `repeated` serves or
/// drops.
pub(crate) fn after_last_key<C: PartialOrd>(after: &C, last: Option<C>, repeated: RepeatedPage) -> Next<C> {
    match (last, repeated) {
        (Some(last), _) if last > *after => Next::After(last),
        (Some(_), RepeatedPage::Dropped) => Next::Repeated,
        _ => Next::Last,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Serves `entries` (their own keys) at most `limit` after a cursor, recording each cursor.
    fn serve(entries: &[u64], limit: usize, calls: &mut Vec<u64>, after: u64) -> Result<Vec<u64>, String> {
        calls.push(after);
        Ok(entries.iter().copied().filter(|k| *k > after).take(limit).collect())
    }

    /// Reads all of `entries` by key, `limit` a page, returning what was read and each cursor.
    fn read_by_key(entries: &[u64], limit: usize) -> (Vec<u64>, Vec<u64>) {
        let mut pages = Pages::new(0, |after, page: &[u64]| {
            after_last_key(after, page.last().copied(), RepeatedPage::Served)
        });
        let (mut read, mut calls) = (Vec::new(), Vec::new());
        while let Some(entry) = pages.next(|&after| serve(entries, limit, &mut calls, after)) {
            read.push(entry.unwrap());
        }
        (read, calls)
    }

    #[test]
    fn the_cursor_follows_the_last_key_until_an_empty_page() {
        let entries: Vec<u64> = (1..=130).map(|i| i * 10).collect();
        let (read, calls) = read_by_key(&entries, 64);
        assert_eq!(read, entries, "every entry once, in order");
        assert_eq!(
            calls,
            [0, 640, 1280, 1300],
            "each page starts after the last entry read"
        );
    }

    #[test]
    fn a_short_page_of_a_keyed_list_is_not_the_end() {
        // A host that skips consumed deliveries may serve fewer than a page before the end.
        let (read, calls) = read_by_key(&[2, 5, 9], 2);
        assert_eq!(read, [2, 5, 9]);
        assert_eq!(calls, [0, 5, 9]);
    }

    #[test]
    fn a_repeated_page_ends_the_read_served_or_not() {
        type Rule = fn(&Option<String>, &[String]) -> Next<Option<String>>;
        let served: Rule = |after, page| after_last_key(after, page.last().cloned().map(Some), RepeatedPage::Served);
        let dropped: Rule = |after, page| after_last_key(after, page.last().cloned().map(Some), RepeatedPage::Dropped);
        for (rule, want) in [(served, vec!["tsk_a", "tsk_a"]), (dropped, vec!["tsk_a"])] {
            let mut pages = Pages::new(None, rule);
            let mut calls = Vec::new();
            let mut fetch = |after: &Option<String>| {
                calls.push(after.clone());
                Ok::<_, String>(vec!["tsk_a".to_owned()])
            };
            let read: Vec<String> = std::iter::from_fn(|| pages.next(&mut fetch))
                .take(3)
                .map(Result::unwrap)
                .collect();
            assert_eq!(read, want);
            // No cursor is before every key; a host that repeats its page cannot loop the guest.
            assert_eq!(calls, [None, Some("tsk_a".to_owned())]);
        }
    }

    #[test]
    fn a_counted_cursor_ends_at_a_short_page() {
        // The rule of a list read by position, a full page at a time (the snapshot's history).
        let mut pages = Pages::new(0_u64, |after, page: &[u64]| match page.len() {
            3 => Next::After(after + 3),
            _ => Next::Last,
        });
        let entries: Vec<u64> = (1..=7).collect();
        let mut calls = Vec::new();
        let mut fetch = |&after: &u64| serve(&entries, 3, &mut calls, after);
        let read: Vec<u64> = std::iter::from_fn(|| pages.next(&mut fetch))
            .take(8)
            .map(Result::unwrap)
            .collect();
        assert_eq!(read, entries);
        assert_eq!(calls, [0, 3, 6], "no fetch after the short page");
    }

    #[test]
    fn an_error_is_yielded_once_after_the_entries_before_it_and_ends_the_read() {
        let mut pages = Pages::new(0_u64, |_, page: &[u64]| Next::After(page.len() as u64));
        let mut calls = 0;
        let mut fetch = |_: &u64| {
            calls += 1;
            if calls == 1 { Ok(vec![1, 2]) } else { Err("unavailable") }
        };
        let read: Vec<_> = std::iter::from_fn(|| pages.next(&mut fetch)).take(4).collect();
        assert_eq!(read, [Ok(1), Ok(2), Err("unavailable")]);
        assert_eq!(pages.next(&mut fetch), None);
        assert_eq!(calls, 2, "no call after the error");
    }
}
