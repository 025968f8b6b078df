//! MCP server command lines: split like a POSIX shell would (quotes, backslashes and comments,
//! by the `shlex` crate; leading `NAME=value` assignments), without running a shell; and server
//! and tool names made safe for `SERVER.TOOL`.

/// Why a command line cannot be split.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandLineError {
    /// A quote (`'` or `"`) is never closed, or the line ends in a lone backslash.
    #[error("a quote that is never closed, or a backslash at the end")]
    BadQuoting,
    /// Only assignments, or nothing at all.
    #[error("it names no program")]
    NoProgram,
}

/// Replace characters outside `[A-Za-z0-9_]` by `_`; a leading digit gets a `_` in front; an
/// empty name becomes `mcp`.
pub fn sanitize(name: &str) -> String {
    let mut out: String = name
        .trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() {
        out.push_str("mcp");
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

/// A command line split into its parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    /// Leading `NAME=value` assignments, in order.
    pub env: Vec<(String, String)>,
    /// The program and its arguments (never empty).
    pub argv: Vec<String>,
}

/// Split a command line into leading `NAME=value` environment assignments and the argument
/// vector (see the module docs for the quoting rules).
pub fn split_command_line(line: &str) -> Result<CommandLine, CommandLineError> {
    let mut words = shlex::split(line).ok_or(CommandLineError::BadQuoting)?;
    let assignments = leading_assignments(line, &words);
    let argv = words.split_off(assignments);
    if argv.is_empty() {
        return Err(CommandLineError::NoProgram);
    }
    let env = words
        .into_iter()
        .filter_map(|w| {
            w.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
        })
        .collect();
    Ok(CommandLine { env, argv })
}

/// The file name of the program a command line runs, the only part of it that is safe to show
/// (its arguments and assignments may hold tokens); `None` when it does not split.
pub fn program_name(line: &str) -> Option<String> {
    let argv = split_command_line(line).ok()?.argv;
    let name = std::path::Path::new(argv.first()?).file_name()?;
    Some(name.to_string_lossy().into_owned())
}

/// How many of `words` (the split `line`) are leading `NAME=value` assignments. As in a shell,
/// the name and the `=` must be written unquoted: `"A=1" prog` runs a program named `A=1`.
fn leading_assignments(line: &str, words: &[String]) -> usize {
    let mut rest = line;
    let mut count = 0;
    for word in words {
        rest = rest.trim_start_matches([' ', '\t', '\n']);
        let Some((name, _)) = word.split_once('=') else {
            break;
        };
        let is_name = !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit());
        if !is_name || !rest.starts_with(name) || rest.as_bytes().get(name.len()) != Some(&b'=') {
            break;
        }
        count += 1;
        // The word as written ends at the first blank after which the text so far splits
        // into this one word (a blank inside quotes or after a backslash does not).
        let end = rest
            .match_indices([' ', '\t', '\n'])
            .map(|(i, _)| i)
            .chain([rest.len()])
            .find(|&i| shlex::split(&rest[..i]).is_some_and(|w| w.len() == 1));
        match end {
            Some(end) => rest = &rest[end..],
            None => break,
        }
    }
    count
}
