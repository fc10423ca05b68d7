//! What a completion request weighs — its counts and its bytes of text — and the size bounds
//! of `model.request` on them, in one place.
//!
//! The host checks them twice: on a guest's request while it is still in the guest's memory,
//! part by part as it is read and before anything is copied (`interfaces::model_request`), and
//! again on the copy, with every other rule, in [`Request::validate`](super::Request::validate).
//! Each figure only grows while a request is read, so the first check that fails can refuse it
//! before the rest is read.

use super::{
    Error, MAX_DESCRIPTION_BYTES, MAX_MESSAGES, MAX_PARTS, MAX_REQUEST_TEXT_BYTES, MAX_SCHEMA_BYTES, MAX_SYSTEM_BYTES,
    MAX_TOOLS,
};

/// The counts and bytes of one request, or of as much of it as was read so far.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Weight {
    /// Messages.
    pub messages: usize,
    /// Parts, in all messages.
    pub parts: usize,
    /// Tool definitions.
    pub tools: usize,
    /// Bytes of the system prompt.
    pub system: usize,
    /// Bytes of text: the system prompt, every part's strings and every tool definition's.
    pub text: usize,
}

impl Weight {
    /// Checks every figure against its bound.
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] naming the first bound exceeded.
    pub fn check(&self) -> Result<(), Error> {
        let too_large = |m: String| Err(Error::TooLarge(m));
        if self.messages > MAX_MESSAGES {
            return too_large(format!("{} messages; at most {MAX_MESSAGES}", self.messages));
        }
        if self.parts > MAX_PARTS {
            return too_large(format!("{} parts; at most {MAX_PARTS} in all", self.parts));
        }
        if self.tools > MAX_TOOLS {
            return too_large(format!("{} tools; at most {MAX_TOOLS}", self.tools));
        }
        if self.system > MAX_SYSTEM_BYTES {
            return too_large(format!("the system prompt is over {MAX_SYSTEM_BYTES} bytes"));
        }
        if self.text > MAX_REQUEST_TEXT_BYTES {
            return too_large(format!("over {MAX_REQUEST_TEXT_BYTES} bytes of text in all"));
        }
        Ok(())
    }

    /// Checks the sizes of tool definition `index` (its description and schema), then adds its
    /// name, description and schema to the text and checks that.
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] naming the bound exceeded.
    pub fn add_tool(&mut self, index: usize, name: usize, description: usize, schema: usize) -> Result<(), Error> {
        if description > MAX_DESCRIPTION_BYTES {
            return Err(Error::TooLarge(format!(
                "tools[{index}].description is over {MAX_DESCRIPTION_BYTES} bytes"
            )));
        }
        if schema > MAX_SCHEMA_BYTES {
            return Err(Error::TooLarge(format!(
                "tools[{index}].input-schema-json is over {MAX_SCHEMA_BYTES} bytes"
            )));
        }
        self.add_text(name + description + schema)
    }

    /// Adds `bytes` of text and checks the sum.
    ///
    /// # Errors
    ///
    /// [`Error::TooLarge`] past [`MAX_REQUEST_TEXT_BYTES`].
    pub fn add_text(&mut self, bytes: usize) -> Result<(), Error> {
        self.text = self.text.saturating_add(bytes);
        self.check()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_bound_holds_at_its_limit_and_refuses_one_past() {
        let at = Weight {
            messages: MAX_MESSAGES,
            parts: MAX_PARTS,
            tools: MAX_TOOLS,
            system: MAX_SYSTEM_BYTES,
            text: MAX_REQUEST_TEXT_BYTES,
        };
        assert_eq!(at.check(), Ok(()));
        for past in [
            Weight {
                messages: MAX_MESSAGES + 1,
                ..at
            },
            Weight {
                parts: MAX_PARTS + 1,
                ..at
            },
            Weight {
                tools: MAX_TOOLS + 1,
                ..at
            },
            Weight {
                system: MAX_SYSTEM_BYTES + 1,
                ..at
            },
            Weight {
                text: MAX_REQUEST_TEXT_BYTES + 1,
                ..at
            },
        ] {
            assert!(matches!(past.check(), Err(Error::TooLarge(_))), "{past:?}");
        }
        let mut w = Weight::default();
        assert_eq!(w.add_tool(0, 4, MAX_DESCRIPTION_BYTES, MAX_SCHEMA_BYTES), Ok(()));
        assert!(
            matches!(w.add_tool(1, 4, MAX_DESCRIPTION_BYTES + 1, 0), Err(Error::TooLarge(m)) if m.contains("tools[1]"))
        );
        assert!(matches!(
            w.add_tool(2, 4, 0, MAX_SCHEMA_BYTES + 1),
            Err(Error::TooLarge(_))
        ));
        let mut w = Weight::default();
        assert_eq!(w.add_text(MAX_REQUEST_TEXT_BYTES), Ok(()));
        assert!(matches!(w.add_text(1), Err(Error::TooLarge(_))));
        assert!(matches!(w.add_text(usize::MAX), Err(Error::TooLarge(_))), "no overflow");
    }
}
