//! What can make tagloop decline a model's call, refuse its answer, cut its turn or add words to
//! what it reads: every steering rule, by name, each one line, with the file that implements it.
//! Each is on by default and can be switched off by name (`[policies] off = [...]` in
//! `tagloop.toml`, `--policy-off NAME` on every command that takes the run options, and on
//! `serve`; docs/configuration.md),
//! so that each can be measured against its absence (issue 43's ablation).
//!
//! | name | what it decides | where |
//! |---|---|---|
//! | `grounding` | serve declines a first call none of whose values the conversation gave | `policy/grounding.rs`, `policy/mentions.rs` |
//! | `guess` | serve declines a call whose tool shares no word with the function the model names when asked about the question alone, without the tools | `policy/guess.rs` (asked by `serve/ahead.rs`) |
//! | `further` | serve drops a further call of a turn that brings nothing the question asks for | `policy/further.rs`, `policy/grounded.rs` |
//! | `choose` | serve asks a lone call (or a text answer) again for the tool the question's words lead to | `policy/choose.rs` (asked again by `serve/reask.rs`) |
//! | `unsaid-optional` | serve leaves out of a kept call an optional argument whose value the conversation never gave | `policy/unsaid.rs` |
//! | `answered-call` | serve drops from a turn each call that repeats, with the same arguments, a call whose result the conversation already holds; a turn left with none is refused and the answer asked for | `serve/read.rs` |
//! | `no-thought` | serve's turns that may call begin at the decision, without a thought, under `--thought none` | `serve/thought.rs` |
//! | `counting` | a grammar-constrained line that runs on without a word (digits, dates, counting) is cut | `policy/wordless.rs` (serve's when `policy/grounded.rs` allows) |
//! | `repeat` | a turn that keeps repeating itself is cut (the degeneration guard; off, the guard is gone, and `counting` with it) | `policy/repeat.rs` |
//! | `decide` | a run's first call is declined when the question names no file and the function the model names for the question alone shares no word with the tool | `policy/decide.rs` (asked by `agent/first_call.rs`) |
//! | `named-files-notice` | after a result, the files the question names that no call has used are named | `policy/named.rs`, `policy/path_words.rs`, `agent/act.rs` |
//! | `named-files-refusal` | an answer that comes before a call used every file the question names is refused | `policy/named_refusal.rs` (applied by `agent/decide.rs`) |
//! | `observation-header` | a result begins with the call and the number of lines it returned | `policy/observed.rs` |
//!
//! **The room.** The rules live here, below `llm` as `scan` is: no file here imports `llm`,
//! `agent`, `serve` or `cli` (the model client reads its request into the guard's plain
//! [`Watch`]). The files, by what they read:
//!
//! - *A conversation* (serve's client request, or a run's question and the tool it called), read
//!   as a `View` (`view.rs`, its parts `conversation.rs`). Their verdicts have one shape,
//!   `Judgement` (`judgement.rs`; a run's `decision` event is one): `grounding.rs` (over
//!   `mentions.rs`), `grounded.rs` (a further call's values), `guess.rs` (the verdict on the
//!   model's guessed function, serve's and a run's alike, who asked being an input),
//!   `decide.rs` (the run's decision step), `further.rs`, `choose.rs`, `unsaid.rs`, all reading
//!   words one way (`words.rs`).
//! - *A run's question and its calls*: the words that name a path (`path_words.rs`), the files
//!   the question names and the notice (`named.rs`), the refusal of an answer that comes before
//!   them (`named_refusal.rs`), a result's header (`observed.rs`), and the loop guard
//!   (`loopguard/`, whose verdict on a call is a `Check`: the protocol's, not a policy).
//! - *A turn as it streams*: the degeneration guard (`repeat.rs`, with `wordless.rs`) cuts
//!   serve's turns and the run's. The close of a thought cut short (`thought_cut.rs`, the repair
//!   of §1.7) is both's.
//!
//! What sends a request, or writes through the caller's own types, stays with its caller:
//! serve's guess request and its race with the turn (`serve/ahead.rs`), choose's re-ask
//! (`serve/reask.rs`), the answered-call refusal inside the reader (`serve/read.rs`); the run's
//! guess request and answer-only turn (`agent/first_call.rs`), the refusal's correction (in the
//! turn dispatcher, `agent/decide.rs`), and the run's memory that feeds the loop guard and the
//! named files from its events (`agent/memory.rs`).
//!
//! What is not a policy is the protocol itself (docs/protocol.md): reading a turn, binding
//! arguments, the role's schema, the step limit, and the loop guard's A/A/A and A/B/A/B rules
//! (`loopguard/`, §1.6), which end a run that would otherwise never end.

