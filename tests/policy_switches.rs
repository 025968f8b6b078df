//! Every agent-side policy of `src/policy.rs` switches: one test per policy runs the same turns
//! with every policy on and with that one off, and shows what the rule did and that without it
//! the run goes otherwise (`decide`: beside its rule's tests, in `agent_decide.rs`). (Serve's policies: `policy_switches_serve.rs`; the switches on the
//! command line and in the config file: `cli_policies.rs`.)

mod common;

use common::agent::{adder, observations, read_and_search};
use common::constrained::{Ran, run_under};
use serde_json::Value;
use tagloop::agent::{Agent, AgentConfig, Outcome, Status};
use tagloop::policy::{Policies, Policy};

/// Every policy on, then all but `policy`.
fn both(policy: Policy) -> [Policies; 2] {
    [Policies::all(), Policies::all().without(policy)]
}

/// A scripted run of `task` over `read` and `search` under `policies`: its outcome and the
/// observations it sent.
async fn scripted(task: &str, turns: &[&str], policies: Policies) -> (Outcome, Vec<String>) {
    scripted_over(read_and_search(), task, turns, policies).await
}

/// [`scripted`] over `tools`.
async fn scripted_over(
    tools: tagloop::tools::Registry,
    task: &str,
    turns: &[&str],
    policies: Policies,
) -> (Outcome, Vec<String>) {
    let agent = Agent::builder(common::script::model(turns))
        .tools(tools)
        .config(AgentConfig {
            max_steps: 8,
            policies,
            ..AgentConfig::default()
        })
        .build()
        .expect("agent builds");
    let o = agent.run(task).await;
    let seen = observations(&o.messages);
    (o, seen)
}

const TWO_FILES: &str = "Compare ledger/week2.txt and ledger/week4.txt: which sold more?";
const READ_2: &str = "<action>read(path=\"ledger/week2.txt\")</action>";

#[tokio::test]
async fn named_files_notice() {
    let [on, off] = both(Policy::NamedFilesNotice);
    let turns = [
        READ_2,
        "<action>read(path=\"ledger/week4.txt\")</action>",
        "<final_answer>same</final_answer>",
    ];
    let notice = "The question also names ledger/week4.txt, which no call has used yet";
    let (_, seen) = scripted(TWO_FILES, &turns, on).await;
    assert!(seen[0].contains(notice), "{}", seen[0]);
    let (_, seen) = scripted(TWO_FILES, &turns, off).await;
    assert!(!seen[0].contains(notice), "{}", seen[0]);
    // The result ends with the steps left.
    assert!(
        seen[0].contains("\n\n[7 steps left]\n</observation>"),
        "{}",
        seen[0]
    );
}

#[tokio::test]
async fn named_files_refusal() {
    let [on, off] = both(Policy::NamedFilesRefusal);
    let turns = [
        READ_2,
        "<final_answer>early</final_answer>",
        "<action>read(path=\"ledger/week4.txt\")</action>",
        "<final_answer>late</final_answer>",
    ];
    let (o, _) = scripted(TWO_FILES, &turns, on).await;
    assert_eq!(o.final_answer, Some(Value::from("late")));
    let (o, _) = scripted(TWO_FILES, &turns, off).await;
    assert_eq!(o.final_answer, Some(Value::from("early")));
}

#[tokio::test]
async fn observation_header() {
    let turns = [
        "<action>read(path=\"a.txt\")</action>",
        "<final_answer>7</final_answer>",
    ];
    let header = "read(path=\"a.txt\") returned 1 line:\n";
    let (_, seen) = scripted("What does a.txt hold?", &turns, Policies::all()).await;
    assert!(seen[0].contains(header), "{}", seen[0]);
    let off = Policies::all().without(Policy::ObservationHeader);
    let (_, seen) = scripted("What does a.txt hold?", &turns, off).await;
    assert!(
        !seen[0].contains(header) && seen[0].contains("a.txt: 7"),
        "{}",
        seen[0]
    );
}

/// A constrained run under every policy, then under all but `policy`.
async fn constrained(policy: Policy, task: &str, turns: Vec<String>) -> [Ran; 2] {
    let [on, off] = both(policy);
    [
        run_under(task, turns.clone(), on).await,
        run_under(task, turns, off).await,
    ]
}

#[tokio::test]
async fn counting() {
    let count: Vec<String> = (1..=300).map(|n| n.to_string()).collect();
    let call = format!(
        "<thought>I echo it.</thought>\n<action>echo(text=\"{}\")</action>",
        count.join(", ")
    );
    let answer = "<thought>I know it.</thought>\n<final_answer>31</final_answer>";
    let [on, off] = constrained(
        Policy::Counting,
        "How many lamps were sold?",
        vec![call, answer.into()],
    )
    .await;
    assert!(on.outcome.progress.tools_used.is_empty());
    assert_eq!(off.outcome.progress.tools_used, ["echo"]);
    let (_, all) = off.sent(1);
    assert!(all.contains(", 299, 300"), "the whole call ran");
}

#[tokio::test]
async fn repeat() {
    // Forty copies, 2 kB: past the ordinary guard (eight copies over 512 bytes) too.
    let sentence = "The project codename is HERON, as the intro says. ";
    let reply = format!(
        "<thought>I know it.</thought>\n<final_answer>{}",
        sentence.repeat(40)
    );
    let [on, off] = constrained(Policy::Repeat, "What is the codename?", vec![reply]).await;
    assert_eq!(on.outcome.status, Status::Ok, "{:?}", on.outcome.error);
    assert_eq!(on.answer().map(str::trim), Some(sentence.trim()));
    let whole = off.answer().unwrap_or_default();
    assert_eq!(whole.matches("HERON").count(), 40, "{:?}", off.outcome);
}

/// A run whose only tool takes numbers could never use the file its question names: the
/// named-files notice and refusal stay silent, where the same turns with a tool that takes a
/// path are told about the file and refused (issue 43: a role is never refused for tools it
/// could not call).
#[tokio::test]
async fn a_run_whose_tools_take_only_numbers_is_neither_told_nor_refused_for_named_files() {
    let turns = [
        "<action>add(a=3, b=4)</action>",
        "<final_answer>7</final_answer>",
        "<final_answer>7</final_answer>",
        "<final_answer>7</final_answer>",
    ];
    let task = "Add the numbers 3 and 4 that notes.txt holds.";
    let (o, seen) = scripted_over(adder(), task, &turns, Policies::all()).await;
    assert_eq!(o.status, Status::Ok, "{:?}", o.error);
    assert_eq!(o.progress.llm_calls, 2, "the answer is taken at once");
    assert!(!seen[0].contains("notes.txt"), "{}", seen[0]);

    let mut with_paths = read_and_search();
    with_paths.extend(adder());
    let (o, seen) = scripted_over(with_paths, task, &turns, Policies::all()).await;
    assert!(
        seen[0].contains("The question also names notes.txt"),
        "{}",
        seen[0]
    );
    assert!(
        o.progress.llm_calls > 2,
        "the answer is refused for notes.txt"
    );
}
