//! The HTML replay in a real browser (issue 25, item 7): Debian's headless Chromium loads the page
//! `tagloop replay --html` wrote, and the test reads the DOM the browser built from it (not the
//! bytes tagloop wrote) and a screenshot.
//!
//! Chromium is installed by `scripts/setup-chromium.sh` (scripts/test.sh runs it). Without it
//! this test fails: it never skips.

mod common;

use common::cli::Env;

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use serde_json::Value;

/// The browser, from Debian's `chromium` package.
const CHROMIUM: &str = "chromium";

/// Lines of the file the model reads: over the page's fold threshold.
const LONG_LINES: usize = 40;

impl Env {
    /// Chromium, headless, with a profile of its own in the test's folder and nothing that
    /// reaches the network (no sync, no component updates, no background requests).
    fn chromium(&self) -> Command {
        let mut c = Command::new(CHROMIUM);
        c.args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
        ])
        .arg(format!(
            "--user-data-dir={}",
            self.path("chromium-profile").display()
        ))
        .timeout(Duration::from_secs(120));
        c
    }
}

fn file_url(p: &Path) -> String {
    format!("file://{}", p.display())
}

/// Run a short episode (a long file read, then an answer) and write its replay page.
fn replay_page(env: &Env) -> PathBuf {
    let long: String = (1..=LONG_LINES)
        .map(|i| format!("row {i} of the report\n"))
        .collect();
    std::fs::write(env.path("ws/report.txt"), long).unwrap();
    let m = common::script::file(
        &env.path("script.txt"),
        &[
            "<thought>I read the report first.</thought>\n<action>read_file(path=\"report.txt\")</action>",
            "<thought>It has 40 rows.</thought>\n<final_answer>The report has 40 rows.</final_answer>",
        ],
    );
    let out = env
        .cmd()
        .args(["run", "--json", "--model", &m, "--workspace"])
        .arg(env.path("ws"))
        .arg("How many rows has report.txt?")
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let outcome: Value = serde_json::from_slice(&out).unwrap();
    let id = outcome["session"].as_str().unwrap();
    let page = env.path("replay.html");
    env.cmd()
        .args(["replay", id, "--html"])
        .arg(&page)
        .assert()
        .code(0);
    page
}

#[test]
fn the_replay_page_in_a_browser_opens_with_the_outcome_and_folds_long_observations() {
    let env = Env::new();
    let page = replay_page(&env);

    let dump = env
        .chromium()
        .arg("--dump-dom")
        .arg(file_url(&page))
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot start {CHROMIUM} ({e}): run scripts/setup-chromium.sh first")
        });
    assert!(
        dump.status.success(),
        "{CHROMIUM} failed: {}",
        String::from_utf8_lossy(&dump.stderr)
    );
    let dom = String::from_utf8(dump.stdout).unwrap();

    // The outcome comes first in the body, with the status, the answer and the counts.
    let body = &dom[dom.find("<body>").expect("a body") + "<body>".len()..];
    assert!(
        body.starts_with("<section id=\"outcome\""),
        "the page does not open with the outcome:\n{dom}"
    );
    let outcome = &body[..body.find("</section>").unwrap()];
    for part in [
        ">ok<",
        "The report has 40 rows.",
        "1 step<",
        "2 model calls",
        "tokens",
        " ms",
    ] {
        assert!(
            outcome.contains(part),
            "{part:?} missing from the outcome:\n{outcome}"
        );
    }

    // Step 1: the turn as written beside the parsed call.
    let step = &dom[dom
        .find("<section class=\"step\" id=\"turn-1\"")
        .expect("step 1")..];
    let step = &step[..step.find("</section>").unwrap()];
    let written = step.find("class=\"written\"").expect("the turn as written");
    let parsed = step.find("class=\"parsed\"").expect("the parsed turn");
    assert!(written < parsed);
    assert!(
        step[written..parsed].contains("&lt;action&gt;read_file(path=\"report.txt\")"),
        "the action text as the model wrote it:\n{step}"
    );
    assert!(
        step[parsed..].contains("<code>read_file</code>")
            && step[parsed..].contains("<th>path</th><td><pre>report.txt</pre></td>"),
        "the parsed call (tool and arguments):\n{step}"
    );

    // The long observation is folded in a closed <details>, its text inside.
    let details = step
        .find("<details class=\"obs\"")
        .expect("a folded observation");
    let tag_end = details + step[details..].find('>').unwrap();
    assert!(
        !step[details..tag_end].contains("open"),
        "the fold starts closed"
    );
    let fold = &step[details..step.find("</details>").unwrap()];
    assert!(fold.contains("<summary>observation · "), "{fold}");
    assert!(fold.contains("row 40 of the report"), "{fold}");

    // Nothing in the page runs.
    assert!(!dom.to_ascii_lowercase().contains("<script"), "{dom}");

    // And it draws: a PNG with something in it.
    let shot = env.path("replay.png");
    let out = env
        .chromium()
        .arg(format!("--screenshot={}", shot.display()))
        .arg("--window-size=1200,1600")
        .arg(file_url(&page))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let png = std::fs::read(&shot).expect("the screenshot was written");
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
    assert!(
        png.len() > 10_000,
        "a near-empty screenshot: {} bytes",
        png.len()
    );
}