#[cfg(feature = "serve")]
pub(crate) mod choose;
mod conversation;
pub(crate) mod decide;
#[cfg(feature = "serve")]
pub(crate) mod further;
#[cfg(feature = "serve")]
pub(crate) mod grounded;
#[cfg(feature = "serve")]
pub(crate) mod grounding;
pub(crate) mod guess;
mod judgement;
mod loopguard;
mod mentions;
mod named;
pub(crate) mod named_refusal;
mod observed;
mod path_words;
mod repeat;
mod thought_cut;
#[cfg(feature = "serve")]
pub(crate) mod unsaid;
mod view;
mod wordless;
mod words;

use std::fmt;
use std::str::FromStr;

#[cfg(feature = "serve")]
pub(crate) use choose::Better;
pub(crate) use conversation::{Choice, Decision, Entry, PastCall, ToolSpec};
pub(crate) use judgement::Judgement;
pub(crate) use loopguard::{CallKey, Check, LoopGuard};
pub(crate) use named::QuestionNames;
pub(crate) use named_refusal::Answering;
pub(crate) use observed::{output_lines, tool_result};
pub(crate) use path_words::path_words;
pub use repeat::{RepeatGuard, Repetition, RepetitionKind, Watch};
pub(crate) use thought_cut::thought_end;
pub(crate) use view::View;
pub(crate) use wordless::{WORDLESS_LINE, holds_wordless_run};
pub(crate) use words::{MAX_NAME, name_of};

/// One steering rule (see the module docs for the list).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Policy {
    /// Serve's grounding: a first call whose values the conversation never gave is declined.
    Grounding,
    /// Serve's guess: a call whose tool is not about the model's own function is declined.
    Guess,
    /// Serve's further calls: one that brings nothing the question asks for is dropped.
    Further,
    /// Serve's choice: a lone call is asked again for the tool the question's words name.
    Choose,
    /// Serve's optional arguments: one whose value nobody gave is left out of a kept call.
    UnsaidOptional,
    /// Serve's answered calls: a turn that only repeats calls already answered is refused.
    AnsweredCall,
    /// Serve's thought mode: no thought before a call under `--thought none`.
    NoThought,
    /// The counting guard: a constrained line that counts on without a word is cut.
    Counting,
    /// The degeneration guard: a turn repeating itself is cut.
    Repeat,
    /// The agent's decision step before its first call.
    Decide,
    /// The notice naming the question's files no call has used.
    NamedFilesNotice,
    /// The refusal of an answer before every named file was used.
    NamedFilesRefusal,
    /// The header of a tool's result (the call, the number of lines).
    ObservationHeader,
}

impl Policy {
    /// Every policy, in the order of the module docs.
    pub const ALL: [Policy; 13] = [
        Policy::Grounding,
        Policy::Guess,
        Policy::Further,
        Policy::Choose,
        Policy::UnsaidOptional,
        Policy::AnsweredCall,
        Policy::NoThought,
        Policy::Counting,
        Policy::Repeat,
        Policy::Decide,
        Policy::NamedFilesNotice,
        Policy::NamedFilesRefusal,
        Policy::ObservationHeader,
    ];

    /// Its name, as the config and `--policy-off` write it.
    pub fn name(self) -> &'static str {
        self.about().0
    }

    /// What it decides, in one line.
    pub fn description(self) -> &'static str {
        self.about().1
    }

    fn about(self) -> (&'static str, &'static str) {
        match self {
            Policy::Grounding => (
                "grounding",
                "serve declines a first call none of whose values the conversation gave",
            ),
            Policy::Guess => (
                "guess",
                "serve declines a call whose tool shares no word with the function the model names when asked about the question alone, without the tools",
            ),
            Policy::Further => (
                "further",
                "serve drops a further call of a turn that brings nothing the question asks for",
            ),
            Policy::Choose => (
                "choose",
                "serve asks a lone call (or a text answer) again for the tool the question's words lead to",
            ),
            Policy::UnsaidOptional => (
                "unsaid-optional",
                "serve leaves out of a kept call an optional argument whose value the conversation never gave (the tool's default applies)",
            ),
            Policy::AnsweredCall => (
                "answered-call",
                "serve drops from a turn each call that repeats a call whose result the conversation already holds, and asks for the answer when none is left",
            ),
            Policy::NoThought => (
                "no-thought",
                "serve's turns that may call have no thought under --thought none (off: a thought as in a run)",
            ),
            Policy::Counting => (
                "counting",
                "a grammar-constrained line that runs on without a word (digits, dates, counting) is cut",
            ),
            Policy::Repeat => (
                "repeat",
                "a turn that keeps repeating itself is cut (the degeneration guard)",
            ),
            Policy::Decide => (
                "decide",
                "a run's first call is declined when the question names no file and the function the model names for the question alone shares no word with the tool",
            ),
            Policy::NamedFilesNotice => (
                "named-files-notice",
                "after a result, the files the question names that no call has used are named",
            ),
            Policy::NamedFilesRefusal => (
                "named-files-refusal",
                "an answer that comes before a call used every file the question names is refused",
            ),
            Policy::ObservationHeader => (
                "observation-header",
                "a result begins with the call and the number of lines it returned",
            ),
        }
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A name that is no policy's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown policy '{name}': the policies are {}", known())]
#[non_exhaustive]
pub struct UnknownPolicy {
    /// The name given.
    pub name: String,
}

fn known() -> String {
    Policy::ALL.map(Policy::name).join(", ")
}

impl FromStr for Policy {
    type Err = UnknownPolicy;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim().to_ascii_lowercase().replace('_', "-");
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == name)
            .ok_or_else(|| UnknownPolicy { name: s.into() })
    }
}

