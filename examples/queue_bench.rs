//! `tagloop worker` on a real Redis beside `tagloop batch` in one process: tasks per second and
//! what the queue costs per task (docs/experiments.md, "Scale-out on a Redis queue").
//!
//! cargo build --release && cargo run --release --example queue_bench -- [TASKS] [PER_WORKER] [LATENCY_MS]
//!
//! 1. A fake OpenAI-compatible server starts in this process: every task is a 3-step episode
//!    (two file-tool calls, then an answer), each model turn delayed by LATENCY_MS (default 20:
//!    a fast hosted model), so throughput is bound by concurrency, as it is in real use.
//! 2. A redis-server (from PATH) starts on a free port with an append-only file.
//! 3. For 1, 2 and 4 workers of PER_WORKER concurrent tasks each (default 8): push TASKS tasks
//!    (default 400) to a fresh queue, start the workers with `--until-empty`, time until all
//!    have exited; CPU of the workers and of redis-server are read from the OS.
//! 4. `tagloop batch` on the same tasks at PER_WORKER and at 4 × PER_WORKER concurrency.
//!
//! All of it runs on one machine: on two cores the workers share the CPU, which is why the
//! model latency matters. The Redis overhead per task is the worker CPU per task minus the batch
//! CPU per task at the same concurrency, plus redis-server's CPU per task.

#[path = "../tests/common/fake_server/mod.rs"]
mod fake_server;
#[path = "support/release.rs"]
mod release;

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fake_server::{FakeConfig, FakeServer};

/// CPU seconds (user + system) of a running process, from /proc.
fn proc_cpu(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat; here 0-based after the name: 11 and 12.
    // SAFETY: sysconf only reads a constant.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    (ticks(11) + ticks(12)) / hz
}

/// CPU seconds of the children waited for so far.
fn children_cpu() -> f64 {
    // SAFETY: getrusage writes into the struct we pass.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut ru);
        ru.ru_utime.tv_sec as f64
            + ru.ru_utime.tv_usec as f64 / 1e6
            + ru.ru_stime.tv_sec as f64
            + ru.ru_stime.tv_usec as f64 / 1e6
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or(16379)
}

