//! The retention benchmark of SPEC §7: what `ctx fit` keeps of long real agent trajectories,
//! beside a naive baseline (drop the oldest messages until the rest fits) in the same run.
//!
//!   cargo build --release --bin ctx && cargo run --release --example retention
//!   cargo run --release --example retention -- --ctx target/release/ctx FILE...
//!
//! Each trajectory's key facts are annotated by rule (facts.rs; docs/retention.md), then `ctx
//! fit` is run at 50%, 25% and 10% of the trajectory's tokens and at 8,000 tokens, without and
//! with `--summarize=extractive`, and naive drop-oldest at the same budgets. Printed per budget:
//! facts retained overall and per category, the task kept, the newest tool result kept (in the
//! runs where it fits in half the budget), budget utilization (tokens after / budget) and the
//! runs that ended with exit 3. Deterministic: the same binary and files give the same table.

mod bench;
mod facts;

use std::path::PathBuf;

use bench::{DEFAULT_SET, Level, Method, measure, print_table};

fn main() {
    let mut args = std::env::args().skip(1);
    let mut ctx = PathBuf::from("target/release/ctx");
    let mut files: Vec<PathBuf> = Vec::new();
    while let Some(a) = args.next() {
        if a == "--ctx" {
            ctx = PathBuf::from(args.next().expect("--ctx PATH"));
        } else {
            files.push(PathBuf::from(a));
        }
    }
    if files.is_empty() {
        let list = std::fs::read_to_string(DEFAULT_SET).expect("bench/retention_set.txt");
        files = list
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(PathBuf::from)
            .collect();
    }
    let tallies = measure(&ctx, &files, &Level::ALL, &Method::ALL);
    print_table(&tallies, files.len());
}
