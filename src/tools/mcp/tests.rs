//! Unit tests of command-line splitting and name sanitising (servers: tests/tools_mcp*.rs).

use super::command_line::{CommandLine, sanitize, split_command_line};

#[test]
fn splits_like_a_shell() {
    let CommandLine { env, argv } =
        split_command_line(r#"node "my dir/server.js" --root 'a b' x\ y"#).unwrap();
    assert!(env.is_empty());
    assert_eq!(argv, ["node", "my dir/server.js", "--root", "a b", "x y"]);
    let CommandLine { env, argv } =
        split_command_line(r#"DEBUG=1 A_B="x y" prog --k=v "e\"q""#).unwrap();
    assert_eq!(
        env,
        [("DEBUG".into(), "1".into()), ("A_B".into(), "x y".into())]
    );
    assert_eq!(argv, ["prog", "--k=v", "e\"q"]);
    assert!(split_command_line("prog 'open").is_err());
    assert!(split_command_line("   ").is_err());
    assert!(split_command_line("X=1").is_err());
    let argv = split_command_line("'' prog").unwrap().argv;
    assert_eq!(argv, ["", "prog"]);
}

#[test]
fn sanitizes_names() {
    assert_eq!(
        sanitize("secure-filesystem-server"),
        "secure_filesystem_server"
    );
    assert_eq!(sanitize("fs.v2"), "fs_v2");
    assert_eq!(sanitize("9lives"), "_9lives");
    assert_eq!(sanitize(""), "mcp");
}
