//! `read_file`: a file's text exactly as it is, read with a bounded buffer (a long line shows
//! its beginning), cut at a line boundary with a note saying where to read on.

use super::{Args, Ctx, Limits, Reply, blocking, not_a_folder_path, opt_pos_int, req_str};

use std::io::{BufRead, BufReader};
use std::sync::Arc;

use crate::tools::ToolError;
use crate::tools::workspace::{Access, Workspace};

/// `read_file(path, start_line?, end_line?)`.
pub(super) async fn read_file(ctx: Arc<Ctx>, args: Args) -> Reply {
    let path = req_str(&args, "path")?;
    let start = opt_pos_int(&args, "start_line")?;
    let end = opt_pos_int(&args, "end_line")?;
    not_a_folder_path(&path)?;
    // A small file is read right here: resolving, opening and one read of a local file cost
    // far less than handing the work to the blocking pool and back (two thread wake-ups). A
    // large file, which may take many reads, goes to the pool.
    let (reader, shown, file_len) = open_text(&ctx.ws, &path)?;
    if file_len <= INLINE_READ_MAX {
        return read_opened(reader, &shown, file_len, &ctx.limits, start, end);
    }
    blocking(move || read_opened(reader, &shown, file_len, &ctx.limits, start, end)).await
}

/// Files up to this size are read without the blocking pool (one buffer's worth: `open_text`
/// has already read them whole).
const INLINE_READ_MAX: u64 = 64 * 1024;

/// Lines `start..=end` of a text file `open_text` opened (the whole file, cut at the read
/// limit, without them).
fn read_opened(
    mut reader: BufReader<std::fs::File>,
    shown: &str,
    file_len: u64,
    limits: &Limits,
    start: Option<u64>,
    end: Option<u64>,
) -> Result<String, ToolError> {
    if let (Some(s), Some(e)) = (start, end)
        && e < s
    {
        return Err(ToolError::Failed(format!(
            "end_line ({e}) is before start_line ({s})"
        )));
    }
    let io = |e: std::io::Error| ToolError::Failed(format!("cannot read `{shown}`: {e}"));
    let cap = limits.read_max_bytes;
    let whole = start.is_none() && end.is_none();
    let start = start.unwrap_or(1);
    let lines = read_lines(&mut reader, cap, start, end).map_err(io)?;
    if lines.count == 0 {
        return Ok("(empty file)".to_string());
    }
    if lines.count < start && lines.cut_after.is_none() {
        return Err(ToolError::Failed(format!(
            "start_line {start} is past the end of `{shown}` ({} lines)",
            lines.count
        )));
    }
    let shown_bytes = lines.out.len();
    let mut text = into_text(lines.out);
    match lines.cut_after {
        None => {}
        Some((last, true)) => text.push_str(&format!(
            "\n[… cut: line {last} of `{shown}` is longer than {cap} bytes; this shows its first {shown_bytes} bytes and the rest of that line cannot be shown. Read on with start_line={}.]",
            last + 1
        )),
        Some((last, false)) if whole => text.push_str(&format!(
            "\n[… cut: `{shown}` has {file_len} bytes; this shows the first {shown_bytes} bytes (lines 1-{last}). Read on with start_line={}.]",
            last + 1
        )),
        Some((last, false)) => text.push_str(&format!(
            "\n[… cut at {cap} bytes: this shows lines {start}-{last}. Read on with start_line={}.]",
            last + 1
        )),
    }
    Ok(text)
}

