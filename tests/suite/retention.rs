//! SPEC §7 in small: the retention benchmark (examples/retention) on three of the repository's
//! long agent trajectories, at two budgets, so that what `fit` keeps cannot silently drop.
//! The whole benchmark (every trajectory, every budget) is `cargo run --release --example
//! retention`; docs/retention.md has its figures.

#[path = "../../examples/retention/bench.rs"]
mod bench;
#[path = "../../examples/retention/facts.rs"]
mod facts;

use std::path::{Path, PathBuf};

use bench::{Level, Method, measure};

/// Three agent styles: a function-calling shell agent with exit codes, a tool-calling agent
/// with `<returncode>` results and pytest summaries, and a text-only ReAct agent.
const FILES: &[&str] = &[
    "tests/corpus/openhands_llama4_ponyc4588_fc_shell.json",
    "tests/corpus/miniswe_deepseek_pvlib1154_toolcall_returncode.json",
    "tests/corpus/sweagent_ctf_web_text_react.json",
];

#[test]
fn fit_keeps_what_the_next_turn_needs() {
    let ctx = Path::new(env!("CARGO_BIN_EXE_ctx"));
    let files: Vec<PathBuf> = FILES.iter().map(PathBuf::from).collect();
    let levels = [Level::Quarter, Level::Fixed8k];
    let tallies = measure(ctx, &files, &levels, &Method::ALL);
    for level in levels {
        // A summary keeps the trail of what it replaces: never less than plain fit keeps, and
        // a fair share of the summarized messages' facts.
        let plain = &tallies[&(level, Method::Fit)];
        let summarized = &tallies[&(level, Method::FitSummarize)];
        assert!(
            summarized.retention() >= plain.retention(),
            "at {}: fit+summarize retained {:.1}%, fit {:.1}%",
            level.name(),
            summarized.retention(),
            plain.retention()
        );
        let (found, all) = summarized
            .summary
            .values()
            .fold((0, 0), |(k, n), &(a, b)| (k + a, n + b));
        assert!(
            summarized.summarized > 0 && found * 100 >= all * 30,
            "at {}: the summaries hold {found} of the {all} facts of what they replace",
            level.name()
        );
        let naive = &tallies[&(level, Method::Naive)];
        for method in [Method::Fit, Method::FitSummarize] {
            let t = &tallies[&(level, method)];
            let what = format!("{} at {}", method.name(), level.name());
            assert!(t.runs > 0, "{what}: no feasible run");
            assert_eq!(t.exit3, 0, "{what}: exit 3 on a feasible budget");
            assert_eq!(t.task.0, t.task.1, "{what}: the task was lost");
            assert!(
                t.retention() >= naive.retention() + 15.0,
                "{what}: retained {:.1}%, naive {:.1}%",
                t.retention(),
                naive.retention()
            );
            assert!(
                t.utilization() >= 85.0,
                "{what}: utilization {:.1}%",
                t.utilization()
            );
            assert!(
                t.newest.0 * 10 >= t.newest.1 * 9,
                "{what}: newest result kept in {}/{} runs",
                t.newest.0,
                t.newest.1
            );
        }
    }
}
