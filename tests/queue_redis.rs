//! `tagloop queue` and `tagloop worker` against a real redis-server on loopback: workers killed
//! and joining mid-batch, a Redis outage, a graceful stop, a password that is never shown.

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

mod common;
use common::redis::Redis;

/// A folder with a scripted model and a task file.
struct Env {
    dir: tempfile::TempDir,
}

/// Each task runs one command (`sleep SECS`), then answers `ok`.
const SCRIPT: &str = "=== turn ===\n<action>run_command(command=\"sleep {SECS}\")</action>\n=== turn ===\n<final_answer>ok</final_answer>\n";

impl Env {
    fn new(sleep: f64) -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("model.txt"),
            SCRIPT.replace("{SECS}", &sleep.to_string()),
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("sessions")).unwrap();
        Env { dir }
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn tasks(&self, file: &str, ids: impl IntoIterator<Item = usize>) -> String {
        let text: String = ids
            .into_iter()
            .map(|i| format!("{{\"id\": \"t{i}\", \"task\": \"task {i}\"}}\n"))
            .collect();
        std::fs::write(self.path(file), text).unwrap();
        file.to_string()
    }

    fn cmd(&self) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("tagloop"));
        c.current_dir(self.dir.path())
            .env_remove("OPENAI_BASE_URL")
            .env_remove("OPENAI_API_KEY")
            .env_remove("TAGLOOP_MODEL")
            .env_remove("TAGLOOP_REDIS_PASSWORD")
            .env("NO_COLOR", "1");
        c
    }

    fn tagloop(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// A worker in the background; its stderr goes to `NAME.log`.
    fn worker(&self, url: &str, name: &str, extra: &[&str]) -> Child {
        self.cmd()
            .args([
                "worker",
                "--queue",
                url,
                "--name",
                name,
                "--model",
                "scripted:model.txt",
            ])
            .args(["--allow-shell", "--session-dir", "sessions"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(self.path(&format!("{name}.log"))).unwrap())
            .spawn()
            .unwrap()
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.path(&format!("{name}.log"))).unwrap_or_default()
    }

    fn status(&self, url: &str) -> Value {
        let out = self.tagloop(&["queue", "status", "--queue", url, "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Wait until `done + failed` reaches `n`.
    fn wait_settled(&self, url: &str, n: u64, within: Duration) -> Value {
        let deadline = Instant::now() + within;
        loop {
            let s = self.status(url);
            if s["done"].as_u64().unwrap() + s["failed"].as_u64().unwrap() >= n {
                return s;
            }
            assert!(
                Instant::now() < deadline,
                "not settled in time: {s}\n{}",
                self.log("w")
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    fn results(&self, url: &str) -> Vec<Value> {
        let out = self.tagloop(&["queue", "results", "--queue", url, "--out", "results.jsonl"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::read_to_string(self.path("results.jsonl"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("a worker did not exit in {within:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn signal(child: &Child, sig: i32) {
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// Exactly the ids `t0..tN`, once each, all ok.
fn assert_one_ok_result_per_task(results: &[Value], n: usize) {
    let mut ids: Vec<&str> = results.iter().map(|r| r["id"].as_str().unwrap()).collect();
    ids.sort();
    let mut want: Vec<String> = (0..n).map(|i| format!("t{i}")).collect();
    want.sort();
    assert_eq!(ids, want.iter().map(String::as_str).collect::<Vec<_>>());
    for r in results {
        assert_eq!(r["status"], "ok", "{r}");
        assert_eq!(r["final"], "ok", "{r}");
    }
}

#[test]
fn a_killed_worker_loses_nothing_and_every_task_has_exactly_one_result() {
    let redis = Redis::start();
    let url = redis.url("evals");
    let env = Env::new(0.25);
    let n = 60;
    let input = env.tasks("in.jsonl", 0..n);
    let out = env.tagloop(&["queue", "push", &input, "--queue", &url]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("pushed 60 tasks"));
    let s = env.status(&url);
    assert_eq!(
        (s["queued"].as_u64(), s["running"].as_u64()),
        (Some(60), Some(0))
    );

    let common = [
        "--claim-after",
        "1.5",
        "--until-empty",
        "--concurrency",
        "4",
    ];
    let mut victim = env.worker(&url, "w1", &common);
    let mut w2 = env.worker(&url, "w2", &common);
    let mut w3 = env.worker(&url, "w3", &common);
    // Kill w1 while it runs tasks: they stay pending under its name until claimed.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let q = tagloop::queue::Queue::new(tagloop::queue::QueueUrl::parse(&url).unwrap()).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let s = env.status(&url);
        let held = rt.block_on(q.owned_by("w1")).unwrap().len();
        if s["done"].as_u64().unwrap() >= 12 && held >= 2 {
            assert!(s["workers"].as_u64().unwrap() >= 3, "{s}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "no progress: {s}\n{}",
            env.log("w1")
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    victim.kill().unwrap();
    victim.wait().unwrap();
    let mut w4 = env.worker(&url, "w4", &common);
    for (w, name) in [(&mut w2, "w2"), (&mut w3, "w3"), (&mut w4, "w4")] {
        let status = wait_exit(w, Duration::from_secs(60));
        assert!(status.success(), "{name}: {}", env.log(name));
    }
    let s = env.status(&url);
    assert_eq!(
        (
            s["queued"].as_u64(),
            s["running"].as_u64(),
            s["done"].as_u64(),
            s["failed"].as_u64()
        ),
        (Some(0), Some(0), Some(60), Some(0)),
        "{s}"
    );
    assert_one_ok_result_per_task(&env.results(&url), n);
    // The dead worker's tasks were claimed by the others: it holds none now.
    assert!(rt.block_on(q.owned_by("w1")).unwrap().is_empty());
    // The worker that joined late took part.
    assert!(
        !env.log("w4").contains(": 0 tasks run"),
        "{}",
        env.log("w4")
    );

    // A re-push adds nothing and says so.
    let out = env.tagloop(&["queue", "push", &input, "--queue", &url]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && err.contains("pushed 0 tasks") && err.contains("60 skipped"),
        "{err}"
    );
    assert_eq!(env.status(&url)["queued"], 0);
}

#[test]
fn a_worker_that_loses_redis_for_a_few_seconds_recovers_and_keeps_its_results() {
    let mut redis = Redis::start();
    let url = redis.url("outage");
    let env = Env::new(0.2);
    let n = 24;
    let input = env.tasks("in.jsonl", 0..n);
    assert!(
        env.tagloop(&["queue", "push", &input, "--queue", &url])
            .status
            .success()
    );
    let mut w = env.worker(&url, "w", &["--until-empty", "--concurrency", "2"]);
    env.wait_settled(&url, 4, Duration::from_secs(30));
    redis.stop();
    // Tasks finish while Redis is away: their results wait in the worker.
    std::thread::sleep(Duration::from_secs(3));
    redis.restart();
    let status = wait_exit(&mut w, Duration::from_secs(60));
    let log = env.log("w");
    assert!(status.success(), "{log}");
    assert!(
        log.contains("trying again") || log.contains("kept"),
        "no outage seen: {log}"
    );
    assert_one_ok_result_per_task(&env.results(&url), n);
}

#[test]
fn sigterm_hands_running_tasks_back_and_another_worker_finishes_them() {
    let redis = Redis::start();
    let url = redis.url("stop");
    let env = Env::new(30.0);
    let input = env.tasks("in.jsonl", 0..3);
    assert!(
        env.tagloop(&["queue", "push", &input, "--queue", &url])
            .status
            .success()
    );
    let mut w = env.worker(&url, "slow", &["--grace", "0.5"]);
    let deadline = Instant::now() + Duration::from_secs(20);
    while env.status(&url)["running"] != 3 {
        assert!(Instant::now() < deadline, "{}", env.log("slow"));
        std::thread::sleep(Duration::from_millis(50));
    }
    let asked = Instant::now();
    signal(&w, libc::SIGTERM);
    let status = wait_exit(&mut w, Duration::from_secs(15));
    assert!(status.success(), "{}", env.log("slow"));
    assert!(
        asked.elapsed() < Duration::from_secs(10),
        "the grace period was not kept"
    );
    assert!(
        env.log("slow").contains("3 handed back"),
        "{}",
        env.log("slow")
    );
    // A fast worker takes them at once (without waiting --claim-after).
    std::fs::write(env.path("model.txt"), SCRIPT.replace("{SECS}", "0")).unwrap();
    let mut fast = env.worker(&url, "fast", &["--until-empty"]);
    assert!(
        wait_exit(&mut fast, Duration::from_secs(30)).success(),
        "{}",
        env.log("fast")
    );
    assert_one_ok_result_per_task(&env.results(&url), 3);
}

#[test]
fn a_bad_line_pushes_nothing_and_names_the_line() {
    let redis = Redis::start();
    let url = redis.url("bad");
    let env = Env::new(0.0);
    std::fs::write(
        env.path("in.jsonl"),
        "{\"id\": 1, \"task\": \"a\"}\n{\"id\": 2, \"task\": \"b\"}\n{\"id\": 3}\n",
    )
    .unwrap();
    let out = env.tagloop(&["queue", "push", "in.jsonl", "--queue", &url]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("line 3"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(env.status(&url)["queued"], 0);
    for (bad, needle) in [
        ("redis://127.0.0.1:1", "names no queue"),
        ("http://127.0.0.1/q", "scheme"),
    ] {
        let out = env.tagloop(&["queue", "status", "--queue", bad]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(needle));
    }
}

#[test]
fn the_redis_password_never_appears_in_output_results_or_transcripts() {
    let pw = "queue-pw-7f3a9c";
    let redis = Redis::start_with(Some(pw));
    let plain = redis.url("secret");
    let with_pw = plain.replace("redis://", &format!("redis://:{pw}@"));
    let env = Env::new(0.0);
    // The task's command prints its environment into the transcript.
    std::fs::write(
        env.path("model.txt"),
        "=== turn ===\n<action>run_command(command=\"env; ps -ef\")</action>\n=== turn ===\n<final_answer>ok</final_answer>\n",
    )
    .unwrap();
    let input = env.tasks("in.jsonl", 0..2);
    // Without the password: refused, with a clear error.
    let out = env.tagloop(&["queue", "push", &input, "--queue", &plain]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("NOAUTH")
            || String::from_utf8_lossy(&out.stderr).contains("uthentication"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // From TAGLOOP_REDIS_PASSWORD beside a URL without one; for the worker, the whole URL (with
    // the password) from TAGLOOP_QUEUE.
    let out = env
        .cmd()
        .env("TAGLOOP_REDIS_PASSWORD", pw)
        .args(["queue", "push", &input, "--queue", &plain])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let mut w = env
        .cmd()
        .env("TAGLOOP_QUEUE", &with_pw)
        .args(["worker", "--name", "w", "--model", "scripted:model.txt"])
        .args([
            "--allow-shell",
            "--session-dir",
            "sessions",
            "--until-empty",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(env.path("w.log")).unwrap())
        .spawn()
        .unwrap();
    assert!(
        wait_exit(&mut w, Duration::from_secs(30)).success(),
        "{}",
        env.log("w")
    );
    let results = env.results(&with_pw);
    assert_one_ok_result_per_task(&results, 2);
    let status = env.tagloop(&["queue", "status", "--queue", &with_pw]);
    let shown = String::from_utf8_lossy(&status.stdout);
    assert!(shown.contains("redis://:***@127.0.0.1"), "{shown}");
    let mut everything = format!(
        "{shown}{}{}",
        String::from_utf8_lossy(&status.stderr),
        env.log("w")
    );
    everything.push_str(&std::fs::read_to_string(env.path("results.jsonl")).unwrap());
    let mut transcripts = 0;
    for f in std::fs::read_dir(env.path("sessions")).unwrap() {
        let text = std::fs::read_to_string(f.unwrap().path()).unwrap();
        transcripts += usize::from(text.contains("run_command"));
        everything.push_str(&text);
    }
    assert_eq!(
        transcripts, 2,
        "the commands' output should be in the transcripts"
    );
    assert!(!everything.contains(pw), "the password leaked");
    assert!(
        !everything.contains("TAGLOOP_QUEUE"),
        "the queue's variable reached a child"
    );
    assert!(
        !everything.contains("TAGLOOP_REDIS_PASSWORD"),
        "the password's variable reached a child"
    );
}

#[tokio::test]
async fn the_first_result_stored_wins_and_a_second_is_dropped() {
    use tagloop::queue::{Queue, QueueUrl};
    let redis = Redis::start();
    let q = Queue::new(QueueUrl::parse(&redis.url("wins")).unwrap()).unwrap();
    let task = serde_json::json!({"id": "a", "task": "x"});
    let r = q.push(&[("a".into(), task.clone())]).await.unwrap();
    assert_eq!((r.added, r.skipped), (1, 0));
    let first = q.take("one", 10, None).await.unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(first[0].task, Ok(task.clone()));
    // "one" goes quiet; "two" claims the task after the idle time and runs it too.
    tokio::time::sleep(Duration::from_millis(120)).await;
    let second = q
        .claim("two", Duration::from_millis(100), 10)
        .await
        .unwrap();
    assert_eq!(second.len(), 1);
    assert_eq!(second[0].deliveries, 2);
    let a = serde_json::json!({"id": "a", "status": "ok", "final": "from two"});
    let b = serde_json::json!({"id": "a", "status": "error", "final": "from one"});
    assert!(q.store(&second[0].entry, "a", &a, true).await.unwrap());
    assert!(!q.store(&first[0].entry, "a", &b, false).await.unwrap());
    assert_eq!(q.results().await.unwrap(), vec![a]);
    let s = q.status().await.unwrap();
    assert_eq!((s.queued, s.running, s.done, s.failed), (0, 0, 1, 0));
    // A live worker's keep-alive stops a claim, and tells it when the task is settled elsewhere.
    q.push(&[("b".into(), serde_json::json!({"id": "b", "task": "y"}))])
        .await
        .unwrap();
    let b = q.take("one", 10, None).await.unwrap();
    tokio::time::sleep(Duration::from_millis(120)).await;
    assert!(
        q.keep_alive("one", &[(b[0].entry.clone(), "b".into())])
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        q.claim("two", Duration::from_millis(100), 10)
            .await
            .unwrap()
            .is_empty()
    );
}
