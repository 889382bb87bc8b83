//! The table that names every attempt of a platform once: its variant, the
//! word `__probe-attempt` takes, and the code it runs. A spec holds the
//! variant, so a misspelt attempt fails to compile instead of failing the
//! run with "unknown attempt".

/// `attempt_table! { run -> RET; Variant = "word" => |args| body, ... }`
/// defines `Attempt` with `word`, `from_word` and `run` (which evaluates
/// `body` with `args` bound to the attempt's arguments).
macro_rules! attempt_table {
    (run -> $ret:ty; $($v:ident = $word:literal => |$a:ident| $body:expr,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Attempt {
            $($v,)*
        }

        impl Attempt {
            #[cfg(test)]
            pub(crate) const ALL: &'static [Attempt] = &[$(Attempt::$v,)*];

            /// The word `__probe-attempt` takes.
            pub(crate) fn word(self) -> &'static str {
                match self {
                    $(Attempt::$v => $word,)*
                }
            }

            pub(crate) fn from_word(word: &str) -> Option<Attempt> {
                match word {
                    $($word => Some(Attempt::$v),)*
                    _ => None,
                }
            }

            fn run(self, args: &[String]) -> $ret {
                match self {
                    $(Attempt::$v => {
                        let $a = args;
                        $body
                    })*
                }
            }
        }

        impl std::fmt::Display for Attempt {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.word())
            }
        }
    };
}

pub(crate) use attempt_table;
