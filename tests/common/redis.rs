//! A real `redis-server` on loopback for the queue tests: started on a free port in its own
//! folder (append-only file, fsync always, so a restart keeps everything), stopped on drop.
//!
//! There is no fallback: a machine without `redis-server` fails these tests with a message
//! saying how to install it (`scripts/test.sh` does it on CI), never skips them.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running redis-server.
pub struct Redis {
    child: Option<Child>,
    dir: tempfile::TempDir,
    port: u16,
    password: Option<String>,
}

fn binary() -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':').chain([
        "/usr/bin",
        "/usr/sbin",
        "/usr/local/bin",
    ]) {
        let p = Path::new(dir).join("redis-server");
        if p.is_file() {
            return p;
        }
    }
    panic!(
        "redis-server is not installed: the queue tests need a real one. scripts/test.sh installs \
         it (apt-get install redis-server); any Redis >= 6.2 on PATH will do"
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

impl Redis {
    /// Start a server without a password.
    pub fn start() -> Redis {
        Redis::start_with(None)
    }

    /// Start a server that requires `password`.
    pub fn start_with(password: Option<&str>) -> Redis {
        let mut r = Redis {
            child: None,
            dir: tempfile::tempdir().unwrap(),
            port: free_port(),
            password: password.map(str::to_string),
        };
        r.launch();
        r
    }

    fn launch(&mut self) {
        let mut cmd = Command::new(binary());
        cmd.arg("--port")
            .arg(self.port.to_string())
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "yes"])
            .args(["--appendfsync", "always", "--protected-mode", "no"])
            .arg("--dir")
            .arg(self.dir.path());
        if let Some(p) = &self.password {
            cmd.args(["--requirepass", p]);
        }
        let child = cmd
            .stdout(std::fs::File::create(self.dir.path().join("server.log")).unwrap())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while !self.answers() {
            assert!(
                Instant::now() < deadline,
                "redis-server did not start: {}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Whether it answers PING (a password-protected server answers NOAUTH: also alive).
    fn answers(&self) -> bool {
        let Ok(mut s) = TcpStream::connect(("127.0.0.1", self.port)) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
        if s.write_all(b"PING\r\n").is_err() {
            return false;
        }
        let mut buf = [0u8; 64];
        matches!(s.read(&mut buf), Ok(n) if n > 0 && (buf.starts_with(b"+PONG") || buf.starts_with(b"-NOAUTH")))
    }

    /// The server's log.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("server.log")).unwrap_or_default()
    }

    /// `redis://127.0.0.1:PORT/NAME` (no password in it).
    pub fn url(&self, name: &str) -> String {
        format!("redis://127.0.0.1:{}/{name}", self.port)
    }

    /// Stop the server (SIGTERM: it writes its data and exits).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            unsafe {
                libc::kill(c.id() as i32, libc::SIGTERM);
            }
            let deadline = Instant::now() + Duration::from_secs(10);
            while c.try_wait().unwrap().is_none() {
                if Instant::now() > deadline {
                    let _ = c.kill();
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }

    /// Start it again on the same port, with the same data.
    pub fn restart(&mut self) {
        self.stop();
        self.launch();
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}
