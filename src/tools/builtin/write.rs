//! The tools that change the workspace (offered only with `allow_write`): write, append, edit,
//! make a folder, move and delete; each one asks first under `--confirm`.

use super::{Args, Ctx, Reply, ask, blocking, not_a_folder_path, preview, req_str};

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::tools::ToolError;
use crate::tools::workspace::{Access, Workspace};

/// What a `write_file` or an `append_file` call asks for: the content, the resolved file, the
/// file as the model names it, and how long it is now (`None` when it does not exist yet).
fn file_write(ctx: &Ctx, args: &Args) -> Result<(String, PathBuf, String, Option<u64>), ToolError> {
    let path = req_str(args, "path")?;
    let content = req_str(args, "content")?;
    not_a_folder_path(&path)?;
    let target = ctx.ws.resolve(&path, Access::Write)?;
    let shown = ctx.ws.display(&target);
    let existing = existing_file_len(&target, &shown)?;
    Ok((content, target, shown, existing))
}

/// `write_file(path, content)`: create or replace a file atomically.
pub(super) async fn write_file(ctx: Arc<Ctx>, args: Args) -> Reply {
    let (content, target, shown, existing) = file_write(&ctx, &args)?;
    let what = match existing {
        Some(n) => format!(
            "replace `{shown}` ({n} bytes) with {} bytes:",
            content.len()
        ),
        None => format!("create `{shown}` with {} bytes:", content.len()),
    };
    ask(
        &ctx,
        format!("write_file: {what}\n{}", preview(&content, 20)),
    )
    .await?;
    blocking(move || {
        ctx.ws.write_atomic(&target, content.as_bytes())?;
        Ok(match existing {
            Some(n) => format!(
                "wrote {} bytes to `{shown}` (replaced {n} bytes)",
                content.len()
            ),
            None => format!("wrote {} bytes to `{shown}` (new file)", content.len()),
        })
    })
    .await
}

/// `append_file(path, content)`: append in place, without reading the file.
pub(super) async fn append_file(ctx: Arc<Ctx>, args: Args) -> Reply {
    let (content, target, shown, existing) = file_write(&ctx, &args)?;
    ask(
        &ctx,
        format!(
            "append_file: append {} bytes to `{shown}`{}:\n{}",
            content.len(),
            if existing.is_none() {
                " (new file)"
            } else {
                ""
            },
            preview(&content, 20)
        ),
    )
    .await?;
    blocking(move || {
        let len = ctx.ws.append(&target, content.as_bytes())?;
        Ok(format!(
            "appended {} bytes to `{shown}` (now {len} bytes)",
            content.len(),
        ))
    })
    .await
}

/// `edit_file(path, old, new)`: replace the one occurrence of `old`.
pub(super) async fn edit_file(ctx: Arc<Ctx>, args: Args) -> Reply {
    let path = req_str(&args, "path")?;
    let old = req_str(&args, "old")?;
    let new = req_str(&args, "new")?;
    not_a_folder_path(&path)?;
    let target = ctx.ws.resolve(&path, Access::Read)?;
    let shown = ctx.ws.display(&target);
    let text = read_text_for_edit(&ctx.ws, &target, &shown, ctx.limits.edit_max_bytes)?;
    let at = find_unique(&text, &old, &shown)?;
    let line = text[..at].matches('\n').count() + 1;
    ask(
        &ctx,
        format!(
            "edit_file: in `{shown}` at line {line}, replace\n{}\nwith\n{}",
            preview(&old, 15),
            preview(&new, 15)
        ),
    )
    .await?;
    blocking(move || {
        let mut out = String::with_capacity(text.len() + new.len());
        out.push_str(&text[..at]);
        out.push_str(&new);
        out.push_str(&text[at + old.len()..]);
        ctx.ws.write_atomic(&target, out.as_bytes())?;
        Ok(format!(
            "edited `{shown}`: replaced 1 occurrence at line {line}"
        ))
    })
    .await
}

/// `make_dir(path)`.
pub(super) async fn make_dir(ctx: Arc<Ctx>, args: Args) -> Reply {
    let path = req_str(&args, "path")?;
    let target = ctx.ws.resolve(&path, Access::Write)?;
    let shown = ctx.ws.display(&target);
    match fs::symlink_metadata(&target) {
        Ok(m) if m.is_dir() => return Ok(format!("folder `{shown}` already exists")),
        Ok(_) => {
            return Err(ToolError::Failed(format!(
                "`{shown}` already exists and is not a folder"
            )));
        }
        Err(_) => {}
    }
    ask(&ctx, format!("make_dir: create folder `{shown}`")).await?;
    blocking(move || {
        ctx.ws.make_dir(&target)?;
        Ok(format!("created folder `{shown}`"))
    })
    .await
}

