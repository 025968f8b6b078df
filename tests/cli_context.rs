//! Context fitting (issue 23) from the command line: `tagloop run` against the fake llama.cpp
//! server (its window in `/props`, its tokenizer, the window enforced with llama.cpp's 400)
//! says what it fitted in `--events`, the transcript and `replay`; `--no-context-fit` gets the
//! server's refusal; `--context-window` fits a scripted model offline; `continue` after a fitted
//! run fits again from the full record; `context_exceeded` exits 3.

mod common;

use std::path::PathBuf;

use common::cli::Env;
use common::fake_server::{FakeConfig, FakeServer};
use serde_json::Value;

/// The turn budget every run asks for (`--max-tokens`).
const BUDGET: u64 = 200;

/// The margin the default policy keeps free.
const MARGIN: u64 = 64;

/// The files read, in order: 55 to 100 numbered lines of about 60 bytes (3–6 KB).
const FILES: [(&str, usize); 4] = [
    ("notes/april.md", 70),
    ("notes/may.md", 100),
    ("notes/june.md", 55),
    ("notes/july.md", 90),
];

const ANSWER: &str = "the summer was warm";

fn file_text(path: &str, lines: usize) -> String {
    (1..=lines)
        .map(|i| format!("{path} line {i:03}: the figures of the month, in words.\n"))
        .collect()
}

/// The last line of a file: present in an observation only when it was not cut.
fn last_line(path: &str, lines: usize) -> String {
    format!("{path} line {lines:03}")
}

/// Read every file, one a turn, then answer; a later request (a `continue`) gets `more`.
fn turns() -> Vec<String> {
    let mut t: Vec<String> = FILES
        .iter()
        .map(|(path, _)| {
            format!("<thought>Next: {path}.</thought>\n<action>read_file(path=\"{path}\")</action>")
        })
        .collect();
    t.push(format!(
        "<thought>All read.</thought>\n<final_answer>{ANSWER}</final_answer>"
    ));
    t
}

