//! What the command line prints on stdout, and the one error that is not
//! one: a reader that went away.

use std::io::Write;

/// Write to stdout; a reader that went away (`| head`) is not an error
/// (`main` ends quietly with 0 on a broken pipe).
pub(crate) fn print_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    out.flush()
}

/// Whether an error is a closed stdout (`| head`): the reader has what it
/// wanted, so it ends quietly.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_broken_pipe_is_recognised_through_context() {
        let e = anyhow::Error::from(std::io::Error::from(std::io::ErrorKind::BrokenPipe))
            .context("writing the tool list");
        assert!(is_broken_pipe(&e));
        assert!(!is_broken_pipe(&anyhow::anyhow!("other")));
    }
}
