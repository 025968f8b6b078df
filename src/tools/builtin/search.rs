//! `list_dir` and `search_files`: walks that respect ignore files, never follow links and print
//! paths relative to the workspace root; search skips binary files and files with giant lines.

use super::{Args, Ctx, Limits, Reply, blocking, opt_bool, opt_str, req_str};

use std::path::{Path, PathBuf};
use std::sync::Arc;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::{BinaryDetection, SearcherBuilder, sinks::Lossy};

use crate::tools::ToolError;
use crate::tools::workspace::{Access, Workspace, is_protected_name};

/// `list_dir(path?, recursive?)`.
pub(super) async fn list_dir(ctx: Arc<Ctx>, args: Args) -> Reply {
    let path = opt_str(&args, "path")?.unwrap_or_else(|| ".".to_string());
    let recursive = opt_bool(&args, "recursive")?;
    blocking(move || list_folder(&ctx.ws, &ctx.limits, &path, recursive)).await
}

/// `search_files(pattern, path?)`.
pub(super) async fn search_files(ctx: Arc<Ctx>, args: Args) -> Reply {
    let pattern = req_str(&args, "pattern")?;
    let path = opt_str(&args, "path")?.unwrap_or_else(|| ".".to_string());
    blocking(move || search_in(&ctx.ws, &ctx.limits, &pattern, &path)).await
}

pub(super) fn walker(root: &Path, max_depth: Option<usize>) -> ignore::Walk {
    ignore::WalkBuilder::new(root)
        .hidden(false)
        .parents(true)
        .ignore(true)
        .git_ignore(true)
        .git_exclude(true)
        .git_global(false)
        .require_git(false)
        .follow_links(false)
        .max_depth(max_depth)
        .sort_by_file_name(|a, b| a.cmp(b))
        .filter_entry(|e| e.file_name() != ".git")
        .build()
}

pub(super) fn list_folder(
    ws: &Workspace,
    limits: &Limits,
    path: &str,
    recursive: bool,
) -> Result<String, ToolError> {
    let dir = ws.resolve(path, Access::Read)?;
    let shown = ws.display(&dir);
    if !dir.is_dir() {
        return Err(ToolError::Failed(format!(
            "`{shown}` is a file, not a folder; use read_file to read it"
        )));
    }
    let mut lines = Vec::new();
    let mut cut = false;
    for entry in walker(&dir, if recursive { None } else { Some(1) }) {
        let Ok(entry) = entry else { continue };
        if entry.depth() == 0 {
            continue;
        }
        if lines.len() >= limits.list_max_entries {
            cut = true;
            break;
        }
        let rel = ws.display(entry.path());
        let line = match entry.file_type() {
            Some(ft) if ft.is_dir() => format!("{rel}/"),
            Some(ft) if ft.is_symlink() => format!("{rel} (symbolic link)"),
            Some(ft) if ft.is_file() => rel,
            _ => format!("{rel} (special file)"),
        };
        lines.push(line);
    }
    if lines.is_empty() {
        return Ok(format!("`{shown}` is empty"));
    }
    let mut out = lines.join("\n");
    if cut {
        out.push_str(&format!(
            "\n[… cut at {} entries; list a sub-folder to see more]",
            limits.list_max_entries
        ));
    }
    Ok(out)
}

/// When a pattern that matched nothing is itself the path of a file or folder (from the
/// workspace root or from the searched folder), the sentence that says so and how to open it.
/// The 1.5B Qwen searched for `docs/setup.md` to read it, was told "no matches", and made the
/// same search twice more. Only what the file tools may read is named (a protected or outside
/// path resolves to an error and is not mentioned).
fn path_named(ws: &Workspace, pattern: &str, path: &str) -> Option<String> {
    let pattern = pattern.trim().trim_start_matches("./");
    if !pattern.chars().any(char::is_alphanumeric) {
        return None;
    }
    let inside = format!("{}/{pattern}", path.trim_end_matches('/'));
    let found = [pattern, inside.as_str()]
        .into_iter()
        .find_map(|p| ws.resolve(p, Access::Read).ok())?;
    let shown = ws.display(&found);
    Some(if found.is_dir() {
        format!(
            "`{shown}` is a folder in the workspace: list it with list_dir(path=\"{shown}\"). search_files looks for text inside files, and no line matches that name."
        )
    } else {
        format!(
            "`{shown}` is a file in the workspace: read it with read_file(path=\"{shown}\"). search_files looks for text inside files, and no line matches that name."
        )
    })
}

pub(super) fn search_in(
    ws: &Workspace,
    limits: &Limits,
    pattern: &str,
    path: &str,
) -> Result<String, ToolError> {
    let matcher = RegexMatcherBuilder::new()
        .build(pattern)
        .map_err(|e| ToolError::Failed(format!("invalid regular expression: {e}")))?;
    let root = ws.resolve(path, Access::Read)?;
    let mut searcher = SearcherBuilder::new()
        .binary_detection(BinaryDetection::quit(0))
        .line_number(true)
        // The searcher keeps a whole line in memory: bound it (a longer line is an error, and
        // that file is named as skipped).
        .heap_limit(Some(limits.search_max_line_bytes))
        .build();
    let mut skipped: Vec<String> = Vec::new();
    let mut hits: Vec<String> = Vec::new();
    let max = limits.search_max_matches;
    let mut cut = false;
    let mut files: Vec<PathBuf> = Vec::new();
    for entry in walker(&root, None) {
        let Ok(entry) = entry else { continue };
        // tagloop's own configuration and secret files are never searched (silently: the
        // model learns nothing about their content, not even whether a pattern matches).
        if entry.file_type().is_some_and(|ft| ft.is_file()) && !is_protected_name(entry.file_name())
        {
            files.push(entry.into_path());
        }
    }
    for file in files {
        if cut {
            break;
        }
        let rel = ws.display(&file);
        // Open through the workspace's handle, following no link: a file swapped for a link
        // after the walk is not searched.
        let handle = match ws.open_read(&file) {
            Ok(f) => f,
            Err(e) => {
                tracing::debug!("search_files: skipping {rel}: {e}");
                continue;
            }
        };
        let result = searcher.search_file(
            &matcher,
            &handle,
            Lossy(|lnum, line| {
                if hits.len() >= max {
                    cut = true;
                    return Ok(false);
                }
                let text = line.trim_end_matches(['\n', '\r']);
                hits.push(format!(
                    "{rel}:{lnum}: {}",
                    crate::text::clip_chars(text, limits.search_max_line_chars)
                ));
                Ok(true)
            }),
        );
        if let Err(e) = result {
            tracing::debug!("search_files: skipping {rel}: {e}");
            if e.to_string().contains("allocation limit") {
                skipped.push(rel);
            }
        }
    }
    let skipped_note = if skipped.is_empty() {
        String::new()
    } else {
        format!(
            "\n[skipped, a line longer than {} bytes: {}]",
            limits.search_max_line_bytes,
            skipped.join(", ")
        )
    };
    if hits.is_empty() {
        let none = format!(
            "no matches for /{pattern}/ in `{}`{skipped_note}",
            ws.display(&root)
        );
        // What the model meant comes first: a small model reads "no matches" as "no such file".
        return Ok(match path_named(ws, pattern, path) {
            Some(named) => format!("{named}\n({none})"),
            None => none,
        });
    }
    let mut out = hits.join("\n");
    out.push_str(&skipped_note);
    if cut {
        out.push_str(&format!(
            "\n[… cut at {max} matches; use a narrower pattern or path]"
        ));
    }
    Ok(out)
}
