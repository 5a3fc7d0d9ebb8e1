//! Log output: `tracing` to stderr, as text or one JSON object per line.
//!
//! The filter is `KILN_LOG` if set, else `RUST_LOG` (what Rust programs and
//! cuzk read), else the caller's default (the `log_level` setting for
//! `kiln serve`).
//!
//! Panics go to the same log ([`log_panics`]): kiln catches them where
//! they can happen (filecoin-proofs' checks of a hostile payload, a job's
//! synthesis) and goes on serving, and their messages must not break a
//! JSON log stream with raw lines on stderr.

use tracing_subscriber::EnvFilter;

use crate::config::LogFormat;

/// The variables read for the log filter, most specific first.
pub const FILTER_VARS: [&str; 2] = ["KILN_LOG", "RUST_LOG"];

/// The filter text to use: the first of [`FILTER_VARS`] set in `env`
/// (non-empty), else `default`; also says where it came from.
pub fn filter_text(env: impl Fn(&str) -> Option<String>, default: &str) -> (String, &'static str) {
    FILTER_VARS
        .iter()
        .find_map(|var| env(var).filter(|v| !v.trim().is_empty()).map(|v| (v, *var)))
        .unwrap_or_else(|| (default.to_string(), "default"))
}

/// Installs the global subscriber. A filter from the environment that does
/// not parse is an error (a typo would otherwise silence the log).
pub fn init(format: LogFormat, default_filter: &str) -> anyhow::Result<()> {
    let (text, origin) = filter_text(|v| std::env::var(v).ok(), default_filter);
    let filter = EnvFilter::try_new(&text).map_err(|e| anyhow::anyhow!("log filter {text:?} (from {origin}): {e}"))?;
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match format {
        // Structured logs for journald / log shippers: one object per line,
        // the event's fields flattened next to the message.
        LogFormat::Json => builder.json().flatten_event(true).with_current_span(false).init(),
        // No colour codes in journald or log files.
        LogFormat::Text => builder.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr())).init(),
    }
    log_panics();
    Ok(())
}

/// Replaces the default panic output (raw lines on stderr) with one
/// `error` event carrying the message, where it happened and the thread;
/// a backtrace is added when `RUST_BACKTRACE` asks for one.
pub fn log_panics() {
    std::panic::set_hook(Box::new(|info| {
        let payload = info.payload();
        let message = payload.downcast_ref::<&str>().copied().or_else(|| payload.downcast_ref::<String>().map(String::as_str)).unwrap_or("(no message)");
        let location = info.location().map(|l| format!("{}:{}", l.file(), l.line())).unwrap_or_default();
        let thread = std::thread::current();
        let thread = thread.name().unwrap_or("<unnamed>");
        let backtrace = std::backtrace::Backtrace::capture();
        if backtrace.status() == std::backtrace::BacktraceStatus::Captured {
            tracing::error!(thread, location, %backtrace, "panic: {message}");
        } else {
            tracing::error!(thread, location, "panic: {message}");
        }
    }));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kiln_log_beats_rust_log_beats_the_default() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| v.to_string())
        };
        assert_eq!(filter_text(env(&[]), "info"), ("info".into(), "default"));
        assert_eq!(filter_text(env(&[("RUST_LOG", "debug")]), "info"), ("debug".into(), "RUST_LOG"));
        assert_eq!(filter_text(env(&[("RUST_LOG", "debug"), ("KILN_LOG", "warn")]), "info"), ("warn".into(), "KILN_LOG"));
        assert_eq!(filter_text(env(&[("KILN_LOG", " ")]), "info"), ("info".into(), "default"));
    }
}