/// The fake llama.cpp server with this window, enforced; its own runtime hosts it.
fn llama(window: u64) -> (tokio::runtime::Runtime, FakeServer) {
    let cfg = FakeConfig {
        props: true,
        props_n_ctx: window,
        tokenizer: true,
        enforce_window: true,
        default_reply: "<final_answer>june was mild</final_answer>".into(),
        ..FakeConfig::turns(turns())
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let server = rt.block_on(FakeServer::start(cfg));
    (rt, server)
}

trait ContextEnv {
    fn with_files(self) -> Self;
    fn run_against(&self, server: &FakeServer, extra: &[&str]) -> std::process::Output;
    fn transcript(&self, id: &str) -> Vec<Value>;
    fn window_for_fitting(&self) -> u64;
}

impl ContextEnv for Env {
    /// The env with [`FILES`] in its workspace.
    fn with_files(self) -> Self {
        std::fs::create_dir_all(self.path("ws/notes")).unwrap();
        for (path, lines) in FILES {
            let text = file_text(path, lines);
            assert!((3_000..=6_500).contains(&text.len()), "{path}");
            std::fs::write(self.path("ws").join(path), text).unwrap();
        }
        self
    }

    /// `tagloop run` against `server` over the workspace, with `extra` flags before the task.
    fn run_against(&self, server: &FakeServer, extra: &[&str]) -> std::process::Output {
        self.cmd()
            .args([
                "run",
                "--base-url",
                &server.base_url,
                "--model",
                "fake-model",
            ])
            .args(["--max-tokens", &BUDGET.to_string(), "--workspace"])
            .arg(self.path("ws"))
            .args(extra)
            .arg("Read the notes of each month and say how the summer was.")
            .output()
            .unwrap()
    }

    /// The records of a session's transcript.
    fn transcript(&self, id: &str) -> Vec<Value> {
        let path: PathBuf = self.path("sessions").join(format!("{id}.jsonl"));
        std::fs::read_to_string(&path)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// A window in which the third request (two files read) just fits and the fourth does not,
    /// from the fake's count of the requests of a run with room to spare.
    fn window_for_fitting(&self) -> u64 {
        let (_rt, free) = llama(1_000_000);
        let out = self.run_against(&free, &["--json"]);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
        let sizes: Vec<u64> = free
            .requests()
            .iter()
            .map(|r| FakeServer::prompt_tokens(&r.body))
            .collect();
        assert_eq!(sizes.len(), FILES.len() + 1);
        sizes[2] + BUDGET + MARGIN
    }
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn json_out(out: &std::process::Output) -> Value {
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn fitted(records: &[Value]) -> Vec<&Value> {
    records
        .iter()
        .filter(|r| r["type"] == "context_fitted")
        .collect()
}

/// The fields docs/context.md documents for the event.
const FIELDS: [&str; 10] = [
    "step",
    "window",
    "tokens_before",
    "tokens_after",
    "counted",
    "observations_cut",
    "steps_summarised",
    "max_tokens",
    "final_only",
    "after_refusal",
];

#[test]
fn a_fitted_run_says_so_in_its_events_its_transcript_and_replay() {
    let env = Env::new().with_files();
    let window = env.window_for_fitting();
    let (_rt, server) = llama(window);
    let out = env.run_against(&server, &["--events", "-"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(server.refused(), 0, "nothing sent over the window");

    // --events -: one JSON object a line; the fittings start at the fourth request.
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let fits = fitted(&events);
    assert!(!fits.is_empty(), "context_fitted in --events");
    for f in &fits {
        for key in FIELDS {
            assert!(f.get(key).is_some(), "{key} in {f}");
        }
        assert_eq!(f["window"], window);
        assert_eq!(f["counted"], true);
    }
    assert_eq!(fits[0]["step"], 4, "the first request past the window");
    assert!(
        fits.iter()
            .any(|f| f["observations_cut"].as_u64() > Some(0))
    );
    let finished = events
        .iter()
        .find(|e| e["type"] == "finished")
        .expect("the finished event");
    assert_eq!(finished["outcome"]["status"], "ok", "{finished}");
    assert_eq!(finished["outcome"]["final"], ANSWER);
    let id = finished["outcome"]["session"]
        .as_str()
        .expect("a session")
        .to_owned();

    // The transcript has the same records, and every observation whole.
    let records = env.transcript(&id);
    let kept = fitted(&records);
    assert_eq!(kept.len(), fits.len());
    for (a, b) in kept.iter().zip(&fits) {
        assert_eq!(a, b);
    }
    let text = serde_json::to_string(&records).unwrap();
    for (path, lines) in FILES {
        assert!(text.contains(&last_line(path, lines)), "{path} whole");
    }
    assert!(!text.contains("cut here to fit the context window"));

    // replay shows each fitting as one line.
    let out = env.cmd().args(["replay", "last"]).output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let replay = String::from_utf8_lossy(&out.stdout);
    let line = format!("◆ context: step 4 fitted into a window of {window} tokens: ");
    assert!(replay.contains(&line), "{replay}");
    assert!(replay.contains("(counted)"), "{replay}");
}

#[test]
fn without_fitting_the_server_refuses_and_the_run_ends_in_error() {
    let env = Env::new().with_files();
    let window = env.window_for_fitting();
    let (_rt, server) = llama(window);
    let out = env.run_against(&server, &["--no-context-fit", "--json"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let o = json_out(&out);
    assert_eq!(o["status"], "error");
    let error = o["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("exceeds the available context size"),
        "{error}"
    );
    assert_eq!(
        server.refused(),
        1,
        "the 400 is not retried without fitting"
    );
    assert_eq!(server.root_requests().len(), 0, "nothing counted");

    // The same run fitted ends ok.
    let (_rt2, server) = llama(window);
    let out = env.run_against(&server, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let o = json_out(&out);
    assert_eq!(o["status"], "ok");
    assert_eq!(o["final"], ANSWER);
    assert_eq!(server.refused(), 0);
}

#[test]
fn a_stated_window_fits_a_scripted_model_offline() {
    let env = Env::new().with_files();
    let t = turns();
    let refs: Vec<&str> = t.iter().map(String::as_str).collect();
    let model = common::script::file(&env.path("script.txt"), &refs);
    let run = |window: &str| {
        env.cmd()
            .args(["run", "--model", &model, "--max-tokens", "200"])
            .args(["--context-window", window, "--events", "-", "--workspace"])
            .arg(env.path("ws"))
            .arg("Read the notes.")
            .output()
            .unwrap()
    };
    let out = run("3000");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let events: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let fits = fitted(&events);
    assert!(!fits.is_empty(), "fitted offline");
    assert!(fits.iter().all(|f| f["window"] == 3000));
    assert!(
        fits.iter().all(|f| f["counted"] == false),
        "no tokenizer: estimated"
    );
    assert!(
        events
            .iter()
            .any(|e| e["type"] == "finished" && e["outcome"]["status"] == "ok")
    );
    // A big window: nothing to fit.
    let out = run("1000000");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("context_fitted"));
}

#[test]
fn continue_after_a_fitted_run_fits_again_from_the_full_record() {
    let env = Env::new().with_files();
    let window = env.window_for_fitting();
    let (_rt, server) = llama(window);
    let out = env.run_against(&server, &["--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let id = json_out(&out)["session"].as_str().unwrap().to_owned();
    let before = server.request_count();

    let out = env
        .cmd()
        .args(["continue", "last", "And June, how was it?", "--json"])
        .args(["--events", "ev.jsonl"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let o = json_out(&out);
    assert_eq!(o["status"], "ok", "{o}");
    assert_eq!(o["final"], "june was mild");
    assert_eq!(server.refused(), 0);

    // Its first request is fitted again: the old observations cut, the new message whole.
    let requests = server.requests();
    let first = &requests[before];
    let text = serde_json::to_string(&first.body).unwrap();
    assert!(text.contains("And June, how was it?"));
    assert!(
        text.contains("cut here to fit the context window"),
        "fitted"
    );
    let events: Vec<Value> = std::fs::read_to_string(env.path("ev.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let fits = fitted(&events);
    let first_fit = fits.first().expect("the continued run fitted");
    let first_turn = events
        .iter()
        .find(|e| e["type"] == "turn_started")
        .expect("a turn");
    assert_eq!(first_fit["step"], first_turn["step"], "its first request");

    // The transcript still holds every observation whole, and both runs' fittings.
    let records = env.transcript(&id);
    let text = serde_json::to_string(&records).unwrap();
    for (path, lines) in FILES {
        assert!(text.contains(&last_line(path, lines)), "{path} whole");
    }
    assert!(!text.contains("cut here to fit the context window"));
    assert!(fitted(&records).len() > fits.len());
}

#[test]
fn context_exceeded_exits_3() {
    let env = Env::new().with_files();
    let (_rt, server) = llama(300);
    let out = env.run_against(&server, &["--json"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let o = json_out(&out);
    assert_eq!(o["status"], "context_exceeded", "{o}");
    assert!(
        o["error"]
            .as_str()
            .unwrap_or_default()
            .contains("context window of 300 tokens is full")
    );
    assert_eq!(server.request_count(), 0);
    let raw = String::from_utf8_lossy(&out.stdout);
    assert!(raw.contains("\"status\":\"context_exceeded\""), "{raw}");
}

/// A log of about 4 KB whose last line holds the answer.
fn app_log() -> String {
    let mut log: String = (1..=80)
        .map(|i| {
            format!(
                "2026-11-27 10:{:02}:{:02} INFO worker {} took batch {i:04}\n",
                i / 6,
                i % 60,
                i % 4
            )
        })
        .collect();
    log.push_str("2026-11-27 10:12:30 ERROR the disk is full\n");
    log
}

/// Issue 31: at a small window, one long read must not leave room only for a forced answer.
/// The observation is cut deeper (a head and the tail that holds the answer) so that a turn of
/// the floor's size fits, and the model still acts: here it reads the end again, then answers.
#[test]
fn a_long_last_observation_at_a_small_window_is_cut_so_the_model_can_still_act() {
    let env = Env::new();
    std::fs::create_dir_all(env.path("ws")).unwrap();
    let log = app_log();
    assert!((3_900..=4_400).contains(&log.len()), "{}", log.len());
    std::fs::write(env.path("ws/app.log"), &log).unwrap();
    let turns = [
        "<thought>I read the log.</thought>\n<action>read_file(path=\"app.log\")</action>",
        "<thought>The end was cut: I read it.</thought>\n<action>read_file(path=\"app.log\", start_line=78)</action>",
        "<thought>Found.</thought>\n<final_answer>the disk is full</final_answer>",
    ];
    let server_for = |window: u64| {
        let cfg = FakeConfig {
            props: true,
            props_n_ctx: window,
            tokenizer: true,
            enforce_window: true,
            ..FakeConfig::turns(turns)
        };
        let rt = tokio::runtime::Runtime::new().unwrap();
        let server = rt.block_on(FakeServer::start(cfg));
        (rt, server)
    };
    let run = |server: &FakeServer| {
        env.cmd()
            .args(["run", "--base-url", &server.base_url, "--model", "fake"])
            .args(["--max-tokens", &BUDGET.to_string(), "--json", "--workspace"])
            .arg(env.path("ws"))
            .args(["--events", "ev.jsonl", "What is the last line of app.log?"])
            .output()
            .unwrap()
    };
    // With room to spare, the second request holds the whole log: what it costs besides the
    // log's body is the rest of the prompt.
    let (_rt, free) = server_for(1_000_000);
    assert_eq!(run(&free).status.code(), Some(0));
    let second = FakeServer::prompt_tokens(&free.requests()[1].body);
    let rest = second - log.len() as u64 / 4;
    // A window where the log fits only as ~800 bytes beside a turn of the budget: the usual
    // head and tail (768 + 256 bytes and a marker) would leave less than the budget, and the
    // run could only answer, or end.
    let window = rest + 200 + BUDGET + MARGIN;
    let (_rt2, server) = server_for(window);
    let out = run(&server);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let o = json_out(&out);
    assert_eq!(o["status"], "ok", "{o}");
    assert_eq!(o["final"], "the disk is full");
    assert_eq!(
        o["steps"], 2,
        "the model acted again after the long read: {o}"
    );
    assert_eq!(server.refused(), 0, "nothing sent over the window");
    let requests = server.requests();
    assert_eq!(requests.len(), 3);
    let sent = serde_json::to_string(&requests[1].body).unwrap();
    assert!(
        sent.contains("cut here to fit the context window"),
        "{sent}"
    );
    assert!(
        sent.contains("ERROR the disk is full"),
        "the tail is kept: {sent}"
    );
    assert!(
        !sent.contains("The context window is full"),
        "not a forced answer"
    );
    let events: Vec<Value> = std::fs::read_to_string(env.path("ev.jsonl"))
        .unwrap()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let fit = fitted(&events)
        .into_iter()
        .find(|f| f["step"] == 2)
        .cloned()
        .expect("the second request was fitted");
    assert_eq!(fit["final_only"], false, "{fit}");
    assert_eq!(fit["max_tokens"], BUDGET, "the whole budget fits: {fit}");
}

/// Issue 31: at a small window the system prompt is the compact one (one example, one line per
/// tool), so the first request leaves the turns more of the window; a large window gets the
/// whole prompt, as does a small one with fitting turned off.
#[test]
fn a_small_window_gets_the_compact_system_prompt() {
    let env = Env::new().with_files();
    let first_request = |window: u64, extra: &[&str]| {
        let (_rt, server) = llama(window);
        let out = env.run_against(&server, extra);
        assert!(out.status.code().is_some(), "{}", stderr(&out));
        let body = server.requests()[0].body.clone();
        let system = body["messages"][0]["content"].as_str().unwrap().to_owned();
        (system, FakeServer::prompt_tokens(&body))
    };
    let (full, full_tokens) = first_request(1_000_000, &[]);
    let (short, short_tokens) = first_request(2048, &[]);
    assert!(full.contains("# Example 2") && !short.contains("# Example 2"));
    assert!(short.contains("# Example 1") && short.contains("- read_file(path: string"));
    assert!(
        short_tokens * 10 <= full_tokens * 7,
        "the first request takes {short_tokens} tokens, {full_tokens} with the whole prompt"
    );
    eprintln!("first request: {short_tokens} tokens compact, {full_tokens} whole");
    let (off, _) = first_request(2048, &["--no-context-fit"]);
    assert_eq!(off, full, "not fitted: the prompt as built");
}
