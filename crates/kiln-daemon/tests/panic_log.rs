//! A panic kiln catches (a hostile payload tripping filecoin-proofs, a
//! job's synthesis) is logged as one JSON event, not raw stderr lines that
//! would break a JSON log stream. Its own test binary: the panic hook and
//! the subscriber are process-wide.

use std::io::Write;
use std::sync::{Arc, Mutex};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[test]
fn caught_panics_are_json_log_events() {
    let out = Captured::default();
    let writer = out.clone();
    let subscriber = tracing_subscriber::fmt().json().flatten_event(true).with_writer(move || writer.clone()).finish();
    tracing::subscriber::set_global_default(subscriber).unwrap();
    kiln_daemon::logging::log_panics();

    let line = line!() + 1;
    assert!(std::panic::catch_unwind(|| panic!("boom {}", 7)).is_err());
    std::thread::Builder::new().name("synth-3".into()).spawn(|| std::panic::catch_unwind(|| panic!("static boom"))).unwrap().join().unwrap().unwrap_err();
    // The default hook again, so a failing assertion below is reported.
    drop(std::panic::take_hook());

    let text = String::from_utf8(out.0.lock().unwrap().clone()).unwrap();
    let events: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?}"))).collect();
    assert_eq!(events.len(), 2, "{text}");
    assert_eq!(events[0]["level"], "ERROR");
    assert_eq!(events[0]["message"], "panic: boom 7");
    assert!(events[0]["location"].as_str().unwrap().ends_with(&format!("panic_log.rs:{line}")), "{}", events[0]);
    assert_eq!(events[1]["message"], "panic: static boom");
    assert_eq!(events[1]["thread"], "synth-3");
}
