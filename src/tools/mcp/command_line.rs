//! MCP server command lines: split like a POSIX shell would (quotes, backslashes, leading
//! `NAME=value` assignments), without running a shell; and server and tool names made safe for
//! `SERVER.TOOL`.

/// Why a command line cannot be split.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandLineError {
    /// A quote (`'` or `"`) is never closed.
    #[error("unterminated {} quote", if *.0 == '"' { "double" } else { "single" })]
    UnterminatedQuote(char),
    /// The line ends in a lone backslash.
    #[error("a backslash at the end")]
    TrailingBackslash,
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
    // (word, byte offset in the word where quoting or escaping first started)
    let mut words: Vec<(String, Option<usize>)> = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quoted: Option<usize> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push((std::mem::take(&mut cur), quoted));
                    in_word = false;
                    quoted = None;
                }
            }
            '\'' => {
                in_word = true;
                quoted = quoted.or(Some(cur.len()));
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err(CommandLineError::UnterminatedQuote('\'')),
                    }
                }
            }
            '"' => {
                in_word = true;
                quoted = quoted.or(Some(cur.len()));
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(e @ ('"' | '\\' | '$' | '`')) => cur.push(e),
                            Some('\n') => {}
                            Some(other) => {
                                cur.push('\\');
                                cur.push(other);
                            }
                            None => return Err(CommandLineError::UnterminatedQuote('"')),
                        },
                        Some(c) => cur.push(c),
                        None => return Err(CommandLineError::UnterminatedQuote('"')),
                    }
                }
            }
            '\\' => {
                in_word = true;
                quoted = quoted.or(Some(cur.len()));
                match chars.next() {
                    Some('\n') => {}
                    Some(c) => cur.push(c),
                    None => return Err(CommandLineError::TrailingBackslash),
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push((cur, quoted));
    }
    let mut env = Vec::new();
    let mut argv = Vec::new();
    for (word, quoted_at) in words {
        if argv.is_empty()
            && let Some(eq) = word.find('=')
            && quoted_at.is_none_or(|q| eq < q)
            && let Some((k, v)) = word.split_once('=')
            && !k.is_empty()
            && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !k.starts_with(|c: char| c.is_ascii_digit())
        {
            env.push((k.to_string(), v.to_string()));
            continue;
        }
        argv.push(word);
    }
    if argv.is_empty() {
        return Err(CommandLineError::NoProgram);
    }
    Ok(CommandLine { env, argv })
}
