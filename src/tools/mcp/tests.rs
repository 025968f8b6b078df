//! Unit tests of command-line splitting and name sanitising (servers: tests/tools_mcp*.rs).

use super::command_line::{CommandLine, program_name, sanitize, split_command_line};

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
fn only_an_unquoted_name_makes_an_assignment() {
    let CommandLine { env, argv } = split_command_line(r#"A=1\ 2 B="x=y z" "C=3" prog"#).unwrap();
    assert_eq!(
        env,
        [("A".into(), "1 2".into()), ("B".into(), "x=y z".into())]
    );
    assert_eq!(argv, ["C=3", "prog"]);
    let CommandLine { env, argv } = split_command_line("E= prog # a comment").unwrap();
    assert_eq!(env, [("E".into(), "".into())]);
    assert_eq!(argv, ["prog"]);
}

#[test]
fn the_program_name_comes_from_the_same_split() {
    // A quoted path with spaces, after an assignment that holds a token.
    assert_eq!(
        program_name(r#"TOKEN=sk-1 "/opt/my tools/mcp server" --key sk-2"#).as_deref(),
        Some("mcp server")
    );
    assert_eq!(program_name("npx -y server").as_deref(), Some("npx"));
    assert_eq!(program_name("'open"), None);
    assert_eq!(program_name("X=1"), None);
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
