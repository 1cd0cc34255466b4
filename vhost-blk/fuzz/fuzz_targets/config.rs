//! The settings a user gives: a TOML settings file (every key, nested `[completion]` and
//! `[topology]` tables) or a command line, validated into a `Config`. Checks: no panic; either
//! a `Config` or one error line, from TOML's parser too. Nothing is created or deleted by validation (the fuzzer runs
//! in a scratch directory; `--config` files are not read).
#![no_main]

use clap::Parser;
use libfuzzer_sys::fuzz_target;
use vhost_blk::config::{Args, Config, Options};

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let args = if mode & 1 == 0 {
        let options = match Options::parse(text) {
            Ok(o) => o,
            Err(e) => return assert_one_line(&e),
        };
        Args {
            options,
            ..Default::default()
        }
    } else {
        let words = std::iter::once("vhost-blk").chain(text.split(['\0', '\n']));
        match Args::try_parse_from(words) {
            Ok(mut a) => {
                a.config = None;
                a
            }
            Err(_) => return,
        }
    };
    if let Err(e) = Config::try_from(args) {
        assert_one_line(&e.to_string());
    }
});

fn assert_one_line(line: &str) {
    assert!(
        !line.is_empty() && !line.contains('\n'),
        "not one line: {line:?}"
    );
}
