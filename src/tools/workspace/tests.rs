//! Unit tests of the handle-based resolution (the escape suite is tests/tools_escape.rs).

use std::sync::atomic::Ordering;

use super::*;

/// Both ways of opening beneath the root (openat2, and the component walk used where it is
/// missing) follow no link, in the middle or at the end.
#[test]
fn open_beneath_follows_no_link_either_way() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path();
    fs::create_dir_all(root.join("a/b")).expect("mkdir");
    fs::write(root.join("a/b/f"), "x").expect("write");
    std::os::unix::fs::symlink("a", root.join("link_dir")).expect("link");
    std::os::unix::fs::symlink("a/b/f", root.join("link_file")).expect("link");
    let fd = sys::open_dir_path(root).expect("root");
    for walk in [false, true] {
        if walk {
            sys::OPENAT2_MISSING.store(true, Ordering::Relaxed);
        }
        let ok = sys::open_beneath(&fd, Path::new("a/b/f"), libc::O_RDONLY, 0);
        assert!(ok.is_ok(), "walk={walk}: {ok:?}");
        for bad in ["link_dir/b/f", "link_file"] {
            let e = sys::open_beneath(&fd, Path::new(bad), libc::O_RDONLY, 0)
                .expect_err("a link must not be followed");
            assert_eq!(
                e.raw_os_error(),
                Some(libc::ELOOP),
                "walk={walk} {bad}: {e}"
            );
        }
        let e = sys::open_beneath(&fd, Path::new("../x"), libc::O_RDONLY, 0)
            .expect_err("`..` must not be accepted");
        assert!(
            matches!(e.raw_os_error(), Some(libc::EXDEV) | Some(libc::ENOENT)),
            "walk={walk}: {e}"
        );
    }
}

#[test]
fn protected_names() {
    for n in [".env", ".ENV", ".env.local", "tagloop.toml", "TagLoop.TOML"] {
        assert!(is_protected_name(OsStr::new(n)), "{n}");
    }
    for n in [".envrc", "env", "tagloop.toml.bak", "my.env", "x.toml"] {
        assert!(!is_protected_name(OsStr::new(n)), "{n}");
    }
}
