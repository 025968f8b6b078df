//! The policies' switches on the command line (`src/cli/policies.rs`): `tagloop policies` lists
//! them; `--policy-off` adds to `[policies] off` of the config file; an unknown name is a usage
//! error listing the valid ones (on `run` and `serve`, from the flag or the file); the transcript
//! records the run's list and `continue` goes on with it whatever the file says by then, unless
//! told otherwise; `serve --help` shows the flag among the decisions.

mod common;

use common::cli::{Env, outcome};
use serde_json::Value;
use tagloop::policy::Policy;

const HEADER: &str = "returned 1 line:";
/// The named-files notice after a read of a.txt.
const NOTICE: &str = "The question also names b.txt";

/// The transcript of session `id`: its lines.
fn records(env: &Env, id: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(env.path(&format!("sessions/{id}.jsonl"))).unwrap();
    text.lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The observations session `id` sent, in order.
fn observations(env: &Env, id: &str) -> Vec<String> {
    let contents = records(env, id).into_iter().filter_map(|r| {
        let m = &r["message"];
        (m["role"] == "user").then(|| m["content"].as_str().unwrap_or_default().to_owned())
    });
    contents
        .filter(|c| c.starts_with("<observation>"))
        .collect()
}

/// A run of one read under the config file's `named-files-notice` off and the flag's `flags`,
/// that ends when its script does (exit 1, so that `continue` goes on); the config file is then
/// removed and the script given more turns: the same read again (after which the notice names
/// b.txt, when it is on), a read of b.txt, then the answer. The session's id.
fn first_step(env: &Env, flags: &[&str]) -> String {
    std::fs::write(env.path("ws/a.txt"), "seven\n").unwrap();
    std::fs::write(env.path("ws/b.txt"), "eight\n").unwrap();
    std::fs::write(
        env.path("tagloop.toml"),
        "[policies]\noff = [\"named-files-notice\"]\n",
    )
    .unwrap();
    let read = "<action>read_file(path=\"a.txt\")</action>";
    let m = env.turns_file("s", &[read]);
    let mut args = vec!["--json", "What do a.txt and b.txt say?"];
    args.extend(flags);
    let o = outcome(
        &env.run_model(&m, &args)
            .assert()
            .code(1)
            .get_output()
            .stdout,
    );
    std::fs::remove_file(env.path("tagloop.toml")).unwrap();
    let read_b = "<action>read_file(path=\"b.txt\")</action>";
    env.turns_file(
        "s",
        &[read, read, read_b, "<final_answer>seven</final_answer>"],
    );
    o["session"].as_str().unwrap().to_string()
}

/// `tagloop continue ID` in the workspace, with `flags`: it ends with the script's answer.
fn continued(env: &Env, id: &str, flags: &[&str]) {
    let mut c = env.cmd();
    c.args(["continue", id, "--json", "--workspace"])
        .arg(env.path("ws"))
        .args(flags);
    assert_eq!(
        outcome(&c.assert().code(0).get_output().stdout)["final"],
        "seven"
    );
}

#[test]
fn the_flag_adds_to_the_file_and_continue_keeps_the_runs_own_list() {
    let env = Env::new();
    let id = first_step(&env, &["--policy-off", "observation-header"]);
    let run = &records(&env, &id)[0];
    assert_eq!(
        run["meta"]["policy_off"],
        serde_json::json!(["named-files-notice", "observation-header"])
    );
    let seen = observations(&env, &id);
    assert!(!seen[0].contains(HEADER), "{}", seen[0]);
    assert!(seen[0].contains("seven"), "{}", seen[0]);
    // The file is gone, the recorded list stands.
    continued(&env, &id, &[]);
    let seen = observations(&env, &id);
    assert_eq!(seen.len(), 3);
    assert!(seen[1].contains("seven"), "{}", seen[1]);
    assert!(
        !seen[1].contains(HEADER) && !seen[1].contains(NOTICE),
        "{}",
        seen[1]
    );
}

#[test]
fn continue_told_none_switches_every_policy_on_again() {
    let env = Env::new();
    let id = first_step(&env, &[]);
    let run = &records(&env, &id)[0];
    assert_eq!(
        run["meta"]["policy_off"],
        serde_json::json!(["named-files-notice"])
    );
    continued(&env, &id, &["--policy-off", "none"]);
    let seen = observations(&env, &id);
    assert!(
        seen[1].contains(HEADER) && seen[1].contains(NOTICE),
        "{}",
        seen[1]
    );
}

#[test]
fn an_unknown_name_is_a_usage_error_that_lists_the_valid_ones() {
    let env = Env::new();
    let check = |out: &[u8]| {
        let said = String::from_utf8_lossy(out);
        assert!(said.contains("unknown policy 'gues'"), "{said}");
        assert!(
            Policy::ALL.iter().all(|p| said.contains(p.name())),
            "{said}"
        );
    };
    let m = env.turns_file("s", &["<final_answer>x</final_answer>"]);
    let out = env
        .run_model(&m, &["--policy-off", "grounding,gues", "t"])
        .assert()
        .code(2);
    check(&out.get_output().stderr);
    // Nothing ran: no session was made.
    assert_eq!(std::fs::read_dir(env.path("sessions")).unwrap().count(), 0);
    let serve = [
        "serve",
        "--upstream",
        "http://127.0.0.1:9/v1",
        "--listen",
        "127.0.0.1:0",
    ];
    let out = env
        .cmd()
        .args(serve)
        .args(["--policy-off", "gues"])
        .assert()
        .code(2);
    check(&out.get_output().stderr);
    // The file's names are checked the same way, by serve too.
    std::fs::write(env.path("tagloop.toml"), "[policies]\noff = [\"gues\"]\n").unwrap();
    let out = env.cmd().args(serve).assert().code(2);
    let said = String::from_utf8_lossy(&out.get_output().stderr).into_owned();
    assert!(
        said.contains("[policies] off: unknown policy 'gues'"),
        "{said}"
    );
}

#[test]
fn policies_lists_each_one_and_serve_help_shows_the_flag_among_its_decisions() {
    let env = Env::new();
    let out = env.cmd().arg("policies").assert().code(0);
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), Policy::ALL.len(), "{text}");
    for (line, p) in lines.iter().zip(Policy::ALL) {
        assert!(
            line.starts_with(p.name()) && line.contains(p.description()),
            "{line}"
        );
        assert!(line.contains(p.place()), "{line}");
    }
    let out = env.cmd().args(["serve", "--help"]).assert().code(0);
    let help = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let decisions = help.split("Decisions:").nth(1).unwrap_or_default();
    let section = decisions.split("Limits:").next().unwrap_or_default();
    assert!(section.contains("--policy-off <NAME>"), "{help}");
    let out = env.cmd().args(["run", "--help"]).assert().code(0);
    let help = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(help.contains("--policy-off <NAME>"), "{help}");
    // One flag a rule: the older spellings of `--policy-off repeat` and `--policy-off decide`
    // are not shown, and still work: the run records them among its options.
    for (old, field) in [
        ("--keep-repetitions", "keep_repetitions"),
        ("--no-decide", "no_decide"),
    ] {
        assert!(!help.contains(old), "{help}");
        let m = env.turns_file(&format!("old{old}"), &["<final_answer>four</final_answer>"]);
        let out = env
            .run_model(&m, &[old, "--json", "What is 2+2?"])
            .assert()
            .code(0);
        let id = outcome(&out.get_output().stdout)["session"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let started = records(&env, &id).into_iter().next().unwrap_or_default();
        assert_eq!(started["meta"][field], true, "{started}");
    }
}