/// `move_path(from, to)`: never over an existing target.
pub(super) async fn move_path(ctx: Arc<Ctx>, args: Args) -> Reply {
    let from = req_str(&args, "from")?;
    let to = req_str(&args, "to")?;
    let src = ctx.ws.resolve(&from, Access::Entry)?;
    let dst = ctx.ws.resolve(&to, Access::Entry)?;
    let (src_shown, dst_shown) = (ctx.ws.display(&src), ctx.ws.display(&dst));
    let meta = fs::symlink_metadata(&src)
        .map_err(|_| ToolError::Failed(format!("`{from}` not found in the workspace")))?;
    if fs::symlink_metadata(&dst).is_ok() {
        return Err(ToolError::Failed(format!(
            "`{dst_shown}` already exists; delete it first or choose another name"
        )));
    }
    if meta.is_dir() && dst.starts_with(&src) {
        return Err(ToolError::Failed(format!(
            "cannot move folder `{src_shown}` into itself (`{dst_shown}`)"
        )));
    }
    ask(
        &ctx,
        format!("move_path: move `{src_shown}` to `{dst_shown}`"),
    )
    .await?;
    blocking(move || {
        ctx.ws.rename(&src, &dst)?;
        Ok(format!("moved `{src_shown}` to `{dst_shown}`"))
    })
    .await
}

/// `delete_path(path)`: a file, a link (not its target) or a folder with its contents.
pub(super) async fn delete_path(ctx: Arc<Ctx>, args: Args) -> Reply {
    let path = req_str(&args, "path")?;
    let target = ctx.ws.resolve(&path, Access::Entry)?;
    let shown = ctx.ws.display(&target);
    let meta = fs::symlink_metadata(&target)
        .map_err(|_| ToolError::Failed(format!("`{path}` not found in the workspace")))?;
    let is_dir = meta.is_dir();
    let what = if is_dir {
        format!("delete_path: delete folder `{shown}` and everything in it")
    } else if meta.file_type().is_symlink() {
        format!("delete_path: delete the symbolic link `{shown}` (not its target)")
    } else {
        format!("delete_path: delete file `{shown}` ({} bytes)", meta.len())
    };
    ask(&ctx, what).await?;
    blocking(move || {
        ctx.ws.remove(&target)?;
        Ok(if is_dir {
            format!("deleted folder `{shown}` and its contents")
        } else {
            format!("deleted `{shown}`")
        })
    })
    .await
}

pub(super) fn existing_file_len(target: &Path, shown: &str) -> Result<Option<u64>, ToolError> {
    match fs::symlink_metadata(target) {
        Ok(m) if m.is_dir() => Err(ToolError::Failed(format!("`{shown}` is a folder"))),
        Ok(m) => Ok(Some(m.len())),
        Err(_) => Ok(None),
    }
}

/// The whole text of a file for `edit_file`, refusing files above `max` bytes (the edit holds
/// the old and the new text at once) before reading anything.
pub(super) fn read_text_for_edit(
    ws: &Workspace,
    target: &Path,
    shown: &str,
    max: u64,
) -> Result<String, ToolError> {
    let file = ws.open_read(target)?;
    let meta = file
        .metadata()
        .map_err(|e| ToolError::Failed(format!("cannot read `{shown}`: {e}")))?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!("`{shown}` is a folder")));
    }
    if meta.len() > max {
        return Err(ToolError::Failed(format!(
            "`{shown}` has {} bytes; edit_file changes files of at most {max} bytes. Use write_file to replace it whole, or run_command if it is allowed",
            meta.len()
        )));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| ToolError::Failed(format!("cannot read `{shown}`: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(ToolError::Failed(format!(
            "`{shown}` grew past {max} bytes while it was read; nothing was changed"
        )));
    }
    String::from_utf8(bytes).map_err(|_| {
        ToolError::Failed(format!(
            "`{shown}` is not UTF-8 text; edit_file cannot change it"
        ))
    })
}

/// The byte offset of the only occurrence of `old` in `text` (overlapping occurrences count).
pub(super) fn find_unique(text: &str, old: &str, shown: &str) -> Result<usize, ToolError> {
    if old.is_empty() {
        return Err(ToolError::Refused(
            "`old` is empty; give the exact text to replace".to_string(),
        ));
    }
    let mut hits = Vec::new();
    let mut from = 0;
    while let Some(i) = text[from..].find(old) {
        let at = from + i;
        hits.push(at);
        // Step one character so that overlapping matches are counted too.
        from = at + text[at..].chars().next().map_or(1, char::len_utf8);
        if hits.len() > 50 {
            break;
        }
    }
    match hits.len() {
        1 => Ok(hits[0]),
        0 => {
            let hint = if text.contains(old.trim()) && !old.trim().is_empty() {
                " (it matches when leading/trailing whitespace is ignored: copy the exact text from read_file)"
            } else {
                " (check spelling, whitespace and indentation: copy the exact text from read_file)"
            };
            Err(ToolError::Refused(format!(
                "`old` was not found in `{shown}`{hint}; nothing was changed"
            )))
        }
        n => {
            let lines: Vec<String> = hits
                .iter()
                .take(10)
                .map(|&at| (text[..at].matches('\n').count() + 1).to_string())
                .collect();
            let more = if n > 50 { "more than 50" } else { "" };
            let count = if more.is_empty() {
                n.to_string()
            } else {
                more.to_string()
            };
            Err(ToolError::Refused(format!(
                "`old` matches {count} times in `{shown}` (at lines {}); include more surrounding text so it matches exactly once; nothing was changed",
                lines.join(", ")
            )))
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Read-only tools
