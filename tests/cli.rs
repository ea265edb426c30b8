//! Golden CLI tests: each `tests/cmd/<command>-<scenario>.toml` runs `ctx` with its arguments
//! and `.stdin`, and compares stdout, stderr and the exit code with the files beside it.
//! Re-bless after an intended change with `TRYCMD=overwrite cargo test --test cli`, then review
//! the diff like any other. trycmd normalises `\` to `/` in the files it writes (it treats them
//! as Windows path separators), so escaped quotes in JSON appear as `/"` in `.stdout` files.

#[test]
fn golden() {
    trycmd::TestCases::new()
        .env("CTX_MODEL", "")
        .case("tests/cmd/*.toml");
}