/// Which policies are on: all of them unless switched off.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Policies {
    /// One bit per policy of [`Policy::ALL`], set when it is off.
    off: u32,
}

impl Policies {
    /// Every policy on (the default).
    pub fn all() -> Self {
        Policies::default()
    }

    /// Whether `policy` is on.
    pub fn on(self, policy: Policy) -> bool {
        self.off & bit(policy) == 0
    }

    /// These policies with `policy` switched off.
    pub fn without(self, policy: Policy) -> Self {
        Policies {
            off: self.off | bit(policy),
        }
    }

    /// Every policy on but the ones `names` gives (an unknown name is an error naming the
    /// known ones).
    pub fn off<S: AsRef<str>>(names: &[S]) -> Result<Self, UnknownPolicy> {
        names.iter().try_fold(Policies::all(), |set, name| {
            Ok(set.without(name.as_ref().parse()?))
        })
    }

    /// The names of the policies switched off.
    pub fn off_names(self) -> Vec<&'static str> {
        Policy::ALL
            .into_iter()
            .filter(|p| !self.on(*p))
            .map(Policy::name)
            .collect()
    }
}

fn bit(policy: Policy) -> u32 {
    let i = Policy::ALL.iter().position(|p| *p == policy).unwrap_or(0);
    1 << i
}

impl Policy {
    /// Where it acts (`serve`, `run` or both) and the files that implement it, for
    /// `tagloop policies` (paths under `src/`).
    pub fn place(self) -> &'static str {
        match self {
            Policy::Grounding => "serve: policy/grounding.rs, policy/mentions.rs",
            Policy::Guess => "serve: policy/guess.rs, serve/ahead.rs",
            Policy::Further => "serve: policy/further.rs, policy/grounded.rs",
            Policy::Choose => "serve: policy/choose.rs, serve/reask.rs",
            Policy::UnsaidOptional => "serve: policy/unsaid.rs",
            Policy::AnsweredCall => "serve: serve/read.rs",
            Policy::NoThought => "serve: serve/thought.rs",
            Policy::Counting => "serve and run: policy/wordless.rs",
            Policy::Repeat => "serve and run: policy/repeat.rs",
            Policy::Decide => "run: policy/decide.rs, agent/first_call.rs",
            Policy::NamedFilesNotice => "run: policy/named.rs, agent/act.rs",
            Policy::NamedFilesRefusal => "run: policy/named_refusal.rs, agent/decide.rs",
            Policy::ObservationHeader => "run: policy/observed.rs",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_policy_is_named_once_and_read_back_by_its_name() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>(), Ok(p));
            assert!(!p.description().is_empty());
        }
        let mut names = Policy::ALL.map(Policy::name).to_vec();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Policy::ALL.len());
        assert_eq!(
            "Named_Files_Refusal".parse::<Policy>(),
            Ok(Policy::NamedFilesRefusal)
        );
    }

    #[test]
    fn all_are_on_until_switched_off_by_name() {
        let all = Policies::all();
        assert!(Policy::ALL.into_iter().all(|p| all.on(p)));
        let some = Policies::off(&["grounding", "repeat"]).unwrap();
        assert!(!some.on(Policy::Grounding) && !some.on(Policy::Repeat));
        assert!(some.on(Policy::Guess));
        assert_eq!(some.off_names(), ["grounding", "repeat"]);
    }

    #[test]
    fn an_unknown_name_lists_the_known_ones() {
        let e = Policies::off(&["grounding", "grondingg"]).unwrap_err();
        let said = e.to_string();
        assert!(said.starts_with("unknown policy 'grondingg'"), "{said}");
        assert!(said.contains("named-files-refusal") && said.contains("observation-header"));
    }

    #[test]
    fn every_place_names_files_that_exist() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        for p in Policy::ALL {
            let (side, files) = p.place().split_once(": ").expect("side: files");
            assert!(["serve", "run", "serve and run"].contains(&side), "{p}");
            for f in files.split(", ") {
                assert!(
                    src.join(f).exists(),
                    "{p}: src/{f} is gone: update Policy::place"
                );
            }
        }
    }
}
