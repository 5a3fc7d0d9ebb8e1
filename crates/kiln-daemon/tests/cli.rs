//! The `kiln` binary itself: configuration layers, mistakes, and the
//! SIGTERM path (the e2e tests run the daemon in-process instead).

use std::io::Read;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Held by each test: a child forked by one test would inherit (until its
/// exec) the listener another test is about to drop as "stale".
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// `kiln` with no KILN_* variables from the environment running the tests.
fn kiln() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kiln"));
    for (k, _) in std::env::vars().filter(|(k, _)| k.starts_with("KILN_")) {
        c.env_remove(k);
    }
    c
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn wait_timeout(child: &mut Child, limit: Duration) -> Option<std::process::ExitStatus> {
    let t0 = Instant::now();
    while t0.elapsed() < limit {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn print_config_layers_flags_over_env_over_file() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kiln.toml");
    std::fs::write(
        &file,
        "listen = \"tcp:127.0.0.1:9999\"\nshutdown_grace_secs = 7\n[engine]\nsynthesis_workers = 5\ngpu_queue_depth = 2\nfinalizer_threads = 3\n",
    )
    .unwrap();
    let out = kiln()
        .args(["serve", "--print-config", "--synthesis-workers", "2", "--memory-budget", "1GiB", "--set", "engine.counter_log_interval_ms=50"])
        .env("KILN_CONFIG", &file)
        .env("KILN_ENGINE_GPU_QUEUE_DEPTH", "4")
        .env("KILN_ENGINE_SYNTHESIS_WORKERS", "9")
        .env("KILN_STATUS_LISTEN", "off")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let cfg: toml::Table = toml::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    let engine = cfg["engine"].as_table().unwrap();
    assert_eq!(cfg["listen"].as_str(), Some("tcp:127.0.0.1:9999"), "file");
    assert_eq!(cfg["shutdown_grace_secs"].as_integer(), Some(7), "file");
    assert_eq!(cfg["status_listen"].as_str(), Some("off"), "env over default");
    assert_eq!(engine["gpu_queue_depth"].as_integer(), Some(4), "env over file");
    assert_eq!(engine["synthesis_workers"].as_integer(), Some(2), "flag over env over file");
    assert_eq!(engine["finalizer_threads"].as_integer(), Some(3), "file over default");
    assert_eq!(engine["memory_budget_bytes"].as_integer(), Some(1 << 30));
    assert_eq!(engine["counter_log_interval_ms"].as_integer(), Some(50));
}

#[test]
fn configuration_mistakes_exit_with_a_clear_message() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    /// (arguments, environment, words the error must contain)
    type Case<'a> = (&'a [&'a str], &'a [(&'a str, &'a str)], &'a str);
    let cases: [Case; 4] = [
        (&["serve", "--print-config"], &[("KILN_ENGINE_SYNTH_WORKERS", "2")], "synth_workers"),
        (&["serve", "--listen", "http://127.0.0.1:1"], &[], "is neither unix:PATH, tcp:HOST:PORT nor HOST:PORT"),
        (&["serve", "--config", "/nonexistent/kiln.toml"], &[], "reading config file /nonexistent/kiln.toml"),
        (&["serve", "--set", "engine.synthesis_workers=0"], &[], "synthesis_workers must be at least 1"),
    ];
    for (args, env, words) in cases {
        let out = kiln().args(args).envs(env.iter().copied()).output().unwrap();
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(text(&out).contains(words), "{args:?}: {:?} lacks {words:?}", text(&out));
    }
}

fn spawn_serve(sock: &Path, params: &Path) -> Child {
    kiln()
        .args(["serve", "--status-listen", "off", "--set", "engine.memory_budget_bytes=64MiB", "--set", "engine.pin_host_buffers=false"])
        .arg("--listen")
        .arg(format!("unix:{}", sock.display()))
        .arg("--synthetic-params-dir")
        .arg(params)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn serve_replaces_a_stale_socket_refuses_a_live_one_and_stops_on_sigterm() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("run").join("kiln.sock");
    std::fs::create_dir_all(sock.parent().unwrap()).unwrap();
    // A socket file nobody listens on: what a killed daemon leaves behind.
    drop(std::os::unix::net::UnixListener::bind(&sock).unwrap());
    let stale_ino = std::fs::metadata(&sock).unwrap().ino();

    let mut daemon = spawn_serve(&sock, &dir.path().join("params"));
    let t0 = Instant::now();
    // Wait for the daemon's own socket (a new inode at the path): a child
    // that another test forks may briefly hold the stale listener open.
    while std::fs::metadata(&sock).map(|m| m.ino()).ok() == Some(stale_ino) || std::os::unix::net::UnixStream::connect(&sock).is_err() {
        if let Some(s) = daemon.try_wait().unwrap() {
            let mut err = String::new();
            daemon.stderr.take().unwrap().read_to_string(&mut err).unwrap();
            panic!("daemon exited ({s}): {err}");
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "daemon never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(std::fs::metadata(&sock).unwrap().permissions().mode() & 0o777, 0o600);

    let second = spawn_serve(&sock, &dir.path().join("params")).wait_with_output().unwrap();
    assert!(!second.status.success());
    assert!(text(&second).contains("is in use by a running daemon"), "{}", text(&second));
    assert!(std::os::unix::net::UnixStream::connect(&sock).is_ok(), "the refused daemon left the live socket alone");

    // SAFETY: kill(2) on the child we spawned.
    assert_eq!(unsafe { libc::kill(daemon.id() as libc::pid_t, libc::SIGTERM) }, 0);
    let status = wait_timeout(&mut daemon, Duration::from_secs(30)).expect("exits after SIGTERM");
    let mut err = String::new();
    daemon.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{status}: {err}");
    assert!(err.contains("kiln stopped"), "{err}");
    assert!(!sock.exists(), "socket removed on exit");
}

#[test]
fn a_taken_status_port_fails_the_start_and_leaves_no_socket() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("kiln.sock");
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let out = kiln()
        .args(["serve", "--set", "engine.memory_budget_bytes=64MiB", "--status-listen"])
        .arg(taken.local_addr().unwrap().to_string())
        .arg("--listen")
        .arg(format!("unix:{}", sock.display()))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(text(&out).contains("binding status listener"), "{}", text(&out));
    assert!(!sock.exists(), "no socket left behind");
}

/// Starts `kiln serve` on `sock` with `env`, waits until it serves, stops it
/// with SIGTERM; its stderr.
fn serve_until_listening(sock: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let mut daemon = kiln()
        .args(["serve", "--status-listen", "off", "--backend", "cpu", "--set", "engine.memory_budget_bytes=64MiB"])
        .arg("--listen")
        .arg(format!("unix:{}", sock.display()))
        .args(args)
        .envs(env.iter().copied())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while std::os::unix::net::UnixStream::connect(sock).is_err() {
        if daemon.try_wait().unwrap().is_some() {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(30), "daemon never listened");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: kill(2) on the child we spawned (a no-op error if it exited).
    unsafe { libc::kill(daemon.id() as libc::pid_t, libc::SIGTERM) };
    wait_timeout(&mut daemon, Duration::from_secs(30)).expect("exits after SIGTERM");
    let mut err = String::new();
    daemon.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    err
}

#[test]
fn json_logs_and_rust_log_are_honoured() {
    let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
    let dir = tempfile::tempdir().unwrap();
    let sock = dir.path().join("kiln.sock");
    let params = dir.path().join("params");

    // JSON lines, the start line's fields beside its message.
    let err = serve_until_listening(&sock, &["--set", "log_format=json"], &[("RUST_LOG", "info")]);
    let lines: Vec<serde_json::Value> =
        err.lines().map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l:?} in\n{err}"))).collect();
    let serving = lines.iter().find(|l| l["message"] == "kiln serving cuzk.v1").unwrap_or_else(|| panic!("{err}"));
    assert_eq!(serving["level"], "INFO");
    assert!(serving["grpc"].as_str().unwrap().starts_with("unix:"), "{serving}");
    assert!(serving["filecoin_params_dir"].is_string(), "{serving}");
    let backend = lines.iter().find(|l| l["message"] == "prover backend").unwrap_or_else(|| panic!("{err}"));
    assert!(backend["backend"].as_str().unwrap().starts_with("cpu ("), "{backend}");

    // RUST_LOG=warn silences the info lines but not the warning about an
    // old setting name; KILN_LOG beats RUST_LOG.
    let err = serve_until_listening(&sock, &["--params-dir", params.to_str().unwrap()], &[("RUST_LOG", "warn")]);
    assert!(err.contains("params_dir is deprecated"), "{err}");
    assert!(!err.contains("kiln serving cuzk.v1"), "{err}");
    let err = serve_until_listening(&sock, &[], &[("RUST_LOG", "warn"), ("KILN_LOG", "info")]);
    assert!(err.contains("kiln serving cuzk.v1"), "{err}");
    let bad = kiln().args(["serve", "--print-config"]).env("RUST_LOG", "kiln=loud").output().unwrap();
    assert!(bad.status.success(), "--print-config does not start logging: {}", text(&bad));
    let err = serve_until_listening(&sock, &[], &[("RUST_LOG", "kiln=loud")]);
    assert!(err.contains("log filter \"kiln=loud\" (from RUST_LOG)"), "{err}");
}