/// Resolve and open a text file: a folder or a binary file (a NUL in its first 8 KiB) is
/// refused. Returns the reader, the path as the model names it, and the file's length.
fn open_text(
    ws: &Workspace,
    path: &str,
) -> Result<(BufReader<std::fs::File>, String, u64), ToolError> {
    let target = ws.resolve(path, Access::Read)?;
    let shown = ws.display(&target);
    let (file, meta) = ws.open_read_meta(&target)?;
    if meta.is_dir() {
        return Err(ToolError::Failed(format!(
            "`{shown}` is a folder; use list_dir to see what it contains"
        )));
    }
    // A small file needs no 64 KiB buffer (it would be one more large allocation per read).
    let capacity = usize::try_from(meta.len().saturating_add(1))
        .unwrap_or(usize::MAX)
        .clamp(512, 64 * 1024);
    let mut reader = BufReader::with_capacity(capacity, file);
    let head = reader
        .fill_buf()
        .map_err(|e| ToolError::Failed(format!("cannot read `{shown}`: {e}")))?;
    if head.iter().take(8192).any(|&b| b == 0) {
        return Err(ToolError::Failed(format!(
            "`{shown}` looks like a binary file ({} bytes); read_file shows text only",
            meta.len()
        )));
    }
    Ok((reader, shown, meta.len()))
}

/// The lines `start..=end` read with a bounded buffer: at most `cap` bytes are kept.
struct Lines {
    /// The bytes kept.
    out: Vec<u8>,
    /// Lines read.
    count: u64,
    /// The last line shown, and whether it was itself cut (longer than what was left of the cap).
    cut_after: Option<(u64, bool)>,
}

fn read_lines(
    reader: &mut impl BufRead,
    cap: usize,
    start: u64,
    end: Option<u64>,
) -> std::io::Result<Lines> {
    let mut out: Vec<u8> = Vec::new();
    let mut count: u64 = 0;
    let mut cut_after = None;
    // The last line ended at the end of the file: asking again would only read nothing.
    let mut ended = false;
    while !ended {
        let keep = if count + 1 < start {
            0
        } else {
            cap - out.len()
        };
        let before = out.len();
        let Some(line) = read_line_capped(reader, &mut out, keep)? else {
            break;
        };
        ended = line.at_end;
        count += 1;
        if count < start {
            continue;
        }
        if let Some(e) = end
            && count > e
        {
            out.truncate(before);
            break;
        }
        if line.len > line.kept as u64 {
            if before == 0 {
                // A single line longer than the cap: show its beginning, say it was cut.
                cut_after = Some((count, true));
            } else {
                out.truncate(before);
                cut_after = Some((count - 1, false));
            }
            break;
        }
    }
    Ok(Lines {
        out,
        count,
        cut_after,
    })
}

/// One line as [`read_line_capped`] saw it: its full length and how many bytes were kept.
pub(super) struct LineRead {
    len: u64,
    kept: usize,
    /// The line ended at the end of the file (nothing more to read).
    at_end: bool,
}

/// Read one line (up to and including `\n`) from `reader`, appending at most `keep` of its bytes
/// to `out` and skipping the rest, so that memory stays bounded whatever the line's length.
/// `None` at the end of the file.
pub(super) fn read_line_capped(
    reader: &mut impl BufRead,
    out: &mut Vec<u8>,
    keep: usize,
) -> std::io::Result<Option<LineRead>> {
    let mut line = LineRead {
        len: 0,
        kept: 0,
        at_end: false,
    };
    loop {
        let buf = reader.fill_buf()?;
        if buf.is_empty() {
            line.at_end = true;
            return Ok((line.len > 0).then_some(line));
        }
        let (chunk, done) = match memchr::memchr(b'\n', buf) {
            Some(i) => (&buf[..=i], true),
            None => (buf, false),
        };
        let take = chunk.len().min(keep - line.kept);
        out.extend_from_slice(&chunk[..take]);
        line.kept += take;
        line.len += chunk.len() as u64;
        let used = chunk.len();
        reader.consume(used);
        if done {
            return Ok(Some(line));
        }
    }
}

/// Bytes as text without a copy when they are valid UTF-8 (invalid sequences become U+FFFD).
pub(super) fn into_text(bytes: Vec<u8>) -> String {
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}