struct Redis(Child);

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_redis(dir: &Path, port: u16) -> Result<Redis, Box<dyn std::error::Error>> {
    let child = Command::new("redis-server")
        .args([
            "--port",
            &port.to_string(),
            "--bind",
            "127.0.0.1",
            "--save",
            "",
        ])
        .args(["--appendonly", "yes", "--appendfsync", "everysec"])
        .arg("--dir")
        .arg(dir)
        .stdout(Stdio::null())
        .spawn()
        .map_err(|e| {
            format!("cannot start redis-server ({e}): scripts/setup-redis.sh installs it")
        })?;
    let deadline = Instant::now() + Duration::from_secs(10);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        if Instant::now() > deadline {
            return Err("redis-server did not start".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(Redis(child))
}

struct Run {
    wall: f64,
    cpu: f64,
    redis_cpu: f64,
    ok: usize,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let arg = |i: usize, default: u64| {
        std::env::args()
            .nth(i)
            .and_then(|a| a.parse().ok())
            .unwrap_or(default)
    };
    let tasks = arg(1, 400) as usize;
    let per_worker = arg(2, 8) as usize;
    let latency = Duration::from_millis(arg(3, 20));
    let bin = release::tagloop_binary()?;
    let rt = tokio::runtime::Runtime::new()?;
    let mut cfg = FakeConfig::turns([
        "<thought>Look first.</thought>\n<action>list_dir(path=\".\")</action>".to_string(),
        "<thought>Read it.</thought>\n<action>read_file(path=\"readme.txt\")</action>".to_string(),
        "<thought>Done.</thought>\n<final_answer>one file</final_answer>".to_string(),
    ]);
    cfg.by_step = true;
    cfg.chunk_bytes = 24;
    cfg.first_byte_delay = latency;
    let server = rt.block_on(FakeServer::start(cfg));

    let dir = tempfile::tempdir()?;
    std::fs::create_dir(dir.path().join("ws"))?;
    std::fs::write(dir.path().join("ws/readme.txt"), "hello\n")?;
    let input: String = (0..tasks)
        .map(|i| format!("{{\"id\": {i}, \"task\": \"Task number {i}: look around.\"}}\n"))
        .collect();
    std::fs::write(dir.path().join("in.jsonl"), input)?;
    let port = free_port();
    let redis = start_redis(dir.path(), port)?;
    let model_args = |c: &mut Command| {
        c.current_dir(dir.path())
            .args(["--model", "fake", "--base-url", &server.base_url])
            .args(["--workspace", "ws", "--session-dir", "sessions"])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
    };
    let count_ok = |path: &Path| -> usize {
        std::fs::read_to_string(path)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("\"status\":\"ok\""))
            .count()
    };

    let mut rows: Vec<(String, Run)> = Vec::new();
    for workers in [1usize, 2, 4] {
        let url = format!("redis://127.0.0.1:{port}/bench{workers}");
        let pushed = Command::new(&bin)
            .current_dir(dir.path())
            .args(["queue", "push", "in.jsonl", "--queue", &url])
            .stderr(Stdio::null())
            .status()?;
        assert!(pushed.success(), "push failed");
        let redis_before = proc_cpu(redis.0.id());
        let cpu_before = children_cpu();
        let started = Instant::now();
        let mut children = Vec::new();
        for w in 0..workers {
            let mut c = Command::new(&bin);
            c.args([
                "worker",
                "--queue",
                &url,
                "--until-empty",
                "--name",
                &format!("w{w}"),
            ])
            .args(["--concurrency", &per_worker.to_string()]);
            model_args(&mut c);
            children.push(c.spawn()?);
        }
        for mut c in children {
            assert!(c.wait()?.success(), "a worker failed");
        }
        let wall = started.elapsed().as_secs_f64();
        let cpu = children_cpu() - cpu_before;
        let redis_cpu = proc_cpu(redis.0.id()) - redis_before;
        let out = dir.path().join(format!("results{workers}.jsonl"));
        let collected = Command::new(&bin)
            .current_dir(dir.path())
            .args(["queue", "results", "--queue", &url, "--out"])
            .arg(&out)
            .stderr(Stdio::null())
            .status()?;
        assert!(collected.success(), "results failed");
        rows.push((
            format!("{workers} worker(s) × {per_worker}"),
            Run {
                wall,
                cpu,
                redis_cpu,
                ok: count_ok(&out),
            },
        ));
    }
    for concurrency in [per_worker, 4 * per_worker] {
        let out = dir.path().join(format!("batch{concurrency}.jsonl"));
        let cpu_before = children_cpu();
        let started = Instant::now();
        let mut c = Command::new(&bin);
        c.args(["batch", "in.jsonl", "--out"])
            .arg(&out)
            .args(["--concurrency", &concurrency.to_string()]);
        model_args(&mut c);
        assert!(c.status()?.success(), "batch failed");
        rows.push((
            format!("batch, concurrency {concurrency}"),
            Run {
                wall: started.elapsed().as_secs_f64(),
                cpu: children_cpu() - cpu_before,
                redis_cpu: 0.0,
                ok: count_ok(&out),
            },
        ));
    }
    drop(redis);

    println!(
        "{tasks} tasks of 3 turns, {} ms per model turn, {per_worker} tasks at once per worker",
        latency.as_millis()
    );
    println!("| run | tasks/s | tagloop CPU ms/task | redis CPU ms/task | ok |");
    println!("|---|---|---|---|---|");
    for (label, r) in &rows {
        println!(
            "| {label} | {:.1} | {:.2} | {:.3} | {}/{tasks} |",
            tasks as f64 / r.wall,
            r.cpu * 1000.0 / tasks as f64,
            r.redis_cpu * 1000.0 / tasks as f64,
            r.ok
        );
    }
    let one = &rows[0].1;
    let batch = &rows[3].1;
    println!(
        "Redis overhead per task (1 worker vs batch at the same concurrency): {:.3} ms worker CPU + {:.3} ms redis-server CPU",
        (one.cpu - batch.cpu) * 1000.0 / tasks as f64,
        one.redis_cpu * 1000.0 / tasks as f64
    );
    Ok(())
}