/// A run with no tools (`--no-builtin-tools`, no MCP) could never use the files its question
/// names: its answer is taken at once, and the same answers with the workspace's tools are refused
/// for them (the `named-files-refusal` policy; issue 43).
#[test]
fn a_run_without_tools_is_never_refused_for_the_files_its_question_names() {
    let env = Env::new();
    std::fs::write(env.path("ws/a.txt"), "seven\n").unwrap();
    let answer = "<final_answer>It says seven.</final_answer>";
    let m = env.turns_file("s", &[answer, answer, answer]);
    let ran = |extra: &[&str]| {
        let mut args = vec!["--json"];
        args.extend_from_slice(extra);
        args.push("What does a.txt say?");
        let out = env.run_model(&m, &args).output().unwrap();
        outcome(&out.stdout)
    };
    let bare = ran(&["--no-builtin-tools"]);
    assert_eq!(bare["status"], "ok", "{bare}");
    assert_eq!(bare["llm_calls"], 1, "accepted at once: {bare}");
    let with_tools = ran(&[]);
    // Refused twice; the third is the last refusal the run allows, so it is judged as usual.
    assert_eq!(with_tools["status"], "ok", "{with_tools}");
    assert_eq!(with_tools["llm_calls"], 3, "refused twice: {with_tools}");
}
