//! A fixed pattern compiled the first time a text needs it.
//!
//! The rule set is some fifty regexes, and compiling them all took about
//! 6.6 ms, most of the server's start-up work besides the sandbox. A rule
//! runs only where its anchor was found, so most are never compiled in a
//! session; one that is costs its compile once (0.1-0.6 ms) and is then
//! shared by every call.

use std::ops::Deref;
use std::sync::OnceLock;

use regex::Regex;

#[derive(Debug, Clone)]
pub(super) struct LazyRegex {
    pattern: &'static str,
    compiled: OnceLock<Regex>,
}

impl LazyRegex {
    pub(super) const fn new(pattern: &'static str) -> Self {
        LazyRegex {
            pattern,
            compiled: OnceLock::new(),
        }
    }
}

impl Deref for LazyRegex {
    type Target = Regex;

    fn deref(&self) -> &Regex {
        // The patterns are fixed text; unit tests compile each one, so
        // `expect` can only fire on a change that never passed them.
        self.compiled
            .get_or_init(|| Regex::new(self.pattern).expect("a fixed pattern compiles"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_on_first_use_only() {
        let lazy = LazyRegex::new("a+b");
        assert!(lazy.compiled.get().is_none());
        assert!(lazy.is_match("xaab"));
        assert!(lazy.compiled.get().is_some());
        assert!(!lazy.is_match("b"));
    }
}
